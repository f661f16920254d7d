"""The statistics of a run report: the quantile bound of latency gates, the judge-corrected rate
from confusion counts, the gates, and what counts toward a rate."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

from voicelab.artifacts import JudgeResult, TrialReport, TurnMetrics, Verdict
from voicelab.config import GateConfig, StatisticsConfig, load_run
from voicelab.errors import ConfigError
from voicelab.scoring import (
    GATE_METRICS,
    check_gate_metrics,
    corrected_rate,
    quantile_bound,
    read_calibration,
    rogan_gladen,
    run_statistics,
)

# --- the order-statistic bound of a quantile --------------------------------------------------


@pytest.mark.parametrize(("quantile", "confidence", "needed"), [
    (0.95, 0.95, 72), (0.95, 0.90, 59), (0.99, 0.95, 368), (0.5, 0.95, 6), (0.9, 0.99, 51)])
def test_the_responses_a_bound_needs_are_the_closed_form(quantile, confidence, needed):
    # the largest of n draws bounds the q-quantile with probability 1 - q^n; a two-sided
    # interval spends alpha/2 on each end
    tail = (1 - confidence) / 2
    assert needed == math.ceil(math.log(tail) / math.log(quantile))
    values = np.arange(needed, dtype=float)
    assert quantile_bound(values[:-1], quantile=quantile, confidence=confidence).bound is None
    bound = quantile_bound(values, quantile=quantile, confidence=confidence)
    assert (bound.needed, bound.rank, bound.bound) == (needed, needed, float(needed - 1))


@pytest.mark.parametrize("n", [72, 100, 500, 2000])
def test_the_rank_is_the_smallest_with_enough_binomial_mass(n):
    bound = quantile_bound(np.arange(n, dtype=float), quantile=0.95, confidence=0.95)
    cdf = stats.binom.cdf(np.arange(n + 1), n, 0.95)  # P(X(r) >= xi) = cdf[r - 1]
    assert cdf[bound.rank - 1] >= 0.975 > cdf[bound.rank - 2]
    lower = quantile_bound(np.arange(n, dtype=float), quantile=0.05, side="lower")
    assert lower.rank == n + 1 - bound.rank  # the mirror image


def test_the_upper_bound_covers_the_true_quantile_at_least_as_promised():
    """Simulation (seeded): over 4,000 samples of 120 lognormal latencies the upper bound of the
    p90 lies at or above the true p90 in >= 97.5% of them (one-sided level of a two-sided 95%
    interval), within 3 binomial standard errors; the lower bound of the p10 likewise."""
    rng = np.random.default_rng(20261201)
    true_p90 = float(np.exp(stats.norm.ppf(0.9)))
    true_p10 = float(np.exp(stats.norm.ppf(0.1)))
    samples = rng.lognormal(size=(4000, 120))
    upper = np.array([quantile_bound(s, quantile=0.9).bound for s in samples])
    lower = np.array([quantile_bound(s, quantile=0.1, side="lower").bound for s in samples])
    slack = 3 * math.sqrt(0.975 * 0.025 / 4000)
    assert (upper >= true_p90).mean() >= 0.975 - slack
    assert (lower <= true_p10).mean() >= 0.975 - slack


def test_ties_keep_the_bound_conservative_and_inputs_are_checked():
    assert quantile_bound([5.0] * 80, quantile=0.95).bound == 5.0
    assert quantile_bound([], quantile=0.5).estimate is None
    with pytest.raises(ValueError, match="finite"):
        quantile_bound([1.0, float("nan")], quantile=0.5)
    with pytest.raises(ValueError, match="quantile"):
        quantile_bound([1.0], quantile=1.0)


# --- Rogan-Gladen from counts -----------------------------------------------------------------

def test_the_corrected_rate_is_rogan_gladen_with_a_bootstrap_interval():
    result = corrected_rate(30, 50, tp=40, fn=10, fp=5, tn=45, n_bootstrap=2000, seed=1)
    sensitivity, specificity = 0.8, 0.9
    assert (result.sensitivity, result.specificity) == (sensitivity, specificity)
    assert_allclose(result.corrected, (0.6 + specificity - 1) / (sensitivity + specificity - 1),
                    rtol=1e-12)
    assert result.low < result.corrected < result.high
    again = corrected_rate(30, 50, tp=40, fn=10, fp=5, tn=45, n_bootstrap=2000, seed=1)
    assert (again.low, again.high) == (result.low, result.high)  # seeded


def test_a_judge_no_better_than_chance_has_no_corrected_rate():
    result = corrected_rate(5, 10, tp=5, fn=5, fp=5, tn=5)
    assert math.isnan(result.corrected)
    assert math.isnan(float(rogan_gladen(0.5, sensitivity=0.5, specificity=0.4)))


# --- reports ----------------------------------------------------------------------------------

def _report(trial: int, *, passed: bool, exit_reason: str = "endpoint_completion",
            verdicts: dict[str, bool] | None = None, judge: bool | str | None = None
            ) -> TrialReport:
    judges = []
    if judge is not None:
        status = judge if isinstance(judge, str) else ("passed" if judge else "failed")
        judges = [JudgeResult(name="polite", kind="custom_judge", status=status,
                              passed=status == "passed")]
    return TrialReport(
        trial=trial, trial_id=f"trial-{trial:03d}", seed=trial, session_id="s",
        scenario_id="x", persona="p", environment="quiet", adapter="fake", trace_id="t",
        execution_status="failed" if exit_reason == "cancelled" else "succeeded",
        exit_reason=exit_reason, passed=passed, started_at="", ended_at="",
        duration_seconds=1.0,
        verdicts=[Verdict(name=n, passed=v, status="passed" if v else "failed")
                  for n, v in (verdicts or {}).items()], judges=judges)


def _turns(*latencies: float | None) -> list[TurnMetrics]:
    return [TurnMetrics(turn_id=f"turn-{i:03d}", index=i, status="completed",
                        first_audio_latency_ms=value, output_audio_seconds=1.0,
                        interrupted=False) for i, value in enumerate(latencies)]


def test_an_interrupted_trial_is_left_out_of_every_rate():
    reports = [_report(1, passed=True, verdicts={"a": True}),
               _report(2, passed=False, verdicts={"a": False}),
               _report(3, passed=False, exit_reason="cancelled", verdicts={"a": False})]
    result = run_statistics(reports, [_turns(10.0), _turns(20.0), _turns(99.0)],
                            statistics=StatisticsConfig())
    assert (result.pass_rate.n, result.pass_rate.passed) == (2, 1)
    assert [(p.k, p.pass_at_k, p.pass_power_k) for p in result.pass_curve] == [
        (1, 0.5, 0.5), (2, 1.0, 0.0)]
    (verdict,) = result.verdict_pass_rates
    assert (verdict.name, verdict.pass_rate.n, verdict.pass_rate.passed) == ("a", 2, 1)
    assert not run_statistics(reports, [[], [], []], statistics=StatisticsConfig(),
                              curve=False).pass_curve


def test_settings_choose_the_interval():
    reports = [_report(i, passed=i != 1) for i in range(1, 11)]
    wilson = run_statistics(reports, [[]] * 10, statistics=StatisticsConfig()).pass_rate
    exact = run_statistics(reports, [[]] * 10, statistics=StatisticsConfig(
        confidence=0.9, interval="clopper_pearson")).pass_rate
    assert (wilson.method, exact.method, exact.confidence) == ("wilson", "clopper_pearson", 0.9)
    assert_allclose((exact.low, exact.high), stats.beta.ppf([0.05, 0.95], [9, 10], [2, 1]),
                    rtol=1e-12)


def test_gates_are_judged_on_the_conservative_end():
    reports = [_report(i, passed=True) for i in range(1, 41)]
    turns = [_turns(100.0 + i, 200.0 + i) for i in range(40)]  # 80 responses, 100..239 ms
    gates = [GateConfig(metric="pass_rate", min_lower_bound=0.9),   # Wilson low of 40/40: 0.912
             GateConfig(metric="pass_rate", min_lower_bound=0.95),
             GateConfig(metric="first_audio_latency_ms", quantile=0.5, max=220),  # bound: 209
             GateConfig(metric="first_audio_latency_ms", quantile=0.5, max=150),
             GateConfig(metric="first_audio_latency_ms", quantile=0.99, max=10_000),
             GateConfig(metric="first_audio_latency_ms", quantile=0.1, min=100)]
    checks = run_statistics(reports, turns, statistics=StatisticsConfig(), gates=gates).gates
    assert [c.status for c in checks] == ["passed", "failed", "passed", "failed",
                                          "inconclusive", "passed"]
    assert checks[1].bound == pytest.approx(0.9124, abs=1e-4)
    assert "the interval reaches below it" in checks[1].message
    values = np.sort([100.0 + i for i in range(40)] + [200.0 + i for i in range(40)])
    median = quantile_bound(values, quantile=0.5)
    assert (checks[2].observed, checks[2].bound, checks[2].n) == (median.estimate, median.bound,
                                                                  80)
    assert checks[4].needed == 368 and "needs at least 368 responses" in checks[4].message
    nothing = run_statistics([], [], statistics=StatisticsConfig(), gates=gates[:1]).gates
    assert nothing[0].status == "inconclusive"


def test_gate_configs_are_validated():
    with pytest.raises(ValueError, match="min_lower_bound"):
        GateConfig(metric="pass_rate", quantile=0.5, max=1)
    with pytest.raises(ValueError, match="'quantile' and one of 'max' or 'min'"):
        GateConfig(metric="first_audio_latency_ms", max=800)
    with pytest.raises(ValueError, match="one of 'max' or 'min'"):
        GateConfig(metric="first_audio_latency_ms", quantile=0.9, max=800, min=1)
    with pytest.raises(ConfigError) as caught:
        check_gate_metrics([GateConfig(metric="pass_rate", min_lower_bound=0.5),
                            GateConfig(metric="latency", quantile=0.9, max=1)],
                           source="run.yaml")
    assert str(caught.value).startswith("run.yaml: gates[1].metric: unknown metric 'latency'")
    assert "\n" not in str(caught.value)
    assert "first_audio_latency_ms" in GATE_METRICS and "playback_start_ms" not in GATE_METRICS


def test_judge_corrected_rates_beside_the_judges_own(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"criterion": "polite", "tp": 40, "fn": 10, "fp": 5, "tn": 45,
                                "kappa": 0.7}))
    calibration = read_calibration(path)
    reports = [_report(i, passed=True, judge=i <= 6) for i in range(1, 11)]
    reports.append(_report(11, passed=True, judge="error"))  # an error is no verdict
    result = run_statistics(reports, [[]] * 11, statistics=StatisticsConfig(),
                            calibrations=[calibration])
    (rate,) = result.judge_corrected_pass_rates
    assert (rate.judge_pass_rate.n, rate.judge_pass_rate.passed) == (10, 6)
    direct = corrected_rate(6, 10, tp=40, fn=10, fp=5, tn=45)
    assert (rate.corrected, rate.low, rate.high) == (direct.corrected, direct.low, direct.high)
    assert rate.calibration.source == str(path.resolve())


@pytest.mark.parametrize(("text", "message"), [
    ("not json", r"not a calibration result \(JSON\)"),
    ('{"criterion": "polite", "tp": 1, "fn": 1, "fp": 1}', "tn"),
    ('{"criterion": "polite", "tp": -1, "fn": 1, "fp": 1, "tn": 1}', "tp"),
    ('{"criterion": "polite", "tp": 0, "fn": 0, "fp": 0, "tn": 0}', "no labeled item"),
])
def test_a_bad_calibration_file_is_a_configuration_error(tmp_path, text, message):
    path = tmp_path / "calibration.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_calibration(path)


def test_statistics_and_gates_do_not_change_the_suite_hash():
    from pathlib import Path

    run = Path(__file__).resolve().parents[2] / "examples" / "run-workload-neutral-voice.yaml"
    plain = load_run(run).suite_hash()
    judged = load_run(run, overrides=[
        "statistics.confidence=0.9", "statistics.interval=clopper_pearson",
        "gates=[{metric: pass_rate, min_lower_bound: 0.8}]"]).suite_hash()
    assert plain == judged
    assert load_run(run, overrides=["trial_seed=1"]).suite_hash() != plain


def test_a_gate_reads_a_response_figure_by_its_field_name() -> None:
    turn = TurnMetrics(turn_id="t1", index=0, status="completed", output_audio_seconds=1.5,
                       interrupted=False, response_latency_ms=420.0, tool_calls=2,
                       product_cut_in=None)
    assert turn.figure("response_latency_ms") == 420.0
    assert turn.figure("tool_calls") == 2.0
    assert turn.figure("first_audio_latency_ms") is None  # unset
    assert turn.figure("product_cut_in") is None  # a hesitation field, absent on this turn
    assert turn.figure("transcript") is None  # not a number
    assert turn.figure("no_such_field") is None
