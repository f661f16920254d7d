"""Statistics of one run's seeded trials: rate intervals, unbiased pass@k / pass^k, quantile bounds.

Pure functions of counts and arrays (numpy and scipy only), shared by run reports, sweeps,
``compare`` and the run-config gates.

- Rates: Wilson score interval by default (Wilson 1927; recommended by Brown, Cai & DasGupta
  2001, *Interval Estimation for a Binomial Proportion*, Stat. Sci. 16:101-133), or the exact
  Clopper-Pearson interval (Clopper & Pearson 1934) from beta quantiles.
- pass@k = 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, *Evaluating Large Language Models Trained
  on Code*, eq. 1) and pass^k = C(c, k) / C(n, k) (Yao et al. 2024, *tau-bench*): the unbiased
  estimators of 1 - (1-p)^k and p^k from n trials with c passes, computed exactly in integers.
- A quantile's upper bound: the distribution-free order-statistic bound (the binomial
  argument for order statistics, e.g. Hahn & Meeker 1991, *Statistical Intervals*, ch. 5).

Comparing two runs (paired tests, bootstrap differences, the gates judged on them) is
:mod:`._paired`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

import numpy as np

#: How a pass rate's confidence interval is computed.
IntervalMethod = Literal["wilson", "clopper_pearson"]
GateStatus = Literal["passed", "failed", "inconclusive"]
Regression = Literal["increase", "decrease"]

INTERVAL_METHODS: tuple[str, ...] = ("wilson", "clopper_pearson")
#: Statistic name -> percentile, for paired bootstrap differences and gates.
QUANTILE_STATISTICS: dict[str, float] = {"median": 50.0, "p50": 50.0, "p90": 90.0,
                                         "p95": 95.0, "p99": 99.0}
DEFAULT_RESAMPLES = 9999
MAX_TRIALS = 10**9  # searches for a trial count stop here: a plan beyond it is not a plan


def scipy_stats() -> Any:
    """scipy.stats, imported on first use: ``voice-evaluator validate`` imports this package
    and must stay light (``benchmarks/bench_validate.py``)."""
    from scipy import stats

    return stats


def bootstrap_rng_keyword() -> str:
    # scipy >= 1.15 names the generator ``rng``; 1.11-1.14 (the declared range starts there)
    # name it ``random_state``: same generator, same draws
    return "rng" if "rng" in inspect.signature(scipy_stats().bootstrap).parameters else "random_state"


# --- validation -------------------------------------------------------------------------------

def check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return float(confidence)


def check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _check_method(method: str) -> str:
    if method not in INTERVAL_METHODS:
        raise ValueError(f"unknown interval method {method!r}; expected one of "
                         f"{', '.join(INTERVAL_METHODS)}")
    return method


@lru_cache(maxsize=32)
def z_score(confidence: float) -> float:  # memoized: reports ask it for every rate
    return float(scipy_stats().norm.ppf(0.5 + confidence / 2.0))


# --- one proportion ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RateInterval:
    """A pass rate with its confidence interval. ``n == 0`` leaves estimate and bounds ``None``:
    no trials is no evidence, never a rate of 0 or 1."""

    estimate: float | None
    low: float | None
    high: float | None
    method: str
    confidence: float
    n: int
    passed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        if self.estimate is None or self.low is None or self.high is None:
            return f"n/a ({self.passed}/{self.n})"
        return (f"{self.estimate:.1%} [{self.low:.1%}, {self.high:.1%}] ({self.passed}/{self.n}, "
                f"{_METHOD_LABELS[self.method]} {self.confidence:.0%})")


_METHOD_LABELS = {"wilson": "Wilson", "clopper_pearson": "Clopper-Pearson"}


def wilson_bounds(passed: float, n: float, *, z: float) -> tuple[float, float]:
    """Wilson score bounds; the count may be real-valued (plans and projections scale it)."""
    share = passed / n
    denominator = 1.0 + z * z / n
    center = (share + z * z / (2.0 * n)) / denominator
    half = z / denominator * math.sqrt(share * (1.0 - share) / n + z * z / (4.0 * n * n))
    # exact at the edges: rounding must not report 1e-17 for 0 passes or 0.9999... for all
    low = 0.0 if passed <= 0 else max(0.0, center - half)
    high = 1.0 if passed >= n else min(1.0, center + half)
    return low, high


def _clopper_pearson_bounds(passed: float, n: float, *, confidence: float
                            ) -> tuple[float, float]:
    """Exact bounds from beta quantiles; also defined for a real-valued count."""
    alpha = 1.0 - confidence
    stats = scipy_stats()
    low = float(stats.beta.ppf(alpha / 2.0, passed, n - passed + 1.0)) if passed > 0 else 0.0
    high = float(stats.beta.ppf(1.0 - alpha / 2.0, passed + 1.0, n - passed)) \
        if passed < n else 1.0
    return low, high


def _bounds(passed: float, n: float, *, confidence: float, method: str) -> tuple[float, float]:
    if method == "wilson":
        return wilson_bounds(passed, n, z=z_score(confidence))
    return _clopper_pearson_bounds(passed, n, confidence=confidence)


def proportion_interval(passed: int, n: int, *, confidence: float = 0.95,
                        method: IntervalMethod = "wilson") -> RateInterval:
    """The pass rate ``passed / n`` with its two-sided ``confidence`` interval.

    ``method="wilson"``: the score interval (good coverage from small n; never outside [0, 1]).
    ``method="clopper_pearson"``: the exact interval, conservative (coverage >= confidence).
    """
    n = check_count("n", n)
    passed = check_count("passed", passed)
    if passed > n:
        raise ValueError(f"passed ({passed}) cannot exceed n ({n})")
    confidence = check_confidence(confidence)
    _check_method(method)
    if n == 0:
        return RateInterval(None, None, None, method, confidence, 0, 0)
    low, high = _bounds(passed, n, confidence=confidence, method=method)
    return RateInterval(passed / n, low, high, method, confidence, n, passed)


def trials_for_width(width: float, *, confidence: float = 0.95, p: float = 0.5,
                     method: IntervalMethod = "wilson") -> int:
    """Trials per cell so that the interval's full width (high - low) is at most ``width`` when
    the observed rate is ``p``. The default ``p=0.5`` is the worst case: every observed rate
    then gives an interval at most this wide (the width is largest at one half).

    The observed count is taken as ``p * n`` (a real number) so that the width falls with n
    without the jitter of rounding; e.g. Wilson at p = 0.5 has width z / sqrt(n + z^2).
    """
    if not 0.0 < width <= 1.0:
        raise ValueError(f"width must be in (0, 1], got {width!r}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    confidence = check_confidence(confidence)
    _check_method(method)

    def narrow_enough(n: int) -> bool:
        low, high = _bounds(p * n, n, confidence=confidence, method=method)
        return high - low <= width

    return smallest_count(narrow_enough, start=1)


def smallest_count(condition: Callable[[int], bool], *, start: int) -> int:
    """The smallest n >= start where ``condition`` holds (assumed monotone: once true, true for
    every larger n); raises when not even MAX_TRIALS is enough."""
    if condition(start):
        return start
    low, high = start, start * 2
    while not condition(high):
        if high >= MAX_TRIALS:
            raise ValueError(f"more than {MAX_TRIALS:,} trials would be needed")
        low, high = high, min(high * 2, MAX_TRIALS)
    while high - low > 1:  # condition(low) is false, condition(high) is true
        middle = (low + high) // 2
        if condition(middle):
            high = middle
        else:
            low = middle
    return high


# --- unbiased pass@k and pass^k ---------------------------------------------------------------

def _check_nck(n: int, c: int, k: int) -> None:
    check_count("n", n)
    check_count("c", c)
    check_count("k", k)
    if c > n:
        raise ValueError(f"c ({c}) cannot exceed n ({n})")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and n ({n}), got {k}")


def pass_at_k_estimate(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k = P(at least one of k trials passes) from n trials with c
    passes: ``1 - C(n-c, k) / C(n, k)``. Exact integer arithmetic, one rounding at the end."""
    _check_nck(n, c, k)
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def pass_power_k_estimate(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k = P(all of k trials pass) from n trials with c passes:
    ``C(c, k) / C(n, k)``. Exact integer arithmetic, one rounding at the end."""
    _check_nck(n, c, k)
    return float(Fraction(math.comb(c, k), math.comb(n, k)))


def pass_curves(n: int, c: int) -> dict[int, tuple[float, float]]:
    """``{k: (pass@k, pass^k)}`` for k = 1..n (empty for n = 0).

    Walks k with the exact ratios C(m, k+1) / C(n, k+1) = C(m, k) / C(n, k) * (m-k) / (n-k),
    so the whole curve costs n small fraction products instead of n big binomials.
    """
    check_count("n", n)
    check_count("c", c)
    if c > n:
        raise ValueError(f"c ({c}) cannot exceed n ({n})")
    curves: dict[int, tuple[float, float]] = {}
    none_pass = all_pass = Fraction(1)  # C(n-c, k) / C(n, k) and C(c, k) / C(n, k) at k = 0
    for k in range(n):
        none_pass *= Fraction(max(n - c - k, 0), n - k)
        all_pass *= Fraction(max(c - k, 0), n - k)
        curves[k + 1] = (float(1 - none_pass), float(all_pass))
    return curves


# --- a quantile's distribution-free bound ----------------------------------------------------

@dataclass(frozen=True)
class QuantileBound:
    """The sample ``quantile`` of n values and one end (``side``) of its two-sided,
    distribution-free confidence interval: the ``rank``-th smallest value. ``bound`` is ``None``
    when n is too small for any order statistic to bound it; ``needed`` is then the smallest n
    that would."""

    quantile: float
    side: Literal["upper", "lower"]
    confidence: float
    n: int
    estimate: float | None
    bound: float | None
    rank: int | None
    needed: int

    method = "order-statistic"


def _upper_rank(n: int, quantile: float, tail: float) -> int:
    """The smallest r with P(Binomial(n, q) <= r - 1) >= 1 - tail."""
    binom = scipy_stats().binom
    rank = int(binom.ppf(1.0 - tail, n, quantile)) + 1
    while rank > 1 and binom.cdf(rank - 2, n, quantile) >= 1.0 - tail:
        rank -= 1
    while binom.cdf(rank - 1, n, quantile) < 1.0 - tail:
        rank += 1
    return rank


def quantile_bound(values: Sequence[float] | np.ndarray, *, quantile: float,
                   confidence: float = 0.95, side: Literal["upper", "lower"] = "upper"
                   ) -> QuantileBound:
    """A confidence bound of the ``quantile`` of the distribution the values are drawn from.

    The r-th smallest of n independent draws lies at or above the q-quantile with probability
    P(Binomial(n, q) <= r - 1), for any distribution (exactly for a continuous one, at least for
    a discrete one). The upper bound is the smallest such order statistic with that probability
    at least 1 - (1 - confidence) / 2: the upper end of a two-sided interval, as the lower bound
    of a pass rate is the lower end of one. The lower bound is the mirror image (the upper bound
    of the (1-q)-quantile of the negated values). No assumption on the shape, only
    independence; no resampling, nothing seeded. It needs n >= log(alpha/2) / log(q) values for
    an upper bound (72 for the p95 at 95%), log(alpha/2) / log(1-q) for a lower one.
    """
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must be between 0 and 1 (exclusive), got {quantile!r}")
    if side not in ("upper", "lower"):
        raise ValueError(f"side must be 'upper' or 'lower', got {side!r}")
    confidence = check_confidence(confidence)
    data = np.sort(np.asarray(values, dtype=float))
    if data.ndim != 1 or not np.isfinite(data).all():
        raise ValueError("values must be a 1-D sequence of finite numbers")
    tail = (1.0 - confidence) / 2.0
    q = quantile if side == "upper" else 1.0 - quantile  # the lower bound, mirrored
    needed = max(1, math.ceil(math.log(tail) / math.log(q)))
    # the smallest n with q^n <= tail: rounding in the logarithms must not be off by one
    while needed > 1 and q ** (needed - 1) <= tail:
        needed -= 1
    while q ** needed > tail:
        needed += 1
    n = int(data.size)
    estimate = float(np.quantile(data, quantile)) if n else None
    if n < needed:
        return QuantileBound(quantile, side, confidence, n, estimate, None, None, needed)
    rank = _upper_rank(n, q, tail)  # r <= n since n >= needed
    if side == "lower":
        rank = n + 1 - rank
    return QuantileBound(quantile, side, confidence, n, estimate, float(data[rank - 1]), rank,
                         needed)


# --- paired pass/fail -------------------------------------------------------------------------
