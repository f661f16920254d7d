"""Statistics of seeded trials: rate intervals, unbiased pass@k / pass^k, paired comparison, gates.

Pure functions of counts and arrays (numpy and scipy only), shared by run reports, sweeps,
``compare`` and the run-config gates.

- Rates: Wilson score interval by default (Wilson 1927; recommended by Brown, Cai & DasGupta
  2001, *Interval Estimation for a Binomial Proportion*, Stat. Sci. 16:101-133), or the exact
  Clopper-Pearson interval (Clopper & Pearson 1934) from beta quantiles.
- pass@k = 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, *Evaluating Large Language Models Trained
  on Code*, eq. 1) and pass^k = C(c, k) / C(n, k) (Yao et al. 2024, *tau-bench*): the unbiased
  estimators of 1 - (1-p)^k and p^k from n trials with c passes, computed exactly in integers.
- Paired pass/fail: exact (conditional) McNemar test on the discordant pairs, and Newcombe's
  hybrid score interval for a difference of paired proportions (Newcombe 1998, *Improved
  confidence intervals for the difference between binomial proportions based on paired data*,
  Stat. Med. 17:2635-2650, method 10).
- Paired measurements: bootstrap intervals of a difference of quantiles (BCa, Efron 1987) with
  :func:`scipy.stats.bootstrap` resampling pairs.
- A quantile's upper bound: the distribution-free order-statistic bound (the binomial
  argument for order statistics, e.g. Hahn & Meeker 1991, *Statistical Intervals*, ch. 5).
- Gates judge the interval of a difference, never its point estimate.
"""

from __future__ import annotations

import inspect
import math
import warnings
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
_MAX_TRIALS = 10**9  # searches for a trial count stop here: a plan beyond it is not a plan


def _stats() -> Any:
    """scipy.stats, imported on first use: ``voice-evaluator validate`` imports this package
    and must stay light (``benchmarks/bench_validate.py``)."""
    from scipy import stats

    return stats


def _bootstrap_rng_keyword() -> str:
    # scipy >= 1.15 names the generator ``rng``; 1.11-1.14 (the declared range starts there)
    # name it ``random_state``: same generator, same draws
    return "rng" if "rng" in inspect.signature(_stats().bootstrap).parameters else "random_state"


# --- validation -------------------------------------------------------------------------------

def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return float(confidence)


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _check_method(method: str) -> str:
    if method not in INTERVAL_METHODS:
        raise ValueError(f"unknown interval method {method!r}; expected one of "
                         f"{', '.join(INTERVAL_METHODS)}")
    return method


@lru_cache(maxsize=32)
def _z(confidence: float) -> float:  # memoized: reports ask it for every rate
    return float(_stats().norm.ppf(0.5 + confidence / 2.0))


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


def _wilson_bounds(passed: float, n: float, *, z: float) -> tuple[float, float]:
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
    stats = _stats()
    low = float(stats.beta.ppf(alpha / 2.0, passed, n - passed + 1.0)) if passed > 0 else 0.0
    high = float(stats.beta.ppf(1.0 - alpha / 2.0, passed + 1.0, n - passed)) \
        if passed < n else 1.0
    return low, high


def _bounds(passed: float, n: float, *, confidence: float, method: str) -> tuple[float, float]:
    if method == "wilson":
        return _wilson_bounds(passed, n, z=_z(confidence))
    return _clopper_pearson_bounds(passed, n, confidence=confidence)


def proportion_interval(passed: int, n: int, *, confidence: float = 0.95,
                        method: IntervalMethod = "wilson") -> RateInterval:
    """The pass rate ``passed / n`` with its two-sided ``confidence`` interval.

    ``method="wilson"``: the score interval (good coverage from small n; never outside [0, 1]).
    ``method="clopper_pearson"``: the exact interval, conservative (coverage >= confidence).
    """
    n = _check_count("n", n)
    passed = _check_count("passed", passed)
    if passed > n:
        raise ValueError(f"passed ({passed}) cannot exceed n ({n})")
    confidence = _check_confidence(confidence)
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
    confidence = _check_confidence(confidence)
    _check_method(method)

    def narrow_enough(n: int) -> bool:
        low, high = _bounds(p * n, n, confidence=confidence, method=method)
        return high - low <= width

    return _smallest(narrow_enough, start=1)


def _smallest(condition: Callable[[int], bool], *, start: int) -> int:
    """The smallest n >= start where ``condition`` holds (assumed monotone: once true, true for
    every larger n); raises when not even _MAX_TRIALS is enough."""
    if condition(start):
        return start
    low, high = start, start * 2
    while not condition(high):
        if high >= _MAX_TRIALS:
            raise ValueError(f"more than {_MAX_TRIALS:,} trials would be needed")
        low, high = high, min(high * 2, _MAX_TRIALS)
    while high - low > 1:  # condition(low) is false, condition(high) is true
        middle = (low + high) // 2
        if condition(middle):
            high = middle
        else:
            low = middle
    return high


# --- unbiased pass@k and pass^k ---------------------------------------------------------------

def _check_nck(n: int, c: int, k: int) -> None:
    _check_count("n", n)
    _check_count("c", c)
    _check_count("k", k)
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
    _check_count("n", n)
    _check_count("c", c)
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
    binom = _stats().binom
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
    confidence = _check_confidence(confidence)
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

def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts ``b`` and ``c``.

    Conditional on b + c discordant pairs, b ~ Binomial(b + c, 1/2) under no change; the
    p-value doubles the smaller tail (capped at 1). No discordant pair gives 1.0.
    """
    b, c = _check_count("b", b), _check_count("c", c)
    if b + c == 0:
        return 1.0
    return min(1.0, 2.0 * float(_stats().binom.cdf(min(b, c), b + c, 0.5)))


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
    candidate_low, candidate_high = _wilson_bounds(both + candidate_only, n, z=z)
    baseline_low, baseline_high = _wilson_bounds(both + baseline_only, n, z=z)
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
    counts = [_check_count(name, value) for name, value in (
        ("both", both), ("candidate_only", candidate_only), ("baseline_only", baseline_only),
        ("neither", neither))]
    confidence = _check_confidence(confidence)
    n = sum(counts)
    if n == 0:
        return DifferenceInterval(None, None, None, confidence, "newcombe", 0, "no paired trials")
    estimate, low, high = _newcombe_paired(*counts, z=_z(confidence))
    return DifferenceInterval(estimate, low, high, confidence, "newcombe", n)


def paired_rate_projection(*, both: int, candidate_only: int, baseline_only: int, neither: int,
                           confidence: float = 0.95
                           ) -> Callable[[int], tuple[float, float]]:
    """``m -> (low, high)``: the Newcombe interval if m pairs showed the same proportions of the
    four outcomes (the trial counts a strict gate names)."""
    counts = (both, candidate_only, baseline_only, neither)
    n = sum(counts)
    z = _z(_check_confidence(confidence))

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
    confidence = _check_confidence(confidence)
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
    stats = _stats()
    with warnings.catch_warnings():
        # degenerate data is handled below from the bootstrap distribution itself
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        bootstrap = stats.bootstrap((before, after), difference, paired=True, vectorized=True,
                                    confidence_level=confidence, n_resamples=n_resamples,
                                    method="BCa",
                                    **{_bootstrap_rng_keyword(): np.random.default_rng(seed)})
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
        needed: int | None = _smallest(within, start=interval.n)
        advice = f"about {needed} pairs would be needed if the estimate holds"
    except ValueError:
        needed, advice = None, f"more than {_MAX_TRIALS:,} pairs would be needed"
    return gate("failed", f"{observed}: the interval reaches beyond {limit}, so the absence of "
                f"a regression is not shown; {advice}", needed)
