"""Paired comparison of two runs: did the candidate regress against the baseline?

Trials are paired by (cell, seed): a sweep's cells are its matrix cells, a plain run is one cell
(:data:`PLAIN_RUN_CELL`), and a seed replays the same persona wording and environment noise, so
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

Differences are always candidate minus baseline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..scoring import (
    DEFAULT_RESAMPLES,
    QUANTILE_STATISTICS,
    DifferenceInterval,
    GateResult,
    RateInterval,
    gate_on_interval,
    mcnemar_exact,
    paired_bootstrap_difference,
    paired_rate_difference,
    paired_rate_projection,
    proportion_interval,
)
from ._frames import Frames, load_frames
from ._json import Row

#: Per-turn metrics compared by default (``response_latency_ms`` only where bundles have it).
#: For each of them a larger value is worse.
METRICS = ("first_audio_latency_ms", "response_latency_ms", "dead_air_ms", "playback_stall_ms")
STATISTICS = ("median", "p95")
#: The cell of every trial of a plain (non-sweep) run.
PLAIN_RUN_CELL = "run"
PASS_RATE = "pass_rate"

RunInput = Frames | str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
Side = Literal["baseline", "candidate"]


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


# --- results ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSide:
    """What one side of the comparison holds: its runs, trials and overall pass rate."""

    run_ids: tuple[str, ...]
    paths: tuple[str, ...]
    trials: int
    execution_failures: int
    pass_rate: RateInterval

    def to_dict(self) -> Row:
        return {**asdict(self), "run_ids": list(self.run_ids), "paths": list(self.paths),
                "pass_rate": self.pass_rate.to_dict()}


@dataclass(frozen=True)
class PassRateComparison:
    """Pass rates of the paired trials and their difference. ``baseline_only`` pairs broke in
    the candidate, ``candidate_only`` pairs were fixed by it."""

    baseline: RateInterval
    candidate: RateInterval
    both: int
    candidate_only: int
    baseline_only: int
    neither: int
    mcnemar_p: float
    difference: DifferenceInterval

    def to_dict(self) -> Row:
        return {**asdict(self), "baseline": self.baseline.to_dict(),
                "candidate": self.candidate.to_dict(), "difference": self.difference.to_dict()}


@dataclass(frozen=True)
class MetricComparison:
    """``statistic`` over trials of a per-turn metric (each trial: the mean of its turns)."""

    metric: str
    statistic: str
    baseline: float | None
    candidate: float | None
    difference: DifferenceInterval
    missing_pairs: int

    def to_dict(self) -> Row:
        return {**asdict(self), "difference": self.difference.to_dict()}


@dataclass(frozen=True)
class CostComparison:
    """What the paired trials cost on each side (their known amounts: docs/cost.md), per
    trial and in all; the change is candidate minus baseline (None: a side has no known cost,
    or the sides are priced in different currencies)."""

    baseline_per_trial: float | None
    candidate_per_trial: float | None
    baseline_total: float | None
    candidate_total: float | None
    change_per_trial: float | None
    currency: str | None
    #: trials on either side whose cost leaves some usage out (no price, unknown quantity)
    incomplete_trials: int = 0
    note: str = ""

    def to_dict(self) -> Row:
        return asdict(self)

    def text(self) -> str:
        unit = f" {self.currency}" if self.currency else ""
        line = (f"cost per trial {_money(self.baseline_per_trial)} -> "
                f"{_money(self.candidate_per_trial)}{unit}")
        if self.change_per_trial is not None:
            relative = "" if not self.baseline_per_trial else \
                f", {self.change_per_trial / self.baseline_per_trial:+.0%}"
            line += f": change {self.change_per_trial:+.4g}{unit}{relative}"
        line += (f" (paired trials in all: {_money(self.baseline_total)} -> "
                 f"{_money(self.candidate_total)}{unit})")
        if self.incomplete_trials:
            line += f"; {self.incomplete_trials} trial(s) priced only in part"
        return line + (f"; {self.note}" if self.note else "")


def _money(amount: float | None) -> str:
    return "n/a" if amount is None else f"{amount:.4g}"


@dataclass(frozen=True, eq=False)
class Comparison:
    """The paired comparison of a candidate run against a baseline (see the module docstring).

    ``unpaired``: one row per trial without a partner (side, cell, seed, trial_id, path).
    ``flips``: one row per verdict that changed between paired trials, with both bundles.
    ``cells``: the pass-rate comparison per cell.
    """

    baseline: RunSide
    candidate: RunSide
    confidence: float
    seed: int
    pairs: int
    pass_rate: PassRateComparison
    metrics: tuple[MetricComparison, ...]
    unpaired: pd.DataFrame
    flips: pd.DataFrame
    cells: pd.DataFrame
    gates: tuple[GateResult, ...] = field(default=())
    #: what the paired trials cost (None: neither side's bundles kept a cost)
    cost: CostComparison | None = None

    @property
    def failed_gates(self) -> tuple[GateResult, ...]:
        return tuple(g for g in self.gates if g.blocks)

    @property
    def passed(self) -> bool:
        """No gate blocks (a CI exits 3 otherwise). With ``gates=()``, True."""
        return not self.failed_gates

    def metric(self, metric: str, statistic: str) -> MetricComparison:
        for compared in self.metrics:
            if (compared.metric, compared.statistic) == (metric, statistic):
                return compared
        raise KeyError(f"{metric} {statistic} was not compared")

    def to_dict(self) -> Row:
        """JSON-ready: plain types, NaN as None."""
        unpaired_counts = self.unpaired["side"].value_counts()
        return {
            "confidence": self.confidence, "seed": self.seed,
            "baseline": self.baseline.to_dict(), "candidate": self.candidate.to_dict(),
            "pairs": self.pairs,
            "unpaired": {"baseline": int(unpaired_counts.get("baseline", 0)),
                         "candidate": int(unpaired_counts.get("candidate", 0)),
                         "trials": _records(self.unpaired)},
            "pass_rate": self.pass_rate.to_dict(),
            "metrics": [m.to_dict() for m in self.metrics],
            "cells": _records(self.cells), "flips": _records(self.flips),
            "gates": [g.to_dict() for g in self.gates], "passed": self.passed,
            "cost": self.cost.to_dict() if self.cost is not None else None,
        }

    def lines(self) -> list[str]:
        """A short text summary for a terminal or a log."""
        rate = self.pass_rate
        unpaired = self.unpaired["side"].value_counts()
        out = [f"baseline {_side_text(self.baseline)}, candidate {_side_text(self.candidate)}",
               f"{self.pairs} pairs by (cell, seed); unpaired: "
               f"{int(unpaired.get('baseline', 0))} baseline, "
               f"{int(unpaired.get('candidate', 0))} candidate trials",
               f"pass rate {rate.baseline} -> {rate.candidate}: change "
               f"{_interval_text(rate.difference, percent=True)}; {rate.baseline_only} broke, "
               f"{rate.candidate_only} fixed, exact McNemar p = {rate.mcnemar_p:.3g}"]
        if self.cost is not None:
            out.append(self.cost.text())
        for compared in self.metrics:
            if compared.baseline is None and compared.candidate is None:
                continue
            missing = f", {compared.missing_pairs} pairs missing" if compared.missing_pairs else ""
            unit = _unit(compared.metric)
            out.append(f"{compared.metric} {compared.statistic} {_number(compared.baseline)} -> "
                       f"{_number(compared.candidate)}{unit}: change "
                       f"{_interval_text(compared.difference)}{unit}{missing}")
        if len(self.flips):
            counts = self.flips.groupby(["verdict", "change"], observed=True).size()
            listed = ", ".join(f"{verdict} {change} in {count}"
                               for (verdict, change), count in counts.items())
            out.append(f"{len(self.flips)} verdict flips: {listed}")
        for gate in self.gates:
            mark = "FAILED" if gate.blocks else gate.status
            out.append(f"gate {mark}: {gate.message}")
        return out


def _side_text(side: RunSide) -> str:
    failures = f", {side.execution_failures} failed to execute" if side.execution_failures else ""
    return f"{', '.join(side.run_ids) or '-'} ({side.trials} trials{failures})"


def _unit(metric: str) -> str:
    return " ms" if metric.endswith("_ms") else ""


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _interval_text(interval: DifferenceInterval, *, percent: bool = False) -> str:
    def show(value: float | None) -> str:
        if value is None:
            return "n/a"
        return f"{value * 100:+.1f} points" if percent else f"{value:+.1f}"

    if not interval.defined:
        return f"{show(interval.estimate)} (no interval: {interval.note})"
    return (f"{show(interval.estimate)} ({interval.confidence:.0%} CI {show(interval.low)} to "
            f"{show(interval.high)})")


def _records(frame: pd.DataFrame) -> list[Row]:
    return json.loads(frame.to_json(orient="records", double_precision=15))


# --- pairing ----------------------------------------------------------------------------------

_TRIAL_COLUMNS = ["cell", "seed", "run_id", "trial_id", "scenario_id", "passed", "executed",
                  "path", "cost_total", "cost_currency", "cost_unpriced"]
_EMPTY_TYPES = {"seed": "int64", "passed": bool, "executed": bool, "cost_total": float,
                "cost_unpriced": float}


def _frames_of(run: RunInput) -> Frames:
    return run if isinstance(run, Frames) else load_frames(run, events=False)


def _trial_table(frames: Frames, side: Side) -> pd.DataFrame:
    trials = frames.trials
    if trials.empty:
        return pd.DataFrame({column: pd.Series(dtype=_EMPTY_TYPES.get(column, object))
                             for column in _TRIAL_COLUMNS})
    cells = trials["cell"].astype(object)
    table = pd.DataFrame({
        "cell": cells.where(cells.notna(), PLAIN_RUN_CELL).astype(str),
        "seed": trials["seed"].astype("int64"),
        "run_id": trials["run_id"].astype(str), "trial_id": trials["trial_id"].astype(str),
        "scenario_id": (trials["scenario_id"].astype(str) if "scenario_id" in trials
                        else pd.Series("", index=trials.index, dtype=object)),
        "passed": trials["passed"].fillna(False).astype(bool),
        "executed": (trials["execution_status"].astype(str) == "succeeded").to_numpy(),
        "path": trials["path"].astype(str),
        **{column: (pd.to_numeric(trials[column], errors="coerce") if column != "cost_currency"
                    else trials[column].astype(object))
           if column in trials else pd.Series(float("nan") if column != "cost_currency"
                                              else None, index=trials.index)
           for column in ("cost_total", "cost_currency", "cost_unpriced")}})
    duplicated = table[table.duplicated(["cell", "seed"], keep=False)]
    if len(duplicated):
        first = duplicated.iloc[0]
        runs = sorted(duplicated.loc[(duplicated["cell"] == first["cell"])
                                     & (duplicated["seed"] == first["seed"]), "run_id"])
        raise ConfigError(f"{len(duplicated)} trials share a cell and seed (cell {first['cell']}, "
                          f"seed {first['seed']}: runs {', '.join(runs)}); give one run or one "
                          "sweep per side", source=side)
    return table.reset_index(drop=True)


def _side(frames: Frames, table: pd.DataFrame, confidence: float) -> RunSide:
    paths = tuple(str(p) for p in frames.runs["path"].dropna()) if "path" in frames.runs else ()
    return RunSide(run_ids=tuple(str(r) for r in frames.runs["run_id"]), paths=paths,
                   trials=len(table), execution_failures=int((~table["executed"]).sum()),
                   pass_rate=proportion_interval(int(table["passed"].sum()), len(table),
                                                 confidence=confidence))


def _pair(baseline: pd.DataFrame, candidate: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    merged = baseline.merge(candidate, on=["cell", "seed"], how="outer", indicator=True,
                            suffixes=("_baseline", "_candidate"), sort=True)
    paired = merged[merged["_merge"] == "both"].drop(columns="_merge").reset_index(drop=True)
    rows = []
    for side, which in (("baseline", "left_only"), ("candidate", "right_only")):
        alone = merged[merged["_merge"] == which]
        rows.append(pd.DataFrame({"side": side, "cell": alone["cell"], "seed": alone["seed"],
                                  "trial_id": alone[f"trial_id_{side}"],
                                  "path": alone[f"path_{side}"]}))
    return paired, pd.concat(rows, ignore_index=True)


def _check_comparable(baseline: pd.DataFrame, candidate: pd.DataFrame,
                      paired: pd.DataFrame) -> None:
    """Refuse what has nothing to compare: a comparison without pairs would pass every gate for
    lack of evidence, and pairs of different scenarios compare unrelated conversations."""
    for side, table in (("baseline", baseline), ("candidate", candidate)):
        if table.empty:
            raise ConfigError(f"nothing to compare: the {side} has no trials", source=side)
    plain = {side: bool((table["cell"] == PLAIN_RUN_CELL).all())
             for side, table in (("baseline", baseline), ("candidate", candidate))}
    if plain["baseline"] != plain["candidate"]:
        run, sweep = ("baseline", "candidate") if plain["baseline"] else ("candidate", "baseline")
        raise ConfigError(f"nothing to compare: the {run} is a run and the {sweep} a sweep; "
                          "compare a run with a run, a sweep with a sweep", source="candidate")
    different = paired[paired["scenario_id_baseline"] != paired["scenario_id_candidate"]]
    if len(different):
        first = different.iloc[0]
        raise ConfigError(f"nothing to compare: different scenarios (baseline "
                          f"{first['scenario_id_baseline']!r}, candidate "
                          f"{first['scenario_id_candidate']!r} in cell {first['cell']})",
                          source="candidate")
    if paired.empty:
        raise ConfigError("nothing to compare: no trial of the candidate has the cell and seed "
                          "of a baseline trial (run both with the same seeds and matrix)",
                          source="candidate")


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


# --- flipped verdicts -------------------------------------------------------------------------

_FLIP_COLUMNS = ["cell", "seed", "verdict", "change", "critical", "baseline_why",
                 "candidate_why", "baseline_trial_id", "candidate_trial_id", "baseline_path",
                 "candidate_path"]


def _flips(paired: pd.DataFrame, baseline: Frames, candidate: Frames) -> pd.DataFrame:
    sides = []
    for side, frames in (("baseline", baseline), ("candidate", candidate)):
        verdicts = frames.verdicts
        table = pd.DataFrame({
            "run_id": verdicts["run_id"].astype(str), "trial_id": verdicts["trial_id"].astype(str),
            "verdict": verdicts["name"].astype(str),
            f"{side}_passed": verdicts["passed"].astype(bool),
            f"{side}_critical": verdicts["critical"].astype(bool),
            f"{side}_why": verdicts["why"].astype(object)})
        keyed = paired[["cell", "seed", f"run_id_{side}", f"trial_id_{side}", f"path_{side}"]]
        sides.append(keyed.merge(table, left_on=[f"run_id_{side}", f"trial_id_{side}"],
                                 right_on=["run_id", "trial_id"])
                     .drop(columns=["run_id", "trial_id", f"run_id_{side}"])
                     .rename(columns={f"trial_id_{side}": f"{side}_trial_id",
                                      f"path_{side}": f"{side}_path"}))
    both = sides[0].merge(sides[1], on=["cell", "seed", "verdict"])
    flipped = both[both["baseline_passed"] != both["candidate_passed"]].copy()
    flipped["change"] = np.where(flipped["baseline_passed"], "broke", "fixed")
    flipped["critical"] = flipped["candidate_critical"] | flipped["baseline_critical"]
    return flipped[_FLIP_COLUMNS].sort_values(["cell", "seed", "verdict"]).reset_index(drop=True)


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
