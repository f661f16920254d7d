"""Measurement quality: loop-lag statistics, the degraded judgement, timing verdicts made
inconclusive, gates that leave degraded timings out, the lag ticker, and the lag budget's
AIMD controller (fed a fake lag source)."""

from __future__ import annotations

import array
import asyncio
import time

import numpy as np
import pytest
from numpy.testing import assert_allclose

from voicelab.artifacts import LoopLag, MeasurementQuality, TrialReport, TurnMetrics
from voicelab.config import (
    GateConfig,
    MeasurementConfig,
    PersonaConfig,
    ScenarioConfig,
    StatisticsConfig,
)
from voicelab.execution._lag_budget import Admission, LagBudget, admitted
from voicelab.metrics import degraded_note, judge_measurement, loop_lag_of, loop_lag_statistics
from voicelab.metrics._measurement import judge_turns, tolerances_of
from voicelab.metrics._voice import percentile
from voicelab.recording import EventType, Recording, TrialEnded
from voicelab.runner._loop_lag import LoopLagMonitor
from voicelab.scoring import run_statistics
from voicelab.scoring._verdicts import TIMING_VERDICTS, deterministic_verdicts

# --- statistics and judgement -----------------------------------------------------------------


def test_lag_statistics_are_percentiles_of_the_lateness_in_ms():
    rng = np.random.default_rng(7)
    lateness_ns = rng.integers(0, 5_000_000, size=1000)
    lag = loop_lag_statistics(lateness_ns, interval_ms=10.0)
    # rounded to the microsecond
    assert_allclose(lag.p50, np.percentile(lateness_ns, 50) / 1e6, atol=5e-4)
    assert_allclose(lag.p99, np.percentile(lateness_ns, 99) / 1e6, atol=5e-4)
    assert_allclose(lag.max, lateness_ns.max() / 1e6, atol=5e-4)
    assert (lag.ticks, lag.interval_ms) == (1000, 10.0)


def test_lag_statistics_equal_numpy_s_to_the_microsecond_for_a_trial_s_few_ticks():
    """Sorted in Python (a trial's ticks are few; numpy's overhead was most of the cost on
    the loop): the very numbers numpy's linear percentile gives, for the ticker's array too."""
    rng = np.random.default_rng(11)
    for size in [1, 2, 3, 7, 10, 33, 99, 100, 101, 257]:
        for _ in range(20):
            lateness_ns = array.array("q", rng.choice(
                [0, 1_000, 123_456_789, *rng.integers(0, 90_000_000, size=5)], size=size))
            values = np.asarray(lateness_ns, dtype=np.float64) / 1e6
            p50, p99 = np.percentile(values, [50, 99])
            lag = loop_lag_statistics(lateness_ns, interval_ms=10.0)
            assert (lag.p50, lag.p99, lag.max, lag.ticks) == (
                round(float(p50), 3), round(float(p99), 3), round(float(values.max()), 3), size)


def test_lag_statistics_of_a_paced_trial_s_thousands_of_ticks_are_the_same_numbers():
    """From 200 ticks they are sorted in numpy (a paced trial ticks every 2 ms and its window
    closes on the loop): the same numbers the Python sort gives, to the bit."""
    rng = np.random.default_rng(12)
    for size in [199, 200, 201, 1000, 6500, 9001]:
        lateness_ns = array.array("q", rng.exponential(rng.uniform(1e4, 5e6), size)
                                  .astype(np.int64).tolist())
        values = sorted(late / 1e6 for late in lateness_ns)
        lag = loop_lag_statistics(lateness_ns, interval_ms=2.0)
        assert (lag.p50, lag.p99, lag.max, lag.ticks) == (
            round(percentile(values, 50), 3), round(percentile(values, 99), 3),
            round(values[-1], 3), size)
        p50, p99 = np.percentile(np.asarray(values), [50, 99])
        assert (lag.p50, lag.p99) == (round(float(p50), 3), round(float(p99), 3))


def test_no_tick_has_no_statistics_and_is_not_degraded():
    lag = loop_lag_statistics([], interval_ms=10.0)
    assert (lag.p50, lag.p99, lag.max, lag.ticks) == (None, None, None, 0)
    quality = judge_measurement(lag, MeasurementConfig())
    assert quality.degraded is False and quality.reasons == []


@pytest.mark.parametrize(("p99", "worst", "reasons"), [
    (20.0, 25.0, []),  # at the tolerances: within
    (20.5, 22.0, ["loop lag p99 20.5 ms > 20 ms"]),
    (5.0, 25.1, ["loop lag max 25.1 ms > 25 ms"]),
    (60.0, 90.0, ["loop lag p99 60.0 ms > 20 ms", "loop lag max 90.0 ms > 25 ms"]),
])
def test_degraded_when_a_tolerance_is_exceeded(p99, worst, reasons):
    lag = LoopLag(p50=1.0, p99=p99, max=worst, ticks=100, interval_ms=10.0)
    quality = judge_measurement(lag, MeasurementConfig())
    assert quality.reasons == reasons
    assert quality.degraded is bool(reasons)
    assert quality.tolerances.max_loop_lag_p99_ms == 20.0
    assert degraded_note(quality) == ("; ".join(reasons) or None)


def test_the_tolerances_come_from_the_config():
    lag = LoopLag(p50=1.0, p99=30.0, max=40.0, ticks=10, interval_ms=10.0)
    assert judge_measurement(lag, MeasurementConfig(max_loop_lag_p99_ms=35.0,
                                                    max_loop_lag_max_ms=45.0)).degraded is False
    assert judge_measurement(lag, MeasurementConfig(max_loop_lag_p99_ms=35.0)).degraded is True


def test_an_unmeasured_trial_says_so_and_is_not_degraded():
    recording = Recording(session_id="s", trace_id="t", root_span_id="r")
    recording.record(EventType.TRIAL_ENDED, TrialEnded(exit_reason="max_turns"),
                     source="runner", direction="internal")
    assert loop_lag_of(recording) is None
    quality = judge_measurement(None, MeasurementConfig())
    assert quality.loop_lag_ms is None and quality.degraded is False


def test_the_lag_is_read_back_from_the_trial_ended_event():
    recording = Recording(session_id="s", trace_id="t", root_span_id="r")
    lag = LoopLag(p50=0.5, p99=3.0, max=4.0, ticks=12, interval_ms=10.0)
    recording.record(EventType.TRIAL_ENDED,
                     TrialEnded(exit_reason="max_turns", loop_lag=lag.model_dump(mode="json")),
                     source="runner", direction="internal")
    assert loop_lag_of(recording) == lag


# --- verdicts ---------------------------------------------------------------------------------

def _turn(index: int, *, latency: float, interrupted: bool = False) -> TurnMetrics:
    return TurnMetrics(turn_id=f"turn-{index:03d}", index=index, status="completed",
                       first_audio_latency_ms=latency, output_audio_seconds=1.0,
                       interrupted=interrupted,
                       interruption_stop_latency_ms=120.0 if interrupted else None)


def _verdicts(measurement) -> dict:
    scenario = ScenarioConfig.model_validate({"id": "s", "eval_spec": {
        "expected_exit": "max_turns", "max_first_audio_latency_ms": 500,
        "max_interruption_stop_ms": 100, "advisory_verdicts": ["interruption_honoured"]}})
    verdicts = deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="max_turns", outcome_status="unavailable", outcome=None,
        outcome_error=None, measurement=measurement,
        turn_metrics=[_turn(0, latency=300.0), _turn(1, latency=200.0, interrupted=True)])
    return {v.name: v for v in verdicts}


def _timed(measurement, *, latencies, stop_ms, limit_ms=500, stop_limit_ms=100) -> dict:
    scenario = ScenarioConfig.model_validate({"id": "s", "eval_spec": {
        "expected_exit": "max_turns", "max_first_audio_latency_ms": limit_ms,
        "max_interruption_stop_ms": stop_limit_ms,
        "advisory_verdicts": ["interruption_honoured"]}})
    turns = [_turn(i, latency=value) for i, value in enumerate(latencies)]
    turns[-1].interrupted, turns[-1].interruption_stop_latency_ms = True, stop_ms
    verdicts = deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="max_turns", outcome_status="unavailable", outcome=None,
        outcome_error=None, measurement=measurement, turn_metrics=turns)
    return {v.name: v for v in verdicts}


_LAGGED = LoopLag(p50=10.0, p99=80.0, max=120.0, ticks=50, interval_ms=10.0)


def test_a_timing_verdict_the_error_cannot_change_is_decided():
    degraded = judge_measurement(_LAGGED, MeasurementConfig())
    # 300 ms and 200 ms against 500 ms: even 120 ms too low, both are under the limit
    verdicts = _timed(degraded, latencies=[300.0, 200.0], stop_ms=30.0)
    assert verdicts["first_audio_latency"].status == "passed"
    assert "possible timing error 120.0 ms" in verdicts["first_audio_latency"].why
    # 700 ms against 500 ms: even 120 ms too high, it is over the limit
    verdicts = _timed(degraded, latencies=[300.0, 700.0], stop_ms=300.0)
    assert verdicts["first_audio_latency"].status == "failed"
    assert verdicts["interruption_honoured"].status == "failed"
    assert verdicts["interruption_honoured"].critical is False  # advisory stays advisory


def test_a_timing_verdict_is_inconclusive_only_when_the_error_straddles_its_limit():
    degraded = judge_measurement(_LAGGED, MeasurementConfig())
    trusted = judge_measurement(LoopLag(p50=0.5, p99=2.0, max=3.0, ticks=50, interval_ms=10.0),
                                MeasurementConfig())
    undecided = _timed(degraded, latencies=[450.0, 200.0], stop_ms=150.0)
    decided = _timed(trusted, latencies=[450.0, 200.0], stop_ms=150.0)
    assert decided["first_audio_latency"].status == "passed"
    assert decided["interruption_honoured"].status == "failed"  # 150 ms > 100 ms
    for name in TIMING_VERDICTS:
        verdict = undecided[name]
        assert verdict.status == "inconclusive" and verdict.passed is False
        assert verdict.observed == decided[name].observed  # the figure is kept
        assert "possible timing error 120.0 ms" in verdict.why
        assert "loop lag p99 80.0 ms > 20 ms" in verdict.why
        assert verdict.critical == decided[name].critical
    assert undecided["expected_exit"] == decided["expected_exit"]  # not a timing verdict


def test_a_trial_judged_per_turn_uses_each_turns_own_error_bound():
    turns = [_turn(0, latency=480.0), _turn(1, latency=100.0)]
    turns[0].timing_degraded, turns[0].stamp_error_bound_ms = True, 2.0
    turns[1].timing_degraded, turns[1].stamp_error_bound_ms = True, 300.0
    quality = MeasurementQuality(loop_lag_ms=_LAGGED, degraded=True, scope="turn",
                                 tolerances=tolerances_of(MeasurementConfig()),
                                 reasons=["turn-000: x", "turn-001: y"],
                                 degraded_turns=["turn-000", "turn-001"])
    scenario = ScenarioConfig.model_validate({"id": "s", "eval_spec": {
        "max_first_audio_latency_ms": 500}})
    verdict, = [v for v in deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="max_turns", outcome_status="unavailable", outcome=None, outcome_error=None,
        measurement=quality, turn_metrics=turns) if v.name == "first_audio_latency"]
    # 480 + 2 and 100 + 300 are both under 500: decided although both turns are degraded
    assert verdict.status == "passed"
    turns[0].stamp_error_bound_ms = 30.0  # 480 + 30 straddles 500
    verdict, = [v for v in deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="max_turns", outcome_status="unavailable", outcome=None, outcome_error=None,
        measurement=quality, turn_metrics=turns) if v.name == "first_audio_latency"]
    assert verdict.status == "inconclusive"
    assert "measured 480.0 ms, possible timing error 30.0 ms, limit 500 ms" in verdict.why


def test_without_a_measurement_the_verdicts_are_judged_as_before():
    assert _verdicts(None)["first_audio_latency"].status == "passed"


# --- run statistics ---------------------------------------------------------------------------

def _report(trial: int, *, degraded: bool) -> TrialReport:
    return TrialReport(
        trial=trial, trial_id=f"trial-{trial:03d}", seed=trial, session_id="s",
        scenario_id="x", persona="p", environment="quiet", adapter="fake", trace_id="t",
        execution_status="succeeded", exit_reason="max_turns", passed=True, started_at="",
        ended_at="", duration_seconds=1.0, measurement_degraded=degraded)


def test_gates_on_timing_metrics_leave_degraded_trials_out():
    # 80 trusted responses at 100 ms, and 80 of degraded trials at 900 ms
    reports = [_report(i, degraded=i > 80) for i in range(1, 161)]
    turns = [[_turn(0, latency=900.0 if i > 80 else 100.0)] for i in range(1, 161)]
    gate = GateConfig(metric="first_audio_latency_ms", quantile=0.95, max=200)
    other = GateConfig(metric="output_audio_seconds", quantile=0.5, max=2)
    result = run_statistics(reports, turns, statistics=StatisticsConfig(), gates=[gate, other])
    latency, audio = result.gates
    assert latency.status == "passed" and latency.n == 80
    assert latency.message.endswith("(the 80 timing-degraded response(s) of 80 degraded "
                                    "trial(s) left out)")
    assert audio.n == 160  # not a clock figure: every trial counts
    assert "degraded" not in audio.message
    assert result.pass_rate.n == 160  # degraded trials still count toward the pass rate


def test_gates_leave_out_only_the_degraded_responses_of_a_trial_judged_per_turn():
    # each degraded trial has one trusted response at 100 ms and one degraded at 900 ms
    reports = [_report(i, degraded=True) for i in range(1, 81)]
    turns = []
    for _ in reports:
        trusted, late = _turn(0, latency=100.0), _turn(1, latency=900.0)
        trusted.timing_degraded, late.timing_degraded = False, True
        turns.append([trusted, late])
    gate = GateConfig(metric="first_audio_latency_ms", quantile=0.95, max=200)
    latency, = run_statistics(reports, turns, statistics=StatisticsConfig(), gates=[gate]).gates
    assert latency.status == "passed" and latency.n == 80
    assert latency.message.endswith("(the 80 timing-degraded response(s) of 80 degraded "
                                    "trial(s) left out)")


def test_a_response_judged_per_figure_is_left_out_only_of_the_gates_on_its_degraded_figures():
    # every response has a true 100 ms latency and a stall that may be off (its bound is over
    # the tolerance): the stall gate leaves them out, the latency gate keeps them all
    reports = [_report(i, degraded=True) for i in range(1, 81)]
    turns = []
    for _ in reports:
        turn = TurnMetrics(turn_id="turn-000", index=0, status="completed",
                           response_latency_ms=100.0, playback_stall_ms=400.0,
                           output_audio_seconds=1.0, interrupted=False,
                           timing_degraded=True,
                           figure_error_bounds_ms={"response_latency_ms": 0.0,
                                                   "playback_stall_ms": 60.0},
                           degraded_figures=["playback_stall_ms"])
        turns.append([turn])
    latency_gate = GateConfig(metric="response_latency_ms", quantile=0.95, max=200)
    stall_gate = GateConfig(metric="playback_stall_ms", quantile=0.95, max=200)
    latency, stall = run_statistics(reports, turns, statistics=StatisticsConfig(),
                                    gates=[latency_gate, stall_gate]).gates
    assert latency.status == "passed" and latency.n == 80
    assert "left out" not in latency.message
    assert stall.n == 0 and stall.status == "inconclusive"  # nothing trusted to judge
    assert stall.message.endswith("(the 80 timing-degraded response(s) of 80 degraded "
                                  "trial(s) left out)")


def test_the_figures_over_the_tolerance_are_named_and_written_only_when_judged_per_figure():
    turn = _turn(0, latency=100.0)
    assert "degraded_figures" not in turn.model_dump(mode="json")  # judged per stamp: absent
    judge_turns([turn], {}, MeasurementConfig(max_loop_lag_max_ms=25.0),
                figures={"turn-000": {"response_latency_ms": 3.0, "playback_stall_ms": 40.0}})
    assert turn.degraded_figures == ["playback_stall_ms"] and turn.timing_degraded
    assert turn.model_dump(mode="json")["degraded_figures"] == ["playback_stall_ms"]
    # none over the tolerance: absent, in memory as when read back from the bundle
    judge_turns([turn], {}, MeasurementConfig(max_loop_lag_max_ms=25.0),
                figures={"turn-000": {"response_latency_ms": 3.0, "playback_stall_ms": 4.0}})
    assert turn.degraded_figures is None and not turn.timing_degraded
    assert TurnMetrics.model_validate(turn.model_dump(mode="json")) == turn


# --- the ticker -------------------------------------------------------------------------------

def test_the_ticker_sees_a_blocked_loop_and_stops_with_its_last_window():
    async def scenario():
        monitor = LoopLagMonitor(interval_ms=5.0)
        quiet, blocked = monitor.open(), None
        await asyncio.sleep(0.05)
        blocked = monitor.open()
        time.sleep(0.12)  # a synchronous call on the loop
        await asyncio.sleep(0.03)
        first, second = monitor.close(quiet), monitor.close(blocked)
        ticking = monitor.ticking
        await asyncio.sleep(0.02)
        await asyncio.sleep(0.02)
        return first, second, ticking, len(quiet.lateness_ns)

    first, second, ticking, kept = asyncio.run(scenario())
    assert first.ticks > second.ticks >= 1
    # the tick asleep when the block began woke at least the block minus one interval late
    assert second.max >= 120.0 - 5.0 and first.max >= 115.0
    assert not ticking  # the last close stopped the ticker
    assert kept == first.ticks  # nothing appended after the window closed


def test_a_dropped_window_stops_receiving_ticks():
    async def scenario():
        monitor = LoopLagMonitor(interval_ms=2.0)
        monitor.open()  # a trial that died without closing its window
        kept = monitor.open()
        await asyncio.sleep(0.02)
        alive = len(monitor._windows)
        lag = monitor.close(kept)
        return alive, lag, monitor.ticking

    alive, lag, ticking = asyncio.run(scenario())
    assert alive == 1 and lag.ticks >= 1 and not ticking


def test_the_shared_log_keeps_only_what_open_windows_need():
    async def scenario():
        monitor = LoopLagMonitor(interval_ms=1.0)
        monitor.TRIM_TICKS = 5
        first = monitor.open()
        await asyncio.sleep(0.03)
        second = monitor.open()
        await asyncio.sleep(0.03)
        ticked = monitor._first + len(monitor._log)  # ticks so far, trimmed or not
        a = monitor.close(first)
        await asyncio.sleep(0.03)
        kept = len(monitor._log)
        b = monitor.close(second)
        return a, ticked - first.start, b, kept

    a, expected, b, kept = asyncio.run(scenario())
    assert a.ticks == expected > 5  # trimming never cut into an open window
    assert 0 < kept <= b.ticks  # once the first closed, only the second's ticks were kept


# --- the lag budget (AIMD, fed a fake lag source) ----------------------------------------------

def test_over_budget_halves_the_limit_once_per_epoch_and_recovers_additively():
    budget = LagBudget(budget_ms=20.0, ceiling=16)
    stale = Admission(budget.epoch)
    budget.observe(Admission(budget.epoch), 35.0)
    assert (budget.limit, budget.decreases) == (8, 1)
    budget.observe(stale, 90.0)  # admitted under the old limit: says nothing about this one
    assert budget.limit == 8
    for _ in range(7):
        budget.observe(Admission(budget.epoch), 5.0)
    assert budget.limit == 8
    budget.observe(Admission(budget.epoch), 5.0)  # the 8th trial within budget at 8
    assert budget.limit == 9
    for _ in range(5):
        budget.observe(Admission(budget.epoch), 40.0)
    assert budget.limit == 1 and budget.lowest == 1  # 9 -> 4 -> 2 -> 1, then floor
    budget.observe(Admission(budget.epoch), None)  # not measured: no information
    assert budget.limit == 1 and budget.decreases == 4


def test_the_limit_never_exceeds_the_configured_concurrency():
    budget = LagBudget(budget_ms=20.0, ceiling=2)
    for _ in range(10):
        budget.observe(Admission(budget.epoch), 1.0)
    assert budget.limit == 2 and budget.lowest == 2 and budget.decreases == 0


def test_admission_waits_while_the_limit_is_reached():
    async def scenario():
        budget = LagBudget(budget_ms=20.0, ceiling=4)
        budget.limit = 2
        running: list[int] = []
        peak = 0

        async def trial(index: int, lag: float):
            nonlocal peak
            async with admitted(budget) as slot:
                running.append(index)
                peak = max(peak, len(running))
                await asyncio.sleep(0.01)
                running.remove(index)
                slot.loop_lag = LoopLag(p50=lag, p99=lag, max=lag, ticks=1, interval_ms=10.0)

        await asyncio.gather(*(trial(i, 50.0 if i == 0 else 1.0) for i in range(6)))
        return peak, budget

    peak, budget = asyncio.run(scenario())
    assert peak == 2
    assert budget.lowest == 1 and budget.active == 0


# --- the summary's warning: only when something is at stake -----------------------------------

def _degraded_trial(trial: int, *, bound_ms: float, latency_ms: float, limit_ms: float
                    ) -> tuple[TrialReport, list[TurnMetrics]]:
    """A trial whose reply is timing-degraded by ``bound_ms``, judged against ``limit_ms``."""
    turns = [_turn(0, latency=latency_ms)]
    turns[0].timing_degraded, turns[0].stamp_error_bound_ms = True, bound_ms
    quality = MeasurementQuality(loop_lag_ms=_LAGGED, degraded=True, scope="turn",
                                 tolerances=tolerances_of(MeasurementConfig()),
                                 reasons=["turn-000: x"], degraded_turns=["turn-000"])
    scenario = ScenarioConfig.model_validate({"id": "s", "eval_spec": {
        "max_first_audio_latency_ms": limit_ms}})
    verdicts = deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="max_turns", outcome_status="unavailable", outcome=None, outcome_error=None,
        measurement=quality, turn_metrics=turns)
    status = "inconclusive" if any(v.status == "inconclusive" for v in verdicts) else "passed"
    report = TrialReport(
        trial=trial, trial_id=f"trial-{trial:03d}", seed=trial, session_id="s", scenario_id="s",
        persona="p", environment="quiet", adapter="fake", trace_id="0" * 32,
        execution_status="succeeded", exit_reason="max_turns", passed=status == "passed",
        status=status, started_at="", ended_at="", duration_seconds=1.0, verdicts=verdicts,
        measurement_degraded=True)
    return report, turns


def _warnings(*trials: tuple[TrialReport, list[TurnMetrics]], gates=()) -> list[str]:
    return run_statistics([t[0] for t in trials], [t[1] for t in trials],
                          statistics=StatisticsConfig(), gates=list(gates)).measurement_warnings


def test_degraded_trials_whose_errors_change_nothing_are_counted_not_announced():
    """The alarm-fatigue case: every trial's reply is degraded (30 ms > the 25 ms tolerance),
    but 300 ms + 30 ms cannot reach a 2000 ms limit and 30 ms is within the documented 40 ms:
    no warning line, the report still counts them."""
    from voicelab.cli._summaries import degraded_warning

    trials = [_degraded_trial(i, bound_ms=30.0, latency_ms=300.0, limit_ms=2000.0)
              for i in (1, 2, 3)]
    assert _warnings(*trials) == []
    assert degraded_warning([], 3, 3) is None


def test_a_verdict_the_error_could_change_warns_once():
    from voicelab.cli._summaries import degraded_warning

    at_stake = _degraded_trial(1, bound_ms=30.0, latency_ms=480.0, limit_ms=500.0)
    calm = _degraded_trial(2, bound_ms=30.0, latency_ms=300.0, limit_ms=2000.0)
    warnings = _warnings(at_stake, calm)
    assert warnings == ["1 trial(s) have a timing verdict its possible error could change "
                        "(first_audio_latency: inconclusive)"]
    line = degraded_warning(warnings, 2, 2)
    assert line is not None and line.startswith("warning: the evaluator's event loop lagged "
                                                "where it matters: 1 trial(s)")
    assert "2 of 2 trial(s) degraded" in line and "fewer concurrent trials per worker" in line


def test_an_error_beyond_the_documented_accuracy_warns():
    beyond = _degraded_trial(1, bound_ms=120.0, latency_ms=300.0, limit_ms=2000.0)
    assert _warnings(beyond) == ["1 response(s) in 1 trial(s) may be off by more than the "
                                 "documented 40 ms (up to 120 ms)"]


def test_stamps_beyond_the_documented_accuracy_whose_figures_are_within_it_do_not_warn():
    # stamps late by 120 ms, but no figure of the response can move by more than 30 ms
    within = _degraded_trial(1, bound_ms=120.0, latency_ms=300.0, limit_ms=2000.0)
    within[1][0].figure_error_bounds_ms = {"playback_stall_ms": 30.0, "dead_air_ms": 0.0}
    assert _warnings(within) == []
    within[1][0].figure_error_bounds_ms = {"playback_stall_ms": 30.0, "dead_air_ms": 90.0}
    assert _warnings(within) == ["1 response(s) in 1 trial(s) may be off by more than the "
                                 "documented 40 ms (up to 90 ms)"]


def test_a_timing_gate_that_left_degraded_responses_out_warns():
    calm = _degraded_trial(1, bound_ms=30.0, latency_ms=300.0, limit_ms=2000.0)
    gate = GateConfig(metric="first_audio_latency_ms", quantile=0.5, max=1000)
    assert _warnings(calm, gates=[gate]) == [
        "the first_audio_latency_ms gate left out 1 timing-degraded response(s)"]
