"""Paired comparison of two runs of the same seeded trials, and the gates judged on it.

- Paired pass/fail: exact (conditional) McNemar test on the discordant pairs, and Newcombe's
  hybrid score interval for a difference of paired proportions (Newcombe 1998, *Improved
  confidence intervals for the difference between binomial proportions based on paired data*,
  Stat. Med. 17:2635-2650, method 10).
- Paired measurements: bootstrap intervals of a difference of quantiles (BCa, Efron 1987) with
  :func:`scipy.stats.bootstrap` resampling pairs.
- Gates judge the interval of a difference, never its point estimate.

The single-run statistics it builds on (rates, their intervals, quantile bounds) are in
:mod:`._statistics`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ._statistics import (
    DEFAULT_RESAMPLES,
    MAX_TRIALS,
    QUANTILE_STATISTICS,
    GateStatus,
    Regression,
    bootstrap_rng_keyword,
    check_confidence,
    check_count,
    scipy_stats,
    smallest_count,
    wilson_bounds,
    z_score,
)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts ``b`` and ``c``.

    Conditional on b + c discordant pairs, b ~ Binomial(b + c, 1/2) under no change; the
    p-value doubles the smaller tail (capped at 1). No discordant pair gives 1.0.
    """
    b, c = check_count("b", b), check_count("c", c)
    if b + c == 0:
        return 1.0
    return min(1.0, 2.0 * float(scipy_stats().binom.cdf(min(b, c), b + c, 0.5)))


@dataclass(frozen=True)
class DifferenceInterval:
    """A difference (candidate minus baseline) with its confidence interval.

    ``n`` counts the pairs. ``low``/``high`` are ``None`` when there is nothing to bound (no
    pair, or one pair for a bootstrap); ``note`` then says why, and also records fallbacks.
    """

    estimate: float | None
    low: float | None
    high: float | None
    confidence: float
    method: str
    n: int
    note: str = ""

    @property
    def defined(self) -> bool:
        return self.low is not None and self.high is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _newcombe_paired(both: float, candidate_only: float, baseline_only: float, neither: float,
                     *, z: float) -> tuple[float, float, float]:
    """Newcombe's method 10 on (possibly real-valued) cell counts: estimate, low, high."""
    n = both + candidate_only + baseline_only + neither
    candidate = (both + candidate_only) / n
    baseline = (both + baseline_only) / n
    candidate_low, candidate_high = wilson_bounds(both + candidate_only, n, z=z)
    baseline_low, baseline_high = wilson_bounds(both + baseline_only, n, z=z)
    margins = ((both + candidate_only) * (baseline_only + neither)
               * (both + baseline_only) * (candidate_only + neither))
    phi = 0.0
    if margins > 0:
        cross = both * neither - candidate_only * baseline_only
        # Newcombe's correction: a positive association shrinks by n/2, never below zero
        corrected = cross - n / 2.0 if cross > n / 2.0 else (cross if cross < 0 else 0.0)
        phi = corrected / math.sqrt(margins)
    estimate = candidate - baseline
    below_c, above_b = candidate - candidate_low, baseline_high - baseline
    above_c, below_b = candidate_high - candidate, baseline - baseline_low
    delta = math.sqrt(max(0.0, below_c**2 - 2 * phi * below_c * above_b + above_b**2))
    epsilon = math.sqrt(max(0.0, above_c**2 - 2 * phi * above_c * below_b + below_b**2))
    return estimate, max(-1.0, estimate - delta), min(1.0, estimate + epsilon)


def paired_rate_difference(*, both: int, candidate_only: int, baseline_only: int, neither: int,
                           confidence: float = 0.95) -> DifferenceInterval:
    """The difference of paired pass rates (candidate minus baseline) with Newcombe's hybrid
    score interval (Newcombe 1998, Stat. Med. 17:2635-2650, method 10).

    The four counts are the pairs where both runs passed, only the candidate passed, only the
    baseline passed, and neither. The interval combines the two marginal Wilson intervals,
    corrected by the phi correlation of the pairs (Newcombe's continuity-adjusted phi), so it
    stays within [-1, 1] and behaves at 0 or n discordant pairs where Wald fails.
    """
    counts = [check_count(name, value) for name, value in (
        ("both", both), ("candidate_only", candidate_only), ("baseline_only", baseline_only),
        ("neither", neither))]
    confidence = check_confidence(confidence)
    n = sum(counts)
    if n == 0:
        return DifferenceInterval(None, None, None, confidence, "newcombe", 0, "no paired trials")
    estimate, low, high = _newcombe_paired(*counts, z=z_score(confidence))
    return DifferenceInterval(estimate, low, high, confidence, "newcombe", n)


def paired_rate_projection(*, both: int, candidate_only: int, baseline_only: int, neither: int,
                           confidence: float = 0.95
                           ) -> Callable[[int], tuple[float, float]]:
    """``m -> (low, high)``: the Newcombe interval if m pairs showed the same proportions of the
    four outcomes (the trial counts a strict gate names)."""
    counts = (both, candidate_only, baseline_only, neither)
    n = sum(counts)
    z = z_score(check_confidence(confidence))

    def at(pairs: int) -> tuple[float, float]:
        _, low, high = _newcombe_paired(*(count * pairs / n for count in counts), z=z)
        return low, high

    return at


# --- paired measurements ----------------------------------------------------------------------

def paired_bootstrap_difference(baseline: Sequence[float] | np.ndarray,
                                candidate: Sequence[float] | np.ndarray, *,
                                statistic: str = "median", confidence: float = 0.95,
                                seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES
                                ) -> DifferenceInterval:
    """Bootstrap interval of ``statistic(candidate) - statistic(baseline)`` over paired values.

    Pairs are resampled together (``scipy.stats.bootstrap(paired=True)``), so whatever the two
    runs share per pair (the seed, the persona's wording) cancels out. The BCa interval is
    used; ``seed`` makes it reproducible. Values must be finite (drop missing pairs first and
    count them). Degenerate inputs do not raise:

    - no pair: estimate, low and high are ``None``;
    - one pair: the estimate, no interval (``low``/``high`` ``None``);
    - every resample gives the same difference (e.g. all values equal): low = high = estimate,
      the bootstrap's honest but overconfident answer; ``note`` says so;
    - BCa undefined (its jackknife acceleration is 0/0 on heavily tied data): the percentile
      interval of the same resamples, ``method`` says ``bootstrap-percentile``.

    A high quantile needs pairs: below ~20, the p95 is the largest value or two, its bootstrap
    distribution has few distinct values and the interval understates the uncertainty.
    """
    if statistic not in QUANTILE_STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; expected one of "
                         f"{', '.join(QUANTILE_STATISTICS)}")
    confidence = check_confidence(confidence)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples!r}")
    before = np.asarray(baseline, dtype=float)
    after = np.asarray(candidate, dtype=float)
    if before.ndim != 1 or before.shape != after.shape:
        raise ValueError("baseline and candidate must be 1-D and of equal length (one value per "
                         f"pair), got shapes {before.shape} and {after.shape}")
    if not (np.isfinite(before).all() and np.isfinite(after).all()):
        raise ValueError("baseline and candidate must be finite: drop pairs with a missing value "
                         "first (and report how many)")
    q = QUANTILE_STATISTICS[statistic]
    n = len(before)

    def difference(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.percentile(second, q, axis=axis) - np.percentile(first, q, axis=axis)

    def result(low: float | None, high: float | None, method: str = "bootstrap-bca",
               note: str = "") -> DifferenceInterval:
        estimate = float(difference(before, after)) if n else None
        return DifferenceInterval(estimate, low, high, confidence, method, n, note)

    if n == 0:
        return result(None, None, note="no pairs")
    if n == 1:
        return result(None, None, note="one pair: no interval")
    stats = scipy_stats()
    with warnings.catch_warnings():
        # degenerate data is handled below from the bootstrap distribution itself
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        bootstrap = stats.bootstrap((before, after), difference, paired=True, vectorized=True,
                                    confidence_level=confidence, n_resamples=n_resamples,
                                    method="BCa",
                                    **{bootstrap_rng_keyword(): np.random.default_rng(seed)})
        replicates = bootstrap.bootstrap_distribution
        if np.ptp(replicates) == 0.0:
            value = float(replicates[0])
            return result(value, value, note="every resample gave the same difference")
        low, high = bootstrap.confidence_interval
        if np.isfinite(low) and np.isfinite(high):
            return result(float(low), float(high))
        percentile = stats.bootstrap((before, after), difference, paired=True, vectorized=True,
                                     confidence_level=confidence, n_resamples=0,
                                     bootstrap_result=bootstrap, method="percentile")
    low, high = percentile.confidence_interval
    return result(float(low), float(high), method="bootstrap-percentile",
                  note="BCa undefined on these data")


def bootstrap_projection(interval: DifferenceInterval) -> Callable[[int], tuple[float, float]]:
    """``m -> (low, high)``: the interval if m pairs were run and the estimate held, each side's
    half-width shrinking as 1/sqrt(m) (the usual rate for a quantile's sampling error)."""
    if not interval.defined or interval.estimate is None or interval.n < 1:
        raise ValueError("a projection needs a defined interval")
    estimate, n = interval.estimate, interval.n
    below, above = estimate - interval.low, interval.high - estimate  # type: ignore[operator]

    def at(pairs: int) -> tuple[float, float]:
        scale = math.sqrt(n / pairs)
        return estimate - below * scale, estimate + above * scale

    return at


# --- gates ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GateResult:
    """A gate judged on the interval of a difference.

    ``status`` is ``failed`` on evidence of a regression (default mode: the whole interval is
    beyond the allowed change) or on missing evidence of no regression (strict mode: the
    interval is not wholly within it); ``inconclusive`` when there is no interval, or in the
    default mode when the interval straddles the limit. ``blocks`` says whether a CI should
    fail: every ``failed``, and in strict mode ``inconclusive`` too.
    """

    name: str
    status: GateStatus
    strict: bool
    allowed_change: float
    regression: Regression
    interval: DifferenceInterval
    message: str
    trials_needed: int | None = None

    @property
    def blocks(self) -> bool:
        return self.status == "failed" or (self.strict and self.status == "inconclusive")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "blocks": self.blocks}


def _format_change(value: float, unit: str) -> str:
    if unit == "rate":
        return f"{value * 100:+.1f} points"
    return f"{value:+.1f} {unit}".rstrip()


def gate_on_interval(interval: DifferenceInterval, *, allowed_change: float,
                     regression: Regression, strict: bool = False, name: str = "gate",
                     unit: str = "",
                     project: Callable[[int], tuple[float, float]] | None = None) -> GateResult:
    """Judge a candidate-minus-baseline interval against an allowed change.

    ``regression`` is the direction that is worse (``decrease`` for a pass rate, ``increase``
    for a latency); ``allowed_change`` (>= 0) is how far in that direction is tolerated.
    Default mode: ``failed`` when the whole interval lies beyond the allowed change, ``passed``
    when it lies wholly within, else ``inconclusive``. ``strict=True``: ``passed`` only when the
    whole interval lies within, else ``failed`` with, when the estimate itself is within, about
    how many pairs would show it (``project(m) -> (low, high)`` predicts the interval for m
    pairs; default :func:`bootstrap_projection`). ``unit="rate"`` prints points.
    """
    if not allowed_change >= 0:
        raise ValueError(f"allowed_change must be >= 0, got {allowed_change!r}")
    if regression not in ("increase", "decrease"):
        raise ValueError(f"regression must be 'increase' or 'decrease', got {regression!r}")
    sign = 1.0 if regression == "increase" else -1.0
    word = "increase" if regression == "increase" else "drop"
    limit = f"the allowed {word} of {_format_change(allowed_change, unit).lstrip('+')}"

    def gate(status: GateStatus, message: str, needed: int | None = None) -> GateResult:
        return GateResult(name, status, strict, float(allowed_change), regression, interval,
                          f"{name}: {message}", needed)

    if not interval.defined:
        return gate("inconclusive", f"no interval ({interval.note or 'no data'}); nothing to "
                    "judge")
    assert interval.low is not None and interval.high is not None and interval.estimate is not None
    worse_low, worse_high = sorted((sign * interval.low, sign * interval.high))
    observed = (f"changed by {_format_change(interval.estimate, unit)} "
                f"({interval.confidence:.0%} CI {_format_change(interval.low, unit)} to "
                f"{_format_change(interval.high, unit)}, {interval.n} pairs)")
    if worse_high <= allowed_change:
        return gate("passed", f"{observed}: the whole interval is within {limit}")
    if worse_low > allowed_change:
        return gate("failed", f"{observed}: the whole interval is beyond {limit} "
                    "(evidence of a regression)")
    if not strict:
        return gate("inconclusive", f"{observed}: the interval straddles {limit}; more trials "
                    "would narrow it")
    if sign * interval.estimate >= allowed_change:
        return gate("failed", f"{observed}: the interval reaches beyond {limit} and so does the "
                    "estimate: more trials would not show the absence of a regression")
    projection = project or bootstrap_projection(interval)

    def within(pairs: int) -> bool:
        low, high = projection(pairs)
        return max(sign * low, sign * high) <= allowed_change

    try:
        needed: int | None = smallest_count(within, start=interval.n)
        advice = f"about {needed} pairs would be needed if the estimate holds"
    except ValueError:
        needed, advice = None, f"more than {MAX_TRIALS:,} pairs would be needed"
    return gate("failed", f"{observed}: the interval reaches beyond {limit}, so the absence of "
                f"a regression is not shown; {advice}", needed)
