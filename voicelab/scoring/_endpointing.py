"""The endpointing curve: cut-in probability and response latency as functions of pause length.

Each hesitation turn (a user turn with pauses, docs/endpointing.md) is one observation: its
longest pause (the one the product had most reason to take for the end of the turn), whether
the product cut in, and its ``response_latency_ms``. Turns are grouped by that pause length
(to the ms). Per pause: the cut-in probability with a binomial interval (the run's
``statistics``: Wilson or Clopper-Pearson, the same as every pass rate), and, over the turns
the product waited through, the median latency with its distribution-free interval (order
statistics: no resampling, nothing seeded). The headline is the pause at which the product cuts
in half the time: linear between the two adjacent points whose probabilities straddle 0.5
(the first such pair in pause order), or said to lie outside the measured range.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..artifacts import EndpointingCurve, EndpointingPoint, TurnMetrics
from ..config import StatisticsConfig
from ._statistics import proportion_interval, quantile_bound

HALF = 0.5


@dataclass(frozen=True)
class Hesitation:
    """One hesitation turn as the curve counts it."""

    pause_ms: float
    cut_in: bool
    latency_ms: float | None = None


def hesitations(turns: Iterable[TurnMetrics]) -> list[Hesitation]:
    """The hesitation turns among ``turns`` (a trial's voice metrics)."""
    return [Hesitation(max(t.user_pauses_ms), bool(t.product_cut_in), t.response_latency_ms)
            for t in turns if t.user_pauses_ms and t.product_cut_in is not None]


def _point(pause_ms: float, group: Sequence[Hesitation],
           statistics: StatisticsConfig) -> EndpointingPoint:
    cut = sum(h.cut_in for h in group)
    rate = proportion_interval(cut, len(group), confidence=statistics.confidence,
                               method=statistics.interval)
    waited = [float(h.latency_ms) for h in group if not h.cut_in and h.latency_ms is not None]
    latency: dict[str, float | None] = {}
    if waited:
        upper = quantile_bound(waited, quantile=HALF, confidence=statistics.confidence)
        lower = quantile_bound(waited, quantile=HALF, confidence=statistics.confidence,
                               side="lower")
        latency = {"latency_median_ms": round(float(upper.estimate or 0.0), 3),
                   "latency_median_low_ms": lower.bound, "latency_median_high_ms": upper.bound}
    return EndpointingPoint(
        pause_ms=pause_ms, turns=len(group), cut_ins=cut, cut_in_probability=rate.estimate,
        cut_in_low=rate.low, cut_in_high=rate.high, method=statistics.interval,
        confidence=statistics.confidence, latency_turns=len(waited), **latency)


def half_cut_in(points: Sequence[EndpointingPoint]) -> tuple[float | None, str]:
    """The pause (ms) at which the cut-in probability reaches 0.5, and how it was found."""
    measured = sorted((p.pause_ms, p.cut_in_probability) for p in points
                      if p.cut_in_probability is not None)
    if not measured:
        return None, "no_data"
    for pause, probability in measured:
        if probability == HALF:
            return pause, "at_point"
    if measured[0][1] > HALF:
        return None, "below_range"
    for (low_pause, low_p), (high_pause, high_p) in zip(measured, measured[1:], strict=False):
        if low_p < HALF < high_p:
            share = (HALF - low_p) / (high_p - low_p)
            return round(low_pause + share * (high_pause - low_pause), 3), "interpolated"
    return None, "above_range"


def endpointing_curve(observations: Iterable[Hesitation], statistics: StatisticsConfig, *,
                      scenario: str | None = None, persona: str | None = None,
                      environment: str | None = None) -> EndpointingCurve | None:
    """The curve of ``observations``; None when there are none (no hesitation turn)."""
    groups: dict[float, list[Hesitation]] = {}
    for observation in observations:
        groups.setdefault(round(observation.pause_ms), []).append(observation)
    if not groups:
        return None
    points = [_point(pause, groups[pause], statistics) for pause in sorted(groups)]
    return curve_of(points, scenario=scenario, persona=persona, environment=environment)


def curve_of(points: Sequence[EndpointingPoint], *, scenario: str | None = None,
             persona: str | None = None, environment: str | None = None) -> EndpointingCurve:
    """A curve of measured points (a matrix: one cell's points per pause length)."""
    ordered = sorted(points, key=lambda p: p.pause_ms)
    pause, how = half_cut_in(ordered)
    return EndpointingCurve(scenario=scenario, persona=persona, environment=environment,
                            points=list(ordered), half_cut_in_pause_ms=pause,
                            half_cut_in=how)
