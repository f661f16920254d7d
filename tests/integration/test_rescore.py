"""Re-scoring bundles: the same documents from what a bundle kept, new verdicts from new
definitions, 1.0 bundles read but not re-scored, newer ones refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.analysis import load_frames
from voicelab.artifacts import ArtifactVersionError, read_json, read_voice_events
from voicelab.runner._rescore_trial import RESCORED_FILES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
BUNDLE_1_0 = ROOT / "tests" / "fixtures" / "bundle-1.0"
#: a barge-in into a realtime-paced, stalling reply: placement and every timing metric matter
EVENTFUL = ['script.turns=[{"response": "Wait, one thing first.", "keywords": ["daily plan"], '
            '"interrupt_after_seconds": 1.0}, {"response": "Please record the plan and save '
            'the reminder.", "keywords": ["else", "plan"]}]',
            "endpoint.settings.audio_pacing=realtime", "endpoint.settings.pacing_speed=4",
            "endpoint.settings.stall_ms=1000", "endpoint.settings.stall_on_response=2",
            "endpoint.settings.complete_after_turns=2"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a gate too: rescore judges it again, with the settings the report was written with
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=2,
        overrides=[
        *EVENTFUL, "gates=[{metric: pass_rate, min_lower_bound: 0.1}]"],
        artifacts_dir=tmp_path_factory.mktemp("runs")))
    assert [g.status for g in outcome.report.gates] == ["passed"]  # 2/2: Wilson low 0.34
    metrics = read_json(outcome.bundle_path / "trial-001" / "voice-metrics.json")
    assert metrics["turns"][0]["interrupted"] is True
    assert any((t["playback_stall_ms"] or 0) > 0 for t in metrics["turns"])
    return outcome.bundle_path


def test_rescoring_a_bundle_reproduces_its_documents_byte_for_byte(bundle, tmp_path):
    result = voicelab.rescore(bundle, output=tmp_path / "again")
    assert [t.trial_dir.name for t in result.trials] == ["trial-001", "trial-002"]
    for trial in ("trial-001", "trial-002"):
        for name in RESCORED_FILES:
            original = (bundle / trial / name).read_bytes()
            assert (tmp_path / "again" / trial / name).read_bytes() == original, (trial, name)
    assert (tmp_path / "again" / "run-report.json").read_bytes() == \
        (bundle / "run-report.json").read_bytes()
    assert all(not t.changed_verdicts for t in result.trials)


def test_new_definitions_rescore_old_evidence(bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    scenario_path = copy / "trial-002" / "resolved-scenario.json"
    scenario = json.loads(scenario_path.read_text())
    scenario["resolved"]["eval_spec"]["concise_max_words"] = 3
    scenario_path.write_text(json.dumps(scenario))
    process = _cli("rescore", str(copy))
    assert process.returncode == 3, process.stdout + process.stderr
    assert "trial-002: FAIL (failed: concise; changed: concise)" in process.stdout
    assert f"re-scored in place: the derived files (trial reports, metrics, transcripts, run " \
           f"report) of {copy} were rewritten; --output DIR re-scores a copy instead" \
        in process.stdout
    report = read_json(copy / "trial-002" / "trial-report.json")
    concise = next(v for v in report["verdicts"] if v["name"] == "concise")
    assert concise["passed"] is False and report["passed"] is False
    run = read_json(copy / "run-report.json")
    assert run["passed_trials"] == 1 and run["exit_code"] == 3 and not run["pass_power_k"]
    # the statistics follow: 1/2 has a Wilson lower bound of 0.09, below the gate's 0.1
    assert (run["pass_rate"]["passed"], run["pass_rate"]["n"]) == (1, 2)
    assert [(p["k"], p["pass_power_k"]) for p in run["pass_curve"]] == [(1, 0.5), (2, 0.0)]
    concise_rate = next(r for r in run["verdict_pass_rates"] if r["name"] == "concise")
    assert concise_rate["pass_rate"]["passed"] == 1
    assert [g["status"] for g in run["gates"]] == ["failed"]
    assert sorted(report["files"]) == sorted(p.name for p in (copy / "trial-002").iterdir())


def test_a_bundle_whose_audio_does_not_fit_its_events_is_refused(bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle / "trial-001", copy / "trial-001")
    stream = copy / "trial-001" / "product-received.wav"
    stream.write_bytes(stream.read_bytes()[:len(stream.read_bytes()) // 2])
    process = _cli("rescore", str(copy))
    assert process.returncode == 2, process.stdout + process.stderr
    assert process.stderr.count("\n") == 1 and "product stream" in process.stderr


def test_a_1_0_bundle_is_read_but_not_rescored(tmp_path):
    frames = load_frames([BUNDLE_1_0])
    assert len(frames.trials) == 1 and bool(frames.trials["passed"].iloc[0])
    events = frames.events
    assert events["listener_ms"].notna().all() and len(events) > 100
    assert read_json(BUNDLE_1_0 / "trial-001" / "trial-report.json")["schema_version"] == "1.0"
    shutil.copytree(BUNDLE_1_0, tmp_path / "old")
    process = _cli("rescore", str(tmp_path / "old"))
    assert process.returncode == 2
    assert "before schema 2.0" in process.stderr and process.stderr.count("\n") == 1


def test_a_newer_bundle_is_refused(bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle / "trial-001", copy / "trial-001")
    report_path = copy / "trial-001" / "trial-report.json"
    report = json.loads(report_path.read_text())
    report["schema_version"] = "4.0"
    report_path.write_text(json.dumps(report))
    with pytest.raises(ArtifactVersionError, match="newer than this voicelab reads"):
        voicelab.rescore(copy)


def test_rescore_reads_how_the_call_ended_from_its_events(bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle / "trial-001", copy / "trial-001")
    events = read_voice_events(copy / "trial-001" / "voice-events.jsonl")
    ended = next(e["attributes"] for e in events if e["event_type"] == "trial.ended")
    probed = next(e["attributes"] for e in events if e["event_type"] == "outcome.probed")
    assert ended["failures"] == [] and ended["user_turns"] == 2
    assert probed["outcome"] and probed["status"] == "available"
    path = copy / "trial-001" / "trial-report.json"
    report = json.loads(path.read_text())
    kept = ("exit_reason", "outcome", "outcome_status", "failures", "user_turns",
            "product_responses")
    before = {key: report[key] for key in kept}
    # a report that says otherwise is re-written from the events
    report.update(exit_reason="max_time", outcome=None, outcome_status="error", user_turns=0,
                  product_responses=0)
    path.write_text(json.dumps(report))
    voicelab.rescore(copy)
    after = read_json(path)
    assert {key: after[key] for key in kept} == before
