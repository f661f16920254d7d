"""Paired comparison of two runs: did the candidate regress against the baseline?

Trials are paired by (cell, seed): a sweep's cells are its matrix cells, a plain run is one cell
(:data:`~._compare_pairs.PLAIN_RUN_CELL`), and a seed replays the same persona wording and environment noise, so
the pair differs only by what changed in the product. Trials of one side without a partner are
counted and listed (``Comparison.unpaired``), never silently dropped.

- Pass rate: exact McNemar test on the discordant pairs and Newcombe's interval of the paired
  difference (see :mod:`voicelab.scoring`).
- Per-turn metrics (latency, dead air, stalls): each trial is reduced to the mean over its turns
  (the trial, not the turn, is the unit that is paired and resampled: turns of one conversation
  are not independent); the median and p95 over trials get paired bootstrap intervals of
  their difference. Pairs where either trial has no value are counted as missing.
- Gates (:class:`Gate`) judge those intervals (:func:`voicelab.scoring.gate_on_interval`);
  without a word about gates, :data:`DEFAULT_GATES` are judged, so a comparison always judges
  something. ``gates=()`` switches them off.
- Nothing comparable (a side without trials, a run against a sweep, different scenarios, no
  common cell and seed) is a :class:`~voicelab.errors.ConfigError`, never a comparison that
  passes for lack of evidence.

Differences are always candidate minus baseline. The trials are paired (and flipped verdicts
found) in :mod:`._compare_pairs`; the result types are in :mod:`._comparison`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..scoring import (
    DEFAULT_RESAMPLES,
    QUANTILE_STATISTICS,
    GateResult,
    gate_on_interval,
    mcnemar_exact,
    paired_bootstrap_difference,
    paired_rate_difference,
    paired_rate_projection,
    proportion_interval,
)
from ._compare_pairs import (
    RunInput,
    Side,
    _check_comparable,
    _flips,
    _frames_of,
    _pair,
    _side,
    _trial_table,
)
from ._comparison import (
    Comparison,
    CostComparison,
    MetricComparison,
    PassRateComparison,
    _unit,
)
from ._frames import Frames

#: Per-turn metrics compared by default (``response_latency_ms`` only where bundles have it).
#: For each of them a larger value is worse.
METRICS = ("first_audio_latency_ms", "response_latency_ms", "dead_air_ms", "playback_stall_ms")
STATISTICS = ("median", "p95")
PASS_RATE = "pass_rate"


# --- gates ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Gate:
    """A regression gate: how much worse the candidate may be, judged on the interval.

    ``metric`` is ``"pass_rate"`` (``allowed_change`` is a drop in rate: 0.05 = 5 points) or a
    per-turn metric (``allowed_change`` is an increase in its unit, of ``statistic``).
    ``strict`` asks for evidence of no regression instead of evidence of one.
    """

    metric: str
    allowed_change: float
    statistic: str | None = None
    strict: bool = False

    def __post_init__(self) -> None:
        if not self.allowed_change >= 0:
            raise ValueError(f"gate {self.metric}: the allowed change must be >= 0, got "
                             f"{self.allowed_change!r}")
        if self.metric == PASS_RATE and self.statistic is not None:
            raise ValueError("the pass-rate gate takes no statistic")
        if self.metric != PASS_RATE and self.statistic not in QUANTILE_STATISTICS:
            raise ValueError(f"gate {self.metric}: statistic must be one of "
                             f"{', '.join(QUANTILE_STATISTICS)}, got {self.statistic!r}")

    @classmethod
    def pass_rate_drop(cls, max_drop: float, *, strict: bool = False) -> Gate:
        """``--max-pass-rate-drop``: the candidate's pass rate may fall by at most ``max_drop``."""
        return cls(PASS_RATE, max_drop, None, strict)

    @classmethod
    def metric_increase(cls, metric: str, max_increase: float, *, statistic: str = "p95",
                        strict: bool = False) -> Gate:
        """``--max-latency-p95-increase-ms``: ``statistic`` of ``metric`` may rise by at most
        ``max_increase``."""
        return cls(metric, max_increase, statistic, strict)

    @property
    def name(self) -> str:
        if self.metric == PASS_RATE:
            return "pass_rate_drop"
        return f"{self.metric}_{self.statistic}_increase"


#: Judged when no gates are given (``voice-evaluator compare`` without gate options): a pass-rate
#: drop whose whole interval lies beyond 5 points, and a p95 increase beyond 100 ms of the
#: first-audio and the speech-to-speech latency (each interval wholly beyond the limit).
DEFAULT_GATES: tuple[Gate, ...] = (
    Gate.pass_rate_drop(0.05),
    Gate.metric_increase("first_audio_latency_ms", 100.0, statistic="p95"),
    Gate.metric_increase("response_latency_ms", 100.0, statistic="p95"),
)


# --- pass rate --------------------------------------------------------------------------------

def _counts(before: np.ndarray, after: np.ndarray) -> dict[str, int]:
    return {"both": int((before & after).sum()), "candidate_only": int((~before & after).sum()),
            "baseline_only": int((before & ~after).sum()),
            "neither": int((~before & ~after).sum())}


def _pass_rate(paired: pd.DataFrame, confidence: float) -> PassRateComparison:
    before = paired["passed_baseline"].to_numpy(dtype=bool)
    after = paired["passed_candidate"].to_numpy(dtype=bool)
    counts = _counts(before, after)
    n = len(paired)
    return PassRateComparison(
        baseline=proportion_interval(int(before.sum()), n, confidence=confidence),
        candidate=proportion_interval(int(after.sum()), n, confidence=confidence),
        **counts, mcnemar_p=mcnemar_exact(counts["baseline_only"], counts["candidate_only"]),
        difference=paired_rate_difference(**counts, confidence=confidence))


def _cells(paired: pd.DataFrame, confidence: float) -> pd.DataFrame:
    rows = []
    for cell, group in paired.groupby("cell", sort=True):
        before = group["passed_baseline"].to_numpy(dtype=bool)
        after = group["passed_candidate"].to_numpy(dtype=bool)
        counts = _counts(before, after)
        difference = paired_rate_difference(**counts, confidence=confidence)
        rows.append({"cell": cell, "pairs": len(group), "baseline_passed": int(before.sum()),
                     "candidate_passed": int(after.sum()), **counts,
                     "difference": difference.estimate, "low": difference.low,
                     "high": difference.high,
                     "mcnemar_p": mcnemar_exact(counts["baseline_only"],
                                                counts["candidate_only"])})
    columns = ["cell", "pairs", "baseline_passed", "candidate_passed", "both", "candidate_only",
               "baseline_only", "neither", "difference", "low", "high", "mcnemar_p"]
    return pd.DataFrame(rows, columns=columns)


# --- metrics ----------------------------------------------------------------------------------

def _per_trial(frames: Frames, metric: str) -> pd.Series:
    """The mean of ``metric`` over each trial's turns, indexed by (run_id, trial_id)."""
    turns = frames.turns
    if metric not in turns.columns or turns.empty:
        return pd.Series(dtype=float, index=pd.MultiIndex.from_arrays([[], []]))
    values = pd.to_numeric(turns[metric], errors="coerce").astype(float)
    keys = [turns["run_id"].astype(str).to_numpy(), turns["trial_id"].astype(str).to_numpy()]
    return values.groupby(keys).mean()


def _values(per_trial: pd.Series, paired: pd.DataFrame, side: Side) -> np.ndarray:
    index = pd.MultiIndex.from_arrays([paired[f"run_id_{side}"], paired[f"trial_id_{side}"]])
    return per_trial.reindex(index).to_numpy(dtype=float)


def _known_metric(metric: str, *frames: Frames) -> bool:
    return metric in METRICS or any(
        metric in f.turns.columns and pd.api.types.is_numeric_dtype(f.turns[metric])
        for f in frames)


def _metric(metric: str, statistic: str, before: np.ndarray, after: np.ndarray, *,
            confidence: float, seed: int, n_resamples: int) -> MetricComparison:
    present = np.isfinite(before) & np.isfinite(after)
    before, after = before[present], after[present]
    q = QUANTILE_STATISTICS[statistic]
    difference = paired_bootstrap_difference(before, after, statistic=statistic,
                                             confidence=confidence, seed=seed,
                                             n_resamples=n_resamples)
    return MetricComparison(
        metric, statistic,
        float(np.percentile(before, q)) if len(before) else None,
        float(np.percentile(after, q)) if len(after) else None,
        difference, int((~present).sum()))


# --- entry point ------------------------------------------------------------------------------

def compare(baseline: RunInput, candidate: RunInput, *, confidence: float = 0.95, seed: int = 0,
            gates: Sequence[Gate] = DEFAULT_GATES,
            n_resamples: int = DEFAULT_RESAMPLES) -> Comparison:
    """Compare a candidate run (or sweep) against a baseline, trial by trial.

    ``baseline`` and ``candidate`` are run directories, sweep directories or loaded
    :class:`Frames` (one run or one sweep per side). ``seed`` seeds every bootstrap, so the
    same inputs give the same result. ``gates`` are judged on the intervals
    (``Comparison.passed`` is False when one blocks); by default :data:`DEFAULT_GATES`,
    ``gates=()`` for none. Raises :class:`ConfigError` when there is nothing to compare (see
    the module docstring).
    """
    before_frames, after_frames = _frames_of(baseline), _frames_of(candidate)
    before_table = _trial_table(before_frames, "baseline")
    after_table = _trial_table(after_frames, "candidate")
    paired, unpaired = _pair(before_table, after_table)
    _check_comparable(before_table, after_table, paired)
    pass_rate = _pass_rate(paired, confidence)

    wanted = {(metric, statistic) for metric in METRICS for statistic in STATISTICS}
    for gate in gates:
        if gate.metric == PASS_RATE:
            continue
        if not _known_metric(gate.metric, before_frames, after_frames):
            raise ConfigError(f"unknown metric {gate.metric!r}; per-turn metrics: "
                              f"{', '.join(METRICS)}", key=gate.name)
        wanted.add((gate.metric, str(gate.statistic)))
    metrics = []
    for metric in sorted({m for m, _ in wanted}, key=_metric_order):
        before_values = _values(_per_trial(before_frames, metric), paired, "baseline")
        after_values = _values(_per_trial(after_frames, metric), paired, "candidate")
        for statistic in sorted({s for m, s in wanted if m == metric},
                                key=lambda s: QUANTILE_STATISTICS[s]):
            metrics.append(_metric(metric, statistic, before_values, after_values,
                                   confidence=confidence, seed=seed, n_resamples=n_resamples))

    comparison = Comparison(
        baseline=_side(before_frames, before_table, confidence),
        candidate=_side(after_frames, after_table, confidence), confidence=confidence,
        seed=seed, pairs=len(paired), pass_rate=pass_rate, metrics=tuple(metrics),
        unpaired=unpaired, flips=_flips(paired, before_frames, after_frames),
        cells=_cells(paired, confidence), cost=_cost(paired))
    return replace(comparison, gates=tuple(_judge(gate, comparison) for gate in gates))


def _cost(paired: pd.DataFrame) -> CostComparison | None:
    """The paired trials' cost on each side (None: no trial of either side has one)."""
    before = pd.to_numeric(paired["cost_total_baseline"], errors="coerce")
    after = pd.to_numeric(paired["cost_total_candidate"], errors="coerce")
    if before.isna().all() and after.isna().all():
        return None
    currencies = {str(c) for side in ("baseline", "candidate")
                  for c in paired[f"cost_currency_{side}"].dropna()}
    incomplete = int((pd.to_numeric(paired["cost_unpriced_baseline"], errors="coerce") > 0)
                     .sum() + (pd.to_numeric(paired["cost_unpriced_candidate"],
                                             errors="coerce") > 0).sum())

    def mean(values: pd.Series) -> float | None:
        return float(values.mean()) if values.notna().any() else None

    def total(values: pd.Series) -> float | None:
        return float(values.sum()) if values.notna().any() else None

    per_before, per_after = mean(before), mean(after)
    note = ""
    change = None
    if len(currencies) > 1:
        note = f"priced in different currencies ({', '.join(sorted(currencies))}): no change"
    elif per_before is not None and per_after is not None:
        change = per_after - per_before
    return CostComparison(per_before, per_after, total(before), total(after), change,
                          next(iter(currencies)) if len(currencies) == 1 else None,
                          incomplete, note)


def _metric_order(metric: str) -> tuple[int, str]:
    return (METRICS.index(metric) if metric in METRICS else len(METRICS), metric)


def _judge(gate: Gate, comparison: Comparison) -> GateResult:
    if gate.metric == PASS_RATE:
        rate = comparison.pass_rate
        counts = {"both": rate.both, "candidate_only": rate.candidate_only,
                  "baseline_only": rate.baseline_only, "neither": rate.neither}
        project = (paired_rate_projection(**counts, confidence=comparison.confidence)
                   if comparison.pairs else None)
        return gate_on_interval(rate.difference, allowed_change=gate.allowed_change,
                                regression="decrease", strict=gate.strict, name=gate.name,
                                unit="rate", project=project)
    compared = comparison.metric(gate.metric, str(gate.statistic))
    return gate_on_interval(compared.difference, allowed_change=gate.allowed_change,
                            regression="increase", strict=gate.strict, name=gate.name,
                            unit=_unit(gate.metric).strip())
