"""Statistics of seeded trials, checked against published values, closed forms, reference
implementations (statsmodels, scipy) and simulation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy import stats
from scipy.special import gammaln

from voicelab.scoring import (
    DifferenceInterval,
    gate_on_interval,
    mcnemar_exact,
    paired_bootstrap_difference,
    paired_rate_difference,
    paired_rate_projection,
    pass_at_k_estimate,
    pass_curves,
    pass_power_k_estimate,
    proportion_interval,
    trials_for_width,
)

try:  # reference implementations (the dev extra installs them); skipped cleanly without
    from statsmodels.stats.contingency_tables import mcnemar as statsmodels_mcnemar
    from statsmodels.stats.proportion import proportion_confint
except ImportError:
    statsmodels_mcnemar = proportion_confint = None
needs_statsmodels = pytest.mark.skipif(proportion_confint is None,
                                       reason="statsmodels is not installed")

Z95 = float(stats.norm.ppf(0.975))


# --- one proportion ---------------------------------------------------------------------------

# Newcombe (1998), "Two-sided confidence intervals for the single proportion: comparison of seven
# methods", Stat. Med. 17:857-872, Table II: method 3 (Wilson score) and method 5 (exact).
NEWCOMBE_1998_SINGLE = [
    # passed, n, Wilson (low, high), Clopper-Pearson (low, high)
    (81, 263, (0.2553, 0.3662), (0.2527, 0.3676)),
    (15, 148, (0.0624, 0.1605), (0.0578, 0.1617)),
    (0, 20, (0.0, 0.1611), (0.0, 0.1684)),
    (1, 29, (0.0061, 0.1718), (0.0009, 0.1776)),
]


@pytest.mark.parametrize(("passed", "n", "wilson", "exact"), NEWCOMBE_1998_SINGLE)
def test_intervals_match_published_values(passed, n, wilson, exact):
    for method, expected in (("wilson", wilson), ("clopper_pearson", exact)):
        interval = proportion_interval(passed, n, method=method)
        # the paper prints four decimals: half a unit in the last place
        assert_allclose((interval.low, interval.high), expected, atol=5e-5)
        assert interval.estimate == passed / n
        assert (interval.n, interval.passed, interval.method) == (n, passed, method)


@needs_statsmodels
@settings(max_examples=200, deadline=None, derandomize=True)
@given(n=st.integers(1, 600), data=st.data(),
       confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_intervals_match_statsmodels(n, data, confidence):
    passed = data.draw(st.integers(0, n))
    for method, reference in (("wilson", "wilson"), ("clopper_pearson", "beta")):
        ours = proportion_interval(passed, n, confidence=confidence, method=method)
        low, high = proportion_confint(passed, n, alpha=1 - confidence,
                                                  method=reference)
        # both evaluate the same closed form / beta quantiles: agreement to rounding
        assert_allclose((ours.low, ours.high), (low, high), rtol=1e-9, atol=1e-12)
        assert 0.0 <= ours.low <= ours.estimate <= ours.high <= 1.0


def test_no_trials_is_no_rate():
    interval = proportion_interval(0, 0)
    assert (interval.estimate, interval.low, interval.high) == (None, None, None)
    assert str(interval) == "n/a (0/0)"
    assert json.loads(json.dumps(interval.to_dict())) == {
        "estimate": None, "low": None, "high": None, "method": "wilson", "confidence": 0.95,
        "n": 0, "passed": 0}


def test_edges_are_exact_and_the_text_names_the_method():
    assert proportion_interval(0, 7).low == 0.0
    assert proportion_interval(7, 7).high == 1.0
    assert proportion_interval(7, 7, method="clopper_pearson").high == 1.0
    assert str(proportion_interval(8, 10)) == "80.0% [49.0%, 94.3%] (8/10, Wilson 95%)"


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((3, 2), {}, "cannot exceed"),
    ((-1, 2), {}, "non-negative"),
    ((1.5, 2), {}, "non-negative integer"),
    ((1, 2), {"confidence": 1.0}, "confidence"),
    ((1, 2), {"method": "wald"}, "unknown interval method"),
])
def test_bad_interval_arguments_raise(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        proportion_interval(*args, **kwargs)


def test_trials_for_width_matches_the_wilson_closed_form():
    # at an observed rate of one half, Wilson's width is z / sqrt(n + z^2)
    for width in (0.3, 0.2, 0.1, 0.05):
        expected = math.ceil(Z95**2 / width**2 - Z95**2)
        assert trials_for_width(width) == expected
    assert trials_for_width(0.1) == 381


@pytest.mark.parametrize("method", ["wilson", "clopper_pearson"])
@pytest.mark.parametrize(("width", "p", "confidence"), [(0.2, 0.5, 0.95), (0.1, 0.9, 0.9),
                                                        (0.15, 0.0, 0.99)])
def test_trials_for_width_is_the_smallest_enough(method, width, p, confidence):
    n = trials_for_width(width, confidence=confidence, p=p, method=method)
    assert n > 1

    def width_at(trials: int) -> float:
        # a whole count at the planned rate (rounded down, as a worst case at p >= 1/2)
        interval = proportion_interval(math.floor(p * trials), trials, confidence=confidence,
                                       method=method)
        return interval.high - interval.low

    assert width_at(n) <= width + 0.01  # rounding the count moves the width by < 1 point
    assert width_at(n - 1) > width - 0.01
    if p == 0.5 and method == "wilson":
        assert width_at(n) <= width  # one half is the widest rate: the plan holds for any count


def test_trials_for_width_rejects_nonsense():
    with pytest.raises(ValueError, match="width"):
        trials_for_width(0.0)
    with pytest.raises(ValueError, match="p must"):
        trials_for_width(0.1, p=1.5)


# --- unbiased pass@k / pass^k -----------------------------------------------------------------

def test_pass_k_closed_forms():
    assert pass_at_k_estimate(10, 3, 1) == pytest.approx(0.3, abs=0)
    assert pass_power_k_estimate(10, 3, 1) == pytest.approx(0.3, abs=0)
    assert pass_at_k_estimate(10, 3, 2) == 1 - 21 / 45  # 1 - C(7,2)/C(10,2)
    assert pass_power_k_estimate(10, 3, 2) == 3 / 45  # C(3,2)/C(10,2)
    assert pass_at_k_estimate(10, 3, 8) == 1.0  # only 7 failures: any 8 trials hold a pass
    assert pass_power_k_estimate(10, 3, 4) == 0.0
    assert pass_at_k_estimate(10, 0, 10) == 0.0 and pass_at_k_estimate(10, 1, 10) == 1.0
    assert pass_power_k_estimate(10, 10, 10) == 1.0 and pass_power_k_estimate(10, 9, 10) == 0.0
    # the plug-in 1 - (1 - c/n)^k would say 0.672 here; every 5-subset holds the one pass
    assert pass_at_k_estimate(5, 1, 5) == 1.0


def test_pass_k_is_exact_where_floats_of_binomials_overflow():
    # C(5000, 2500) ~ 1e1503 is no float; the ratio is still computed exactly and rounded once
    assert pass_power_k_estimate(5000, 2500, 2500) == 0.0
    assert pass_at_k_estimate(5000, 2500, 2500) == 1.0
    assert pass_at_k_estimate(5000, 1, 1) == 1 / 5000
    n, c, k = 3000, 2990, 300
    log_ratio = (gammaln(c + 1) - gammaln(c - k + 1)) - (gammaln(n + 1) - gammaln(n - k + 1))
    # gammaln's relative error (~1e-15 of ~2e4) leaves ~1e-11 on the log scale
    assert_allclose(pass_power_k_estimate(n, c, k), math.exp(log_ratio), rtol=1e-9)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(n=st.integers(1, 60), data=st.data())
def test_pass_curves_equal_the_pointwise_estimates(n, data):
    c = data.draw(st.integers(0, n))
    curves = pass_curves(n, c)
    assert list(curves) == list(range(1, n + 1))
    for k, (at_k, power_k) in curves.items():
        assert at_k == pass_at_k_estimate(n, c, k)
        assert power_k == pass_power_k_estimate(n, c, k)
    at, power = zip(*curves.values(), strict=True)
    assert all(np.diff(at) >= 0) and all(np.diff(power) <= 0)  # monotone in k


def test_pass_curves_of_nothing():
    assert pass_curves(0, 0) == {}
    with pytest.raises(ValueError, match="k must"):
        pass_at_k_estimate(3, 1, 4)


def _binomial_weights(n: int, p: float) -> np.ndarray:
    """P(c passes of n) for c = 0..n, directly (n <= 30: no overflow, even for subnormal p)."""
    return np.array([math.comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)])


@settings(max_examples=80, deadline=None, derandomize=True)
@given(n=st.integers(1, 30), p=st.floats(0.0, 1.0), data=st.data())
def test_pass_k_estimators_are_exactly_unbiased(n, p, data):
    # E[estimate] = sum_c Binomial(c; n, p) * estimate(n, c, k) must equal the true value
    k = data.draw(st.integers(1, n))
    weights = _binomial_weights(n, p)
    at_k = sum(w * pass_at_k_estimate(n, c, k) for c, w in enumerate(weights))
    power_k = sum(w * pass_power_k_estimate(n, c, k) for c, w in enumerate(weights))
    # n + 1 terms, each rounded once: a few 1e-16 of error, far below 1e-10
    assert_allclose(at_k, 1 - (1 - p) ** k, atol=1e-10)
    assert_allclose(power_k, p ** k, atol=1e-10)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(2, 20), p=st.floats(0.05, 0.95), seed=st.integers(0, 2**32 - 1),
       data=st.data())
def test_pass_k_estimators_average_to_the_truth_over_simulated_runs(n, p, seed, data):
    k = data.draw(st.integers(1, n))
    runs = 4000
    passes = np.random.default_rng(seed).binomial(n, p, size=runs)  # c of each simulated run
    curve = [pass_curves(n, c)[k] for c in range(n + 1)]  # estimate by number of passes
    weights = _binomial_weights(n, p)
    for column, truth in ((0, 1 - (1 - p) ** k), (1, p ** k)):
        values = np.array([point[column] for point in curve])
        if runs * min(truth, 1 - truth) < 20:
            # a rare event (~1 in 4000 runs) makes the mean Poisson-like, not normal: the
            # exact check above covers it
            continue
        estimates = values[passes]
        # the estimator's exact standard deviation under Binomial(n, p); the mean of 4000
        # independent estimates lies within 5 standard errors of its expectation but for a
        # ~6e-7 chance per example (and the examples are fixed: derandomized, seeded).
        # Unbiased means that expectation is the truth; the plug-in 1-(1-c/n)^k misses it.
        sd = math.sqrt(max(0.0, weights @ values**2 - (weights @ values) ** 2))
        assert abs(estimates.mean() - truth) <= 5 * sd / math.sqrt(runs) + 1e-12


def test_the_simulation_check_catches_a_biased_estimator():
    # the same check applied to the plug-in estimator 1 - (1 - c/n)^k fails: it has teeth
    n, k, p, runs = 5, 3, 0.3, 4000
    passes = np.random.default_rng(0).binomial(n, p, size=runs)
    plug_in = 1 - (1 - passes / n) ** k
    unbiased = np.array([pass_at_k_estimate(n, c, k) for c in passes])
    truth = 1 - (1 - p) ** k
    tolerance = 5 * plug_in.std(ddof=1) / math.sqrt(runs)
    assert abs(plug_in.mean() - truth) > tolerance
    assert abs(unbiased.mean() - truth) <= tolerance


# --- paired pass/fail -------------------------------------------------------------------------

def test_mcnemar_exact_matches_the_worked_example():
    # Fagerland, Lydersen & Laake (2013), BMC Med. Res. Methodol. 13:91: airway
    # hyper-responsiveness (Bentur et al. 2009), 1 and 7 discordant pairs: exact p = 0.070
    assert mcnemar_exact(1, 7) == pytest.approx(18 / 256, rel=1e-12)
    assert round(mcnemar_exact(7, 1), 3) == 0.070
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024, rel=1e-12)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(b=st.integers(1, 80), c=st.integers(0, 80))
def test_mcnemar_exact_agrees_with_scipy(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(stats.binomtest(b, b + c).pvalue, rel=1e-9)


@needs_statsmodels
@settings(max_examples=60, deadline=None, derandomize=True)
@given(b=st.integers(0, 80), c=st.integers(0, 80))
def test_mcnemar_exact_agrees_with_statsmodels(b, c):
    reference = statsmodels_mcnemar([[3, b], [c, 4]], exact=True).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(reference, rel=1e-9)


def test_newcombe_paired_interval_matches_the_worked_example():
    # Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables, ch. 8:
    # complete response before/after consolidation therapy (Cavo et al. 2012), table
    # [[59, 6], [16, 80]]; Newcombe square-and-add: -0.0621 (95% CI -0.1186 to -0.0046), as
    # the book's companion R package (contingencytables) reproduces it in its tests
    interval = paired_rate_difference(both=59, candidate_only=6, baseline_only=16, neither=80)
    assert_allclose((interval.estimate, interval.low, interval.high),
                    (-0.0621, -0.1186, -0.0046), atol=5e-5)
    assert interval.method == "newcombe" and interval.n == 161


def test_newcombe_all_concordant_passes_is_the_wilson_margin():
    # both runs passed all n trials: each margin's Wilson lower bound is n / (n + z^2) and
    # there is no correlation term, so the interval is +-z^2 / (n + z^2)
    for n in (5, 10, 40):
        interval = paired_rate_difference(both=n, candidate_only=0, baseline_only=0, neither=0)
        half = Z95**2 / (n + Z95**2)
        assert_allclose((interval.estimate, interval.low, interval.high), (0, -half, half),
                        atol=1e-12)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(counts=st.tuples(*[st.integers(0, 40)] * 4).filter(lambda t: sum(t) > 0),
       confidence=st.sampled_from([0.9, 0.95, 0.99]))
def test_newcombe_interval_is_coherent(counts, confidence):
    both, candidate_only, baseline_only, neither = counts
    interval = paired_rate_difference(both=both, candidate_only=candidate_only,
                                      baseline_only=baseline_only, neither=neither,
                                      confidence=confidence)
    assert -1.0 <= interval.low <= interval.estimate <= interval.high <= 1.0
    swapped = paired_rate_difference(both=both, candidate_only=baseline_only,
                                     baseline_only=candidate_only, neither=neither,
                                     confidence=confidence)
    assert_allclose((swapped.low, swapped.high), (-interval.high, -interval.low), atol=1e-12)
    # the projection at the observed number of pairs is the interval itself
    at = paired_rate_projection(both=both, candidate_only=candidate_only,
                                baseline_only=baseline_only, neither=neither,
                                confidence=confidence)
    assert_allclose(at(sum(counts)), (interval.low, interval.high), atol=1e-12)


def test_no_pairs_gives_no_difference():
    interval = paired_rate_difference(both=0, candidate_only=0, baseline_only=0, neither=0)
    assert not interval.defined and interval.estimate is None and interval.n == 0


# --- paired bootstrap -------------------------------------------------------------------------

def _paired_latencies(n: int, *, shift: float, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    baseline = rng.lognormal(np.log(500), 0.3, n)
    return baseline, baseline + shift + rng.normal(0, 10, n)


@pytest.mark.parametrize("statistic", ["median", "p95"])
def test_bootstrap_finds_a_shift_and_is_reproducible(statistic):
    baseline, candidate = _paired_latencies(40, shift=100.0)
    first = paired_bootstrap_difference(baseline, candidate, statistic=statistic, seed=7,
                                        n_resamples=2000)
    again = paired_bootstrap_difference(baseline, candidate, statistic=statistic, seed=7,
                                        n_resamples=2000)
    assert first == again
    assert first.method == "bootstrap-bca" and first.n == 40
    assert first.low < first.estimate < first.high
    # pairing cancels the between-trial spread (sd ~150 ms): the interval is far narrower
    # than that and holds the 100 ms shift but not 0
    assert 0 < first.low < 100 < first.high < 200


def test_bootstrap_degenerate_inputs_are_documented_results():
    none = paired_bootstrap_difference([], [])
    assert (none.estimate, none.low, none.high, none.note) == (None, None, None, "no pairs")
    one = paired_bootstrap_difference([500.0], [650.0])
    assert (one.estimate, one.low, one.high) == (150.0, None, None) and not one.defined
    flat = paired_bootstrap_difference(np.zeros(12), np.zeros(12), statistic="p95")
    assert (flat.estimate, flat.low, flat.high) == (0.0, 0.0, 0.0)
    assert "same difference" in flat.note
    tied = paired_bootstrap_difference([1, 1, 1, 1, 2], [1, 1, 1, 1, 1], seed=3)
    assert tied.method == "bootstrap-percentile" and tied.defined
    assert tied.low <= tied.estimate <= tied.high


@pytest.mark.parametrize(("baseline", "candidate", "kwargs", "match"), [
    ([1.0, 2.0], [1.0], {}, "equal length"),
    ([1.0, np.nan], [1.0, 2.0], {}, "finite"),
    ([1.0, 2.0], [1.0, 2.0], {"statistic": "mean"}, "unknown statistic"),
])
def test_bootstrap_rejects_bad_input(baseline, candidate, kwargs, match):
    with pytest.raises(ValueError, match=match):
        paired_bootstrap_difference(baseline, candidate, **kwargs)


# --- gates ------------------------------------------------------------------------------------

def _interval(estimate, low, high, n=20):
    return DifferenceInterval(estimate, low, high, 0.95, "test", n)


@pytest.mark.parametrize(("interval", "strict", "status"), [
    # latency-like: an increase is a regression, allowed +100
    ((150.0, 120.0, 180.0), False, "failed"),       # wholly beyond: evidence of regression
    ((150.0, 120.0, 180.0), True, "failed"),
    ((20.0, -10.0, 50.0), False, "passed"),         # wholly within
    ((20.0, -10.0, 50.0), True, "passed"),
    ((90.0, 40.0, 140.0), False, "inconclusive"),   # straddles the limit
    ((90.0, 40.0, 140.0), True, "failed"),
    ((0.0, -100.0, 100.0), False, "passed"),        # the limit itself is within
])
def test_gate_modes_on_an_increase(interval, strict, status):
    result = gate_on_interval(_interval(*interval), allowed_change=100.0, regression="increase",
                              strict=strict, name="latency_p95", unit="ms")
    assert result.status == status
    assert result.message.startswith("latency_p95: changed by")
    assert result.blocks == (status == "failed")


@pytest.mark.parametrize(("interval", "status"), [
    ((-0.3, -0.5, -0.1), "failed"),        # the pass rate dropped by 10-50 points
    ((0.0, -0.04, 0.04), "passed"),
    ((-0.02, -0.12, 0.08), "inconclusive"),
    ((0.3, 0.1, 0.5), "passed"),           # an improvement is never a regression
])
def test_gate_on_a_drop(interval, status):
    result = gate_on_interval(_interval(*interval), allowed_change=0.05, regression="decrease",
                              name="pass_rate", unit="rate")
    assert result.status == status
    assert "allowed drop of 5.0 points" in result.message


def test_strict_gate_says_how_many_trials_would_show_no_regression():
    # 10 pairs that all passed in both runs: +-z^2/(n+z^2) = +-0.277; a drop of at most 5
    # points needs z^2/(m+z^2) <= 0.05, i.e. m >= 19 z^2 = 72.99
    counts = {"both": 10, "candidate_only": 0, "baseline_only": 0, "neither": 0}
    interval = paired_rate_difference(**counts)
    loose = gate_on_interval(interval, allowed_change=0.05, regression="decrease", unit="rate")
    assert loose.status == "inconclusive" and not loose.blocks
    strict = gate_on_interval(interval, allowed_change=0.05, regression="decrease", strict=True,
                              unit="rate", project=paired_rate_projection(**counts))
    assert strict.status == "failed" and strict.blocks
    assert strict.trials_needed == math.ceil(19 * Z95**2) == 73
    assert "about 73 pairs" in strict.message
    # a bootstrap interval shrinks as 1/sqrt(m): +-20 ms at 10 pairs is +-10 ms at 40
    latency = gate_on_interval(_interval(0.0, -20.0, 20.0, n=10), allowed_change=10.0,
                               regression="increase", strict=True, unit="ms")
    assert latency.trials_needed == 40


def test_strict_gate_with_the_estimate_beyond_names_no_count():
    result = gate_on_interval(_interval(0.12, -0.05, 0.3), allowed_change=0.1,
                              regression="increase", strict=True)
    assert result.status == "failed" and result.trials_needed is None
    assert "more trials would not show" in result.message


def test_gate_without_an_interval_is_inconclusive_never_passed():
    empty = DifferenceInterval(None, None, None, 0.95, "newcombe", 0, "no paired trials")
    loose = gate_on_interval(empty, allowed_change=0.05, regression="decrease")
    strict = gate_on_interval(empty, allowed_change=0.05, regression="decrease", strict=True)
    assert loose.status == strict.status == "inconclusive"
    assert not loose.blocks and strict.blocks  # strict asks for evidence; there is none
    assert "no paired trials" in loose.message
    assert json.loads(json.dumps(strict.to_dict()))["blocks"] is True


def test_gate_rejects_a_negative_allowance():
    with pytest.raises(ValueError, match="allowed_change"):
        gate_on_interval(_interval(0, -1, 1), allowed_change=-1, regression="increase")
