"""Flaky or broken across runs: real seeded runs of the fake product make a history of three
cells (one that always passes, one planted flaky: a run of it fails, and one that always fails);
each is classified over its runs, a hostile report in the history is left out, and
``voice-evaluator run --history --junit`` prints, keeps and marks the flaky cell."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from junitparser import JUnitXml

import voicelab
from voicelab.history import flakiness, stability_line

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
TRIALS = 2
#: the fake claims to have saved a reminder it never saved: every trial fails its verdicts
BROKEN = "endpoint.settings.claim_without_tool=true"
#: the persona's name makes the cell (scenario x persona x environment)
STEADY, FLAKY, FAILING = "persona.name=Steady", "persona.name=Flaky", "persona.name=Failing"


def _run(artifacts: Path, *overrides: str) -> voicelab.runner.RunOutcome:
    loaded = voicelab.load_run(EXAMPLE, overrides=list(overrides))
    return asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=TRIALS,
        concurrency=2,
        artifacts_dir=artifacts)))


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("history")
    earlier = root / "earlier"
    for overrides in ((STEADY,), (FLAKY,), (FAILING, BROKEN),  # the first run of each cell
                      (STEADY,), (FLAKY, BROKEN), (FAILING, BROKEN)):  # the flaky one fails
        _run(earlier, *overrides)
    # a hostile bundle among them: a report whose counts are text
    (earlier / "junk").mkdir()
    (earlier / "junk" / "run-report.json").write_text(json.dumps(
        {"schema_version": "1.0", "run_id": "junk", "executed_trials": "many"}))
    latest = root / "latest-runs"
    current = [_run(latest, *o) for o in ((STEADY,), (FLAKY,), (FAILING, BROKEN))]
    return {"earlier": earlier, "current": current, "root": root}


def test_three_runs_classify_each_cell(history):
    current = history["current"]
    found = flakiness(history["earlier"], [o.report for o in current], run_id="now")
    assert found.runs_read == 6
    assert [line.split(":")[0] for line in found.unreadable] == [
        str(Path("junk") / "run-report.json")]
    cells = {cell.persona: cell for cell in found.cells}
    assert set(cells) == {"Steady", "Flaky", "Failing"}
    steady, flaky, failing = cells["Steady"], cells["Flaky"], cells["Failing"]
    assert steady.stability == "stable_pass" and steady.flipped is None
    assert failing.stability == "stable_fail" and failing.flipped is None
    assert [r.outcome for r in failing.runs] == ["failed"] * 3
    # the planted flaky cell: passed, failed, passed again; 4 of its 6 trials passed
    assert flaky.stability == "flaky"
    assert [r.outcome for r in flaky.runs] == ["passed", "failed", "passed"]
    assert flaky.flipped == "fail_to_pass"
    rate = flaky.pass_rate
    assert (rate.passed, rate.n) == (2 * TRIALS, 3 * TRIALS)
    assert rate.estimate == pytest.approx(2 / 3)
    assert rate.low < rate.estimate < rate.high  # Wilson 95 %
    assert rate.method == "wilson" and rate.confidence == 0.95
    assert "FLAKY 66.7%" in stability_line(flaky) and "fail -> pass" in stability_line(flaky)
    # a run that is in the history too counts once
    again = flakiness(history["root"], [o.report for o in current], run_id="now")
    assert {c.persona: len(c.runs) for c in again.cells} == {"Steady": 3, "Flaky": 3,
                                                             "Failing": 3}


def test_run_with_history_prints_keeps_and_marks_the_flaky_cell(history, tmp_path):
    junit = tmp_path / "junit.xml"
    artifacts = tmp_path / "runs"
    call = subprocess.run(
        [sys.executable, "-m", "voicelab.cli", "run", str(EXAMPLE), "--trials", str(TRIALS),
         "--artifacts-dir", str(artifacts), "--quiet", "--set", FLAKY, "--set", BROKEN,
         "--history", str(history["root"]), "--junit", str(junit)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert call.returncode == 3, call.stderr  # the run failed its verdicts: the gate says so
    assert "history: 9 earlier run(s)" in call.stdout
    [line] = [line for line in call.stdout.splitlines() if "/ Flaky /" in line]
    # four runs now: passed, failed, passed, failed; flipped back to failing
    assert "FLAKY 50.0%" in line and "(4/8 over 4 run(s))" in line and "pass -> fail" in line
    [bundle] = [p for p in artifacts.iterdir() if p.name != "latest"]
    kept = json.loads((bundle / "flakiness.json").read_text())
    assert [c["stability"] for c in kept["cells"]] == ["flaky"]
    [suite] = list(JUnitXml.fromfile(str(junit)))  # as CI servers read it
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["flaky"] == "true" and properties["flipped"] == "pass_to_fail"
    assert properties["stability"] == "flaky"
    # each test case carries the property too, where pytest's record_property puts it
    cases = ElementTree.parse(junit).getroot().iter("testcase")
    for case in cases:
        assert {p.get("name"): p.get("value") for p in case.iter("property")} == {
            "flaky": "true"}
        assert case.find("failure") is not None  # still failed: flaky is said, not hidden


def test_a_missing_history_folder_is_refused_before_the_run(tmp_path):
    call = subprocess.run(
        [sys.executable, "-m", "voicelab.cli", "run", str(EXAMPLE), "--trials", "1",
         "--artifacts-dir", str(tmp_path / "runs"), "--history", str(tmp_path / "nowhere")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert call.returncode == 2
    assert "--history" in call.stderr and "not a folder of earlier runs" in call.stderr
    assert not (tmp_path / "runs").exists()
