"""JUnit XML from bundles, read back with junitparser (the way CI servers consume it)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from voicelab.artifacts import (
    ExecutionFailure,
    JudgeResult,
    MatrixCell,
    MatrixReport,
    RunReport,
    TrialReport,
    Verdict,
    junit_xml,
    write_json,
)
from voicelab.errors import ConfigError
from voicelab.scoring import DifferenceInterval, gate_on_interval

junitparser = pytest.importorskip("junitparser")

STARTED = "2025-03-04T05:06:07.890Z"


def _trial(run_dir: Path, number: int, *, passed: bool = True, executed: bool = True,
           verdicts: list[Verdict] = (), failures: list[ExecutionFailure] = (),
           judges: list[JudgeResult] = ()) -> None:
    trial_id = f"trial-{number:03d}"
    report = TrialReport(
        trial=number, trial_id=trial_id, seed=41 + number, session_id=f"s{number}",
        scenario_id="scn", persona="Jordan", environment="quiet", adapter="fake",
        trace_id="t", execution_status="succeeded" if executed else "failed",
        exit_reason="endpoint_completion" if executed else "endpoint_error", passed=passed,
        started_at=STARTED, ended_at=STARTED, duration_seconds=1.25 * number,
        verdicts=list(verdicts), failures=list(failures), judges=list(judges))
    write_json(run_dir / trial_id / "trial-report.json", report)


def _run(run_dir: Path, *, planned: int, executed: int, status: str = "complete",
         message: str = "") -> Path:
    report = RunReport(
        run_id=run_dir.name, status=status, scenario_id="scn", persona="Jordan",
        environment="quiet", adapter="fake", suite_hash="sha256:abc", bundle_path=str(run_dir),
        started_at=STARTED, ended_at=STARTED, trial_count=planned, planned_trials=planned,
        executed_trials=executed, passed_trials=0, pass_at_k=False, pass_power_k=False,
        exit_code=3, message=message)
    write_json(run_dir / "run-report.json", report)
    return run_dir


@pytest.fixture
def mixed_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run-1"
    _trial(run_dir, 1, verdicts=[Verdict(name="expected_topics", passed=True, why="ok")])
    _trial(run_dir, 2, passed=False, verdicts=[
        Verdict(name="concise", passed=False, critical=False, why="41 words (budget 30)"),
        Verdict(name="outcome_follow_up_created", passed=False,
                why="persisted follow_up_created = False, expected True\x00")],
        judges=[JudgeResult(name="no_false_claims", kind="custom_judge", critical=True,
                            status="failed", rationale="claimed a save it never made")])
    _trial(run_dir, 3, passed=False, executed=False,
           failures=[ExecutionFailure(kind="endpoint", message="connection refused")],
           verdicts=[Verdict(name="expected_exit", passed=False, why="ended with error")])
    return _run(run_dir, planned=4, executed=3, status="interrupted",
                message="1 planned trial(s) did not run because the run was interrupted")


def _cases(xml) -> dict:
    return {case.name: case for suite in xml for case in suite}


def test_trials_become_test_cases_with_their_reasons(mixed_run, tmp_path):
    target = tmp_path / "out" / "junit.xml"
    text = junit_xml(mixed_run, path=target)
    assert target.read_text(encoding="utf-8") == text
    xml = junitparser.JUnitXml.fromfile(str(target))
    (suite,) = list(xml)
    assert suite.name == "scn__Jordan__quiet"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 1, 2, 0)
    assert suite.timestamp == "2025-03-04T05:06:07"
    assert {p.name: p.value for p in suite.properties()}["run_id"] == "run-1"
    cases = _cases(xml)
    assert list(cases) == ["trial-001 seed 42", "trial-002 seed 43", "trial-003 seed 44",
                           "planned trials"]
    assert cases["trial-001 seed 42"].is_passed
    assert cases["trial-001 seed 42"].system_out == f"bundle: {mixed_run / 'trial-001'}"
    assert cases["trial-001 seed 42"].time == pytest.approx(1.25)

    (failure,) = cases["trial-002 seed 43"].result
    assert isinstance(failure, junitparser.Failure) and failure.type == "verdict"
    # the critical verdict leads; the advisory one is marked; the critical judge is named; the
    # NUL byte a transcript could carry is replaced, not written as invalid XML
    assert failure.message == ("outcome_follow_up_created: persisted follow_up_created = "
                               "False, expected True\ufffd")
    assert failure.text.splitlines()[1:] == [
        "concise: 41 words (budget 30) (advisory)",
        "judge no_false_claims: failed: claimed a save it never made"]

    (error,) = cases["trial-003 seed 44"].result
    assert isinstance(error, junitparser.Error) and error.type == "execution"
    assert error.message == "endpoint: connection refused"
    assert "expected_exit: ended with error" in error.text

    (missing,) = cases["planned trials"].result
    assert isinstance(missing, junitparser.Error) and "interrupted" in missing.message


def test_a_sweep_groups_cases_by_cell(tmp_path):
    sweep = tmp_path / "sweep"
    cells = []
    for cell_id, passes in (("scn__Jordan__quiet", (True, True)),
                            ("scn__Sam__office", (True, False))):
        run_dir = sweep / cell_id
        for number, passed in enumerate(passes, start=1):
            _trial(run_dir, number, passed=passed, verdicts=[
                Verdict(name="expected_topics", passed=passed, why="topics")])
        _run(run_dir, planned=2, executed=2)
        cells.append(MatrixCell(cell_id=cell_id, scenario="scn", persona="p", environment="e",
                                bundle_path=str(run_dir), trial_count=2, executed_trials=2,
                                passed_trials=sum(passes), pass_at_k=True,
                                pass_power_k=all(passes), exit_code=0, suite_hash="h"))
    write_json(sweep / "matrix-report.json", MatrixReport(
        name="sweep", run_id="m1", status="complete", suite_path="s.yaml", run_dir=str(sweep),
        started_at=STARTED, ended_at=STARTED, scenarios=["scn"], personas=["Jordan", "Sam"],
        environments=["quiet", "office"], trials_per_cell=2, cell_count=2, conversations=4,
        passed_trials=3, executed_trials=4, pass_at_k=True, pass_power_k=False, exit_code=3,
        cells=cells))
    xml = junitparser.JUnitXml.fromstring(junit_xml(sweep))
    suites = {suite.name: suite for suite in xml}
    assert list(suites) == ["scn__Jordan__quiet", "scn__Sam__office"]
    assert [(s.tests, s.failures) for s in suites.values()] == [(2, 0), (2, 1)]
    assert {case.classname for case in suites["scn__Sam__office"]} == {"scn__Sam__office"}
    root = ET.fromstring(junit_xml(sweep))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "0")


def test_gates_are_a_compare_suite(tmp_path):
    def gate(estimate, low, high, *, strict=False, name):
        interval = DifferenceInterval(estimate, low, high, 0.95, "test", 12)
        return gate_on_interval(interval, allowed_change=100.0, regression="increase",
                                strict=strict, name=name, unit="ms")

    gates = [gate(400, 380, 420, name="latency_p95"),
             gate(90, 40, 140, name="latency_median"),
             gate(0, -5, 5, name="dead_air_p95"),
             gate(90, 40, 140, strict=True, name="strict_latency")]
    xml = junitparser.JUnitXml.fromstring(junit_xml(gates=gates))
    (suite,) = list(xml)
    assert suite.name == "compare"
    assert (suite.tests, suite.failures, suite.skipped) == (4, 2, 1)
    cases = _cases(xml)
    (failed,) = cases["latency_p95"].result
    assert isinstance(failed, junitparser.Failure) and "evidence of a regression" in failed.message
    (skipped,) = cases["latency_median"].result
    assert isinstance(skipped, junitparser.Skipped) and "straddles" in skipped.message
    assert cases["dead_air_p95"].is_passed
    assert "within" in cases["dead_air_p95"].system_out
    (strict,) = cases["strict_latency"].result
    assert isinstance(strict, junitparser.Failure) and "pairs would be needed" in strict.message


def test_a_folder_that_is_no_run_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a run or sweep directory"):
        junit_xml(tmp_path)
