"""Simulation held against reality: per caller metric, two samples compared, and what to change.

:func:`compare_realism` takes the observations of :func:`caller_behaviour` of a simulated run
and of recorded production calls and, per metric, gives both sides' sizes and medians, the
two-sided Mann-Whitney U and Kolmogorov-Smirnov p-values, Cliff's delta (P(real > simulated)
minus P(real < simulated): the rank effect the U test tests), Hedges' g (the mean difference in
pooled standard deviations, small-sample corrected), the ratio of the medians and the
Hodges-Lehmann shift (the median of all differences real - simulated, in the metric's unit).
Holm's step-down correction runs across the metrics tested; a metric is ``significant`` when its
Holm-adjusted p-value of the chosen test is below ``alpha``, and ``differs`` when it is
significant and its shift is at least the metric's ``min_difference`` (hundreds of turns make a
0.1 dB difference significant; nobody should change a suite for it). Fewer than ``min_n``
observations on a side: not tested, said in ``note``.

The realism table maps each metric to the voicelab setting that drives it (persona, script,
environment keys as written in the YAML files) and says which way to move it so the simulation
resembles the recorded callers; ordered by effect size (|Cliff's delta|). Response latency and
dead air are the agent's: no caller setting moves them.

Observations of one call are not independent (a slow caller is slow in every turn): with few
calls, read the p-values as a screen and the effect sizes as the finding (docs/sim-vs-real.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
import pandas as pd
from scipy import stats

from ._frames import Frames
from ._realism import CALLER_METRICS, PRODUCTION, SIMULATION, caller_behaviour

Test = Literal["mannwhitney", "ks"]
BehaviourSource: TypeAlias = (pd.DataFrame | Frames | str | os.PathLike[str]
                   | Iterable[str | os.PathLike[str]])

REALISM_COLUMNS = ("metric", "unit", "n_simulated", "n_real", "median_simulated", "median_real",
                   "median_ratio", "shift", "cliffs_delta", "hedges_g", "mannwhitney_p", "ks_p",
                   "p_holm", "significant", "min_difference", "differs", "direction", "note")

#: The smallest shift (real minus simulated, the metric's unit) worth changing a suite for: a
#: difference below it is no finding, however significant (many turns make 0.1 dB significant).
DEFAULT_MIN_DIFFERENCES: dict[str, float] = {
    "user_turn_ms": 200.0,
    "pause_ms": 100.0,
    "turn_pause_ms": 100.0,
    "barge_in_rate": 0.05,
    "caller_words_per_minute": 10.0,
    "speech_to_noise_db": 3.0,
    "talk_ratio": 0.1,
    "response_latency_ms": 50.0,
    "dead_air_ms": 50.0,
}
#: Pairs beyond this: the Hodges-Lehmann shift is taken over a seeded sample of the pairs.
_MAX_PAIRS = 1_000_000


@dataclass(frozen=True)
class _Phrase:
    """How to say that real callers have more (``more``) or less (``less``) of a metric."""

    more: str
    less: str


_PHRASES = {
    "user_turn_ms": _Phrase("real callers speak longer turns", "real callers speak shorter turns"),
    "pause_ms": _Phrase("real callers pause longer", "real callers pause more briefly"),
    "turn_pause_ms": _Phrase("real callers spend more of a turn pausing",
                             "real callers spend less of a turn pausing"),
    "barge_in_rate": _Phrase("real callers barge in more often",
                             "real callers barge in less often"),
    "caller_words_per_minute": _Phrase("real callers speak faster", "real callers speak slower"),
    "speech_to_noise_db": _Phrase("real callers are heard over less noise",
                                  "real callers call from noisier places"),
    "talk_ratio": _Phrase("the agent talks more per caller second in real calls",
                          "the agent talks less per caller second in real calls"),
    "response_latency_ms": _Phrase("the agent answers real callers more slowly",
                                   "the agent answers real callers faster"),
    "dead_air_ms": _Phrase("real calls have more dead air", "real calls have less dead air"),
}


@dataclass(frozen=True)
class Knob:
    """A setting that moves a metric: ``up`` / ``down`` say what to do to it for more / less."""

    setting: str
    up: str
    down: str


@dataclass(frozen=True)
class MetricDriver:
    #: ``caller`` (persona and script), ``environment``, ``caller and agent`` or ``agent``
    owner: str
    knobs: tuple[Knob, ...] = ()


#: What drives each caller metric in a voicelab suite (the keys as written in its YAML files).
DRIVERS: dict[str, MetricDriver] = {
    "user_turn_ms": MetricDriver("caller", (
        Knob("persona speech.rate", "lower", "raise"),
        Knob("script turns[].response", "lengthen the texts", "shorten the texts"))),
    "pause_ms": MetricDriver("caller", (
        Knob("script {pause: S} markers / turns[].pauses", "lengthen", "shorten"),
        Knob("persona_settings.hesitation.pause_seconds", "raise", "lower"))),
    "turn_pause_ms": MetricDriver("caller", (
        Knob("script {pause: S} markers", "add more or longer", "use fewer or shorter"),
        Knob("persona_settings.hesitation.probability", "raise", "lower"))),
    "barge_in_rate": MetricDriver("caller", (
        Knob("script turns[].interrupt_after_seconds", "give it to more turns",
             "give it to fewer turns"),
        Knob("persona session_behavior.interrupts", "set true", "set false"))),
    "caller_words_per_minute": MetricDriver("caller", (
        Knob("persona speech.rate", "raise", "lower"),)),
    "speech_to_noise_db": MetricDriver("environment", (
        Knob("environment base_noise_volume / background_voices_volume", "lower", "raise"),
        Knob("environment impact", "lower", "raise"))),
    "talk_ratio": MetricDriver("caller and agent", (
        Knob("script turns[].response", "shorten the texts", "lengthen the texts"),)),
    "response_latency_ms": MetricDriver("agent"),
    "dead_air_ms": MetricDriver("agent"),
}


@dataclass(frozen=True)
class RealismReport:
    """Per metric, simulated against real (``table``: ``REALISM_COLUMNS``), and the settings to
    change (``realism``: :func:`realism_table`)."""

    table: pd.DataFrame
    realism: pd.DataFrame
    alpha: float
    test: Test

    @property
    def differences(self) -> pd.DataFrame:
        """The rows of metrics that differ (``differs``), largest effect first."""
        found = self.table[self.table["differs"]]
        return found.reindex(found["cliffs_delta"].abs().sort_values(ascending=False).index)

    def summary(self) -> str:
        """One sentence naming the differences (largest effect first)."""
        found = self.differences
        if found.empty:
            return (f"No caller metric differs between the simulation and the real calls "
                    f"(Holm-corrected {self.test} test at alpha {self.alpha:g}, and a shift "
                    f"of at least each metric's min_difference).")
        parts = [f"{row.direction} (median {row.median_real:.4g} vs {row.median_simulated:.4g}"
                 f" {row.unit}, Cliff's delta {row.cliffs_delta:+.2f})"
                 for row in found.itertuples()]
        return "Compared with the simulation, " + "; ".join(parts) + "."


def _behaviour(given: BehaviourSource, source: str) -> pd.DataFrame:
    if isinstance(given, pd.DataFrame):
        if not {"metric", "value"} <= set(given.columns):
            raise ValueError(f"the {source} side is no caller_behaviour frame (it needs the "
                             f"columns metric and value)")
        return given
    return caller_behaviour(given)


def _values(frame: pd.DataFrame, metric: str) -> np.ndarray:
    values = pd.to_numeric(frame.loc[frame["metric"].astype(object) == metric, "value"],
                           errors="coerce").to_numpy(dtype=float)
    return values[np.isfinite(values)]


def cliffs_delta(simulated: Sequence[float] | np.ndarray,
                 real: Sequence[float] | np.ndarray) -> float:
    """P(real > simulated) - P(real < simulated) over all pairs (ties count neither way)."""
    x, y = np.sort(np.asarray(simulated, dtype=float)), np.asarray(real, dtype=float)
    if not x.size or not y.size:
        return float("nan")
    below = np.searchsorted(x, y, side="left").sum()  # pairs with real > simulated
    above = (x.size - np.searchsorted(x, y, side="right")).sum()  # real < simulated
    return float((below - above) / (x.size * y.size))


def hedges_g(simulated: Sequence[float] | np.ndarray, real: Sequence[float] | np.ndarray
             ) -> float:
    """(mean real - mean simulated) / pooled SD, times the small-sample correction J."""
    x, y = np.asarray(simulated, dtype=float), np.asarray(real, dtype=float)
    n = x.size + y.size
    if x.size < 2 or y.size < 2:
        return float("nan")
    pooled = np.sqrt(((x.size - 1) * x.var(ddof=1) + (y.size - 1) * y.var(ddof=1)) / (n - 2))
    difference = y.mean() - x.mean()
    if pooled == 0:
        return 0.0 if difference == 0 else float(np.copysign(np.inf, difference))
    return float(difference / pooled * (1 - 3 / (4 * n - 9)))


def hodges_lehmann(simulated: Sequence[float] | np.ndarray,
                   real: Sequence[float] | np.ndarray) -> float:
    """The median of all pairwise differences real - simulated: the location shift the
    Mann-Whitney test looks for (over a seeded sample of 10**6 pairs for bigger samples)."""
    x, y = np.asarray(simulated, dtype=float), np.asarray(real, dtype=float)
    if not x.size or not y.size:
        return float("nan")
    if x.size * y.size <= _MAX_PAIRS:
        return float(np.median(np.subtract.outer(y, x)))
    rng = np.random.default_rng(0)
    return float(np.median(rng.choice(y, _MAX_PAIRS) - rng.choice(x, _MAX_PAIRS)))


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and does not count as a test)."""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    tested = np.flatnonzero(np.isfinite(p))
    if not tested.size:
        return adjusted
    order = tested[np.argsort(p[tested], kind="stable")]
    m = order.size
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def _tests(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if np.ptp(np.concatenate([x, y])) == 0:
        return 1.0, 1.0  # every observation equal: nothing differs
    mannwhitney = stats.mannwhitneyu(y, x, alternative="two-sided").pvalue
    ks = stats.ks_2samp(y, x, alternative="two-sided").pvalue
    return float(mannwhitney), float(ks)


def _sign(delta: float, n_simulated: int, n_real: int) -> int:
    """+1: real callers have more of the metric; -1: less; 0: no difference or no data. A
    metric only one side has (pauses the simulation never makes) points towards that side."""
    if np.isfinite(delta):
        return int(np.sign(delta))
    if n_real and not n_simulated:
        return 1
    if n_simulated and not n_real:
        return -1
    return 0


def _direction(metric: str, delta: float, n_simulated: int, n_real: int) -> str:
    sign = _sign(delta, n_simulated, n_real)
    if not n_simulated or not n_real:
        side = "real calls" if n_real else "simulation"
        return f"only the {side} has {metric}" if sign else "no observations"
    if sign == 0:
        return "no difference"
    phrase = _PHRASES.get(metric, _Phrase(f"real calls have more {metric}",
                                          f"real calls have less {metric}"))
    return phrase.more if sign > 0 else phrase.less


def _row(metric: str, unit: str, x: np.ndarray, y: np.ndarray, min_n: int) -> dict[str, object]:
    median_x = float(np.median(x)) if x.size else np.nan
    median_y = float(np.median(y)) if y.size else np.nan
    row: dict[str, object] = {
        "metric": metric, "unit": unit, "n_simulated": x.size, "n_real": y.size,
        "median_simulated": median_x, "median_real": median_y,
        "median_ratio": median_y / median_x if x.size and y.size and median_x != 0 else np.nan,
        "shift": hodges_lehmann(x, y), "cliffs_delta": cliffs_delta(x, y), "hedges_g": hedges_g(x, y),
        "mannwhitney_p": np.nan, "ks_p": np.nan, "note": ""}
    if x.size < min_n or y.size < min_n:
        side = "simulated" if x.size < min_n else "real"
        row["note"] = f"not tested: {min(x.size, y.size)} {side} observation(s) (< {min_n})"
    else:
        row["mannwhitney_p"], row["ks_p"] = _tests(x, y)
    return row


def compare_realism(simulated: BehaviourSource, real: BehaviourSource, *, alpha: float = 0.05,
                    test: Test = "mannwhitney", min_n: int = 3,
                    metrics: Sequence[str] | None = None,
                    min_differences: Mapping[str, float] | None = None) -> RealismReport:
    """Each caller metric of ``simulated`` against ``real`` (see the module docstring).

    Either side: a :func:`caller_behaviour` frame, or what it reads (Frames, bundle paths).
    ``metrics``: the metrics to compare (default: every one in ``CALLER_METRICS`` either side
    has). ``test``: the p-value Holm's correction and ``significant`` use. A metric ``differs``
    when it is significant and its Hodges-Lehmann ``shift`` is at least its
    ``min_difference`` (``DEFAULT_MIN_DIFFERENCES`` updated by ``min_differences``; 0 for a
    metric named in neither).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    if test not in ("mannwhitney", "ks"):
        raise ValueError(f"test must be 'mannwhitney' or 'ks', got {test!r}")
    if min_n < 2:
        raise ValueError(f"min_n must be at least 2, got {min_n!r}")
    sim, rea = _behaviour(simulated, SIMULATION), _behaviour(real, PRODUCTION)
    present = set(sim["metric"].astype(object)) | set(rea["metric"].astype(object))
    if metrics is None:
        chosen = [m for m in CALLER_METRICS if m in present]
        chosen += sorted(str(m) for m in present if m not in CALLER_METRICS)
    else:
        unknown = [m for m in metrics if m not in present and m not in CALLER_METRICS]
        if unknown:
            raise ValueError(f"unknown metric(s) {', '.join(map(repr, unknown))}; caller "
                             f"metrics: {', '.join(CALLER_METRICS)}")
        chosen = list(metrics)
    rows = [_row(m, CALLER_METRICS.get(m, ""), _values(sim, m), _values(rea, m), min_n)
            for m in chosen]
    table = pd.DataFrame(rows, columns=[c for c in REALISM_COLUMNS if c not in (
        "p_holm", "significant", "min_difference", "differs", "direction")])
    tested = table["mannwhitney_p" if test == "mannwhitney" else "ks_p"].to_numpy(dtype=float)
    table["p_holm"] = holm(tested)
    table["significant"] = (table["p_holm"] < alpha).to_numpy(dtype=bool)
    smallest = {**DEFAULT_MIN_DIFFERENCES, **(min_differences or {})}
    table["min_difference"] = [float(smallest.get(m, 0.0)) for m in table["metric"]]
    table["differs"] = table["significant"] & (table["shift"].abs() >= table["min_difference"])
    table["direction"] = [_direction(m, d, x, y) for m, d, x, y in
                          zip(table["metric"], table["cliffs_delta"], table["n_simulated"],
                              table["n_real"], strict=True)]
    table = table[list(REALISM_COLUMNS)]
    for column in ("n_simulated", "n_real"):
        table[column] = table[column].astype(int)
    return RealismReport(table=table, realism=realism_table(table), alpha=alpha, test=test)


def realism_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per metric of a :class:`RealismReport` table: who owns it, whether it differs, and the
    settings to move (and which way) for the simulation to resemble the real callers; largest
    effect (|Cliff's delta|) first."""
    rows = []
    for row in table.itertuples(index=False):
        driver = DRIVERS.get(str(row.metric), MetricDriver("unknown"))
        delta = float(row.cliffs_delta)
        sign = _sign(delta, int(row.n_simulated), int(row.n_real))
        if driver.owner == "agent":
            change = "the agent's figure: not a caller setting (compare builds instead)"
        elif not driver.knobs:
            change = ""
        elif sign == 0:
            change = "nothing to change"
        else:
            change = "; ".join(f"{knob.up if sign > 0 else knob.down}: {knob.setting}"
                               for knob in driver.knobs)
        rows.append({"metric": row.metric, "owner": driver.owner,
                     "differs": bool(row.differs), "direction": row.direction,
                     "effect": abs(delta) if np.isfinite(delta) else np.nan,
                     "cliffs_delta": delta, "change": change,
                     "settings": ", ".join(k.setting for k in driver.knobs)})
    frame = pd.DataFrame(rows, columns=["metric", "owner", "differs", "direction", "effect",
                                        "cliffs_delta", "change", "settings"])
    return frame.sort_values("effect", ascending=False, na_position="last",
                             kind="stable").reset_index(drop=True)
