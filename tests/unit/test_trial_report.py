"""How a call ended is recorded once (trial.ended, outcome.probed) and every trial report is
built by one function."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voicelab.artifacts import ExecutionFailure, TrialReport, Verdict
from voicelab.recording import EventType, OutcomeProbed, Recording, TrialEnded
from voicelab.runner._report import (
    CallEnding,
    CallTiming,
    TrialIdentity,
    TrialScore,
    recorded_outcome,
    trial_report,
)
from voicelab.runner._rescore_trial import read_recording

ROOT = Path(__file__).resolve().parents[2]
TRIAL_2_0 = ROOT / "tests" / "fixtures" / "bundle-2.0" / "client" / "trial-001"
IDENTITY = TrialIdentity(trial=3, seed=44, session_id="s-t003", configured_session_id=None,
                         scenario_id="scenario", persona="persona", environment="quiet",
                         adapter="fake")
TIMING = CallTiming("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.500Z", 1.5)


def _ended(**probed: object) -> Recording:
    recording = Recording(session_id="s-t003", trace_id="0" * 32, root_span_id="r")
    recording.record(EventType.TRIAL_ENDED, TrialEnded(
        exit_reason="connection_closed", user_turns=2, product_responses=3,
        failures=[ExecutionFailure(kind="endpoint", message="gone", code="connection_lost")]),
        source="runner", direction="internal")
    recording.record(EventType.OUTCOME_PROBED, OutcomeProbed(**probed), source="probe",
                     direction="internal")
    return recording


def test_the_call_s_end_is_read_from_its_events():
    ending = CallEnding.of_recording(_ended(probe="P", status="available", error=None,
                                            outcome={"saved": True}))
    assert ending == CallEnding(
        "connection_closed",
        [ExecutionFailure(kind="endpoint", message="gone", code="connection_lost")],
        "available", {"saved": True}, None, user_turns=2, product_responses=3)
    assert not ending.executed


def test_a_bundle_written_before_the_events_held_it_takes_it_from_its_report():
    report = TrialReport.model_validate_json((TRIAL_2_0 / "trial-report.json").read_bytes())
    ending = CallEnding.of_recording(read_recording(TRIAL_2_0), report=report)
    assert (ending.exit_reason, ending.failures, ending.outcome_status, ending.outcome,
            ending.user_turns, ending.product_responses) == (
        report.exit_reason, report.failures, report.outcome_status, report.outcome,
        report.user_turns, report.product_responses)
    assert ending.outcome is not None  # the fixture's probe answered


def test_the_events_win_over_a_report_that_disagrees():
    report = TrialReport.model_validate_json((TRIAL_2_0 / "trial-report.json").read_bytes())
    ending = CallEnding.of_recording(_ended(probe="P", status="unavailable", error="none",
                                            outcome=None), report=report)
    assert (ending.exit_reason, ending.outcome_status, ending.outcome, ending.outcome_error) == \
        ("connection_closed", "unavailable", None, "none")


def test_an_outcome_is_recorded_as_the_report_writes_it():
    from datetime import datetime

    outcome = recorded_outcome({"at": datetime(2026, 1, 2, 3, 4, 5), "n": 1.5, "odd": b"x"})
    assert outcome == {"at": "2026-01-02T03:04:05", "n": 1.5, "odd": "x"}
    report = trial_report(IDENTITY, CallEnding("max_turns", outcome=outcome), TIMING)
    assert json.loads(report.model_dump_json())["outcome"] == outcome


@pytest.mark.parametrize(("failures", "bundle", "verdict", "status", "executed"), [
    ([], [], True, "passed", "succeeded"),
    ([], [], False, "failed", "succeeded"),
    ([ExecutionFailure(kind="endpoint", message="x")], [], True, "failed", "failed"),
    ([], [ExecutionFailure(kind="artifacts", message="disk full")], True, "failed", "failed"),
])
def test_one_function_decides_a_report_s_status(failures, bundle, verdict, status, executed):
    score = TrialScore(verdicts=[Verdict(name="v", passed=verdict)], judges=[],
                       metrics_summary={}, measurement_degraded=False)
    report = trial_report(IDENTITY, CallEnding("max_turns", failures), TIMING, score=score,
                          bundle_failures=bundle)
    assert (report.status, report.passed, report.execution_status) == \
        (status, status == "passed", executed)
    assert report.failures == [*failures, *bundle] and report.trial_id == "trial-003"


def test_an_unscored_trial_failed():
    failure = ExecutionFailure(kind="runner", code="worker_lost", message="lost")
    report = trial_report(IDENTITY, CallEnding.failed(failure), TIMING, files=["a", "b"])
    assert (report.status, report.passed, report.exit_reason, report.failures, report.files) == \
        ("failed", False, "error", [failure], ["a", "b"])
    assert report.verdicts == [] and report.trace_id == "" and report.duration_seconds == 1.5
