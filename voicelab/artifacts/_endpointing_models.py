"""The endpointing curve in ``run-report.json`` and ``matrix-report.json`` (docs/endpointing.md):
how often a product cut into a hesitating user's turn, and how long it took to answer when it
waited, as functions of the pause length."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from ._models import ArtifactModel


def without_absent(data: dict[str, object], names: Iterable[str]) -> dict[str, object]:
    """``data`` without the keys in ``names`` whose value is None or an empty list: fields a
    document gained later are written only when they say something, so older documents
    re-score to the same bytes."""
    for name in names:
        if name in data and (data[name] is None or data[name] == []):
            del data[name]
    return data


class EndpointingPoint(ArtifactModel):
    """The hesitation turns whose longest pause was ``pause_ms``."""

    pause_ms: float
    #: hesitation turns, and how many of them the product cut into
    turns: int
    cut_ins: int
    #: cut_ins / turns with its two-sided confidence interval (``method``, ``confidence``)
    cut_in_probability: float | None = None
    cut_in_low: float | None = None
    cut_in_high: float | None = None
    method: Literal["wilson", "clopper_pearson"] = "wilson"
    confidence: float = 0.95
    #: ``response_latency_ms`` of the turns the product waited through (no cut-in): its
    #: median, and the median's distribution-free confidence interval (order statistics;
    #: None with fewer than 6 turns at 95%)
    latency_turns: int = 0
    latency_median_ms: float | None = None
    latency_median_low_ms: float | None = None
    latency_median_high_ms: float | None = None


class EndpointingCurve(ArtifactModel):
    """Cut-in probability and latency over pause length, and the headline: the pause length at
    which the product cuts in half the time (linear between the two points around 0.5)."""

    #: the cells the curve was gathered from (a matrix: its scenario, persona, environment)
    scenario: str | None = None
    persona: str | None = None
    environment: str | None = None
    points: list[EndpointingPoint]
    half_cut_in_pause_ms: float | None = None
    #: how the headline was found: ``interpolated``, ``at_point`` (a measured point is 0.5),
    #: ``below_range`` (the shortest pause is already cut into at least half the time),
    #: ``above_range`` (even the longest is cut into less than half the time), ``no_data``
    half_cut_in: Literal["interpolated", "at_point", "below_range", "above_range",
                         "no_data"] = "no_data"
