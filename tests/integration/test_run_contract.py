"""The seed's two-trial contract through the CLI as a subprocess, against the embedded fake."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import wave
from pathlib import Path

import pytest

from voicelab.artifacts import (
    SCHEMA_VERSION,
    TRIAL_FILES,
    RawEndpointEvents,
    RunReport,
    ToolCalls,
    Transcript,
    TrialReport,
    VoiceEvent,
    VoiceMetrics,
)
from voicelab.artifacts._models import Interoperability, ResolvedDocument

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SEED_VERDICTS = ["expected_topics", "expected_exit", "concise", "outcome_follow_up_created",
                 "outcome_report_fields_complete", "script_turns_said"]


@pytest.fixture(scope="module")
def contract_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    artifacts = tmp_path_factory.mktemp("contract")
    process = subprocess.run(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--trials", "2",
         "--artifacts-dir", str(artifacts)],
        capture_output=True, text=True, timeout=120)
    bundles = [p for p in artifacts.iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(bundles) == 1, (process.stdout, process.stderr)
    return process, bundles[0]


def test_result_contract(contract_run):
    process, bundle = contract_run
    report = RunReport.model_validate(json.loads((bundle / "run-report.json").read_text()))
    contract = {
        "process_exit_code": process.returncode,
        "trial_count": report.trial_count,
        "pass_power_k": report.pass_power_k,
        "trial_reports_present": all((bundle / t.path / "trial-report.json").is_file()
                                     for t in report.trials) and len(report.trials) == 2,
        "artifact_bundle_path_recorded": Path(report.bundle_path) == bundle.resolve(),
    }
    assert contract == {"process_exit_code": 0, "trial_count": 2, "pass_power_k": True,
                        "trial_reports_present": True, "artifact_bundle_path_recorded": True}, \
        process.stderr
    assert report.pass_at_k and report.passed_trials == 2 and report.status == "complete"
    assert report.suite_hash.startswith("sha256:")
    assert "bundle:" in process.stdout and "p50" in process.stdout


def _collapse(types: list[str]) -> list[str]:
    return [kind for kind, _ in itertools.groupby(types)]


def test_protocol_order_seen_by_the_product_and_the_timeline(contract_run):
    _, bundle = contract_run
    raw = RawEndpointEvents.model_validate_json((bundle / "trial-001" /
                                                 "raw-endpoint-events.json").read_text())
    completed = [e.raw for e in raw.events if e.type == "conversation_complete"]
    assert len(completed) == 1
    client_messages = completed[0]["client_messages"]
    assert client_messages[0] == "evaluator.init"
    assert client_messages.count("evaluator.init") == 1
    assert _collapse(client_messages) == ["evaluator.init", "binary_audio",
                                          "input_audio_buffer.commit", "response.create"]
    assert client_messages.count("binary_audio") >= 2

    events = [json.loads(line) for line in
              (bundle / "trial-001" / "voice-events.jsonl").read_text().splitlines()]
    outbound = [e["event_type"] for e in events if e["direction"] == "outbound"]
    assert _collapse([t for t in outbound if t.startswith(("session.connected", "user.audio",
                                                           "user.turn_committed"))]) == \
        ["session.connected", "user.audio_chunk", "user.turn_committed"]
    sent_chunks = sum(1 for e in events if e["event_type"] == "user.audio_chunk")
    assert sent_chunks == client_messages.count("binary_audio")


@pytest.mark.parametrize("trial", ["trial-001", "trial-002"])
def test_execution_properties_and_files(contract_run, trial):
    _, bundle = contract_run
    folder = bundle / trial
    report = TrialReport.model_validate_json((folder / "trial-report.json").read_text())
    assert report.execution_status == "succeeded"
    assert report.exit_reason == "endpoint_completion"
    assert report.passed is True
    assert report.outcome_status == "available"
    # the seed's contract says "1.0"; schema 2.0 changed the meaning of session_id (per trial)
    assert report.voice_event_schema_versions == [SCHEMA_VERSION] == ["3.0"]
    assert report.interoperability_schema_version == SCHEMA_VERSION
    assert report.audio_format == {"encoding": "pcm_s16le", "sample_rate_hz": 24000,
                                   "channels": 1}
    assert [v.name for v in report.verdicts] == SEED_VERDICTS
    assert all(v.passed and v.critical for v in report.verdicts)

    assert sorted(p.name for p in folder.iterdir()) == sorted(TRIAL_FILES)
    for name in ("user.wav", "product.wav", "mixed.wav"):
        with wave.open(str(folder / name)) as handle:
            assert (handle.getframerate(), handle.getnchannels(), handle.getsampwidth()) == \
                (24000, 1, 2)
            assert handle.getnframes() > 24000
    for line in (folder / "voice-events.jsonl").read_text().splitlines():
        assert VoiceEvent.model_validate_json(line).contract_version == SCHEMA_VERSION
    metrics = VoiceMetrics.model_validate_json((folder / "voice-metrics.json").read_text())
    assert [t.turn_id for t in metrics.turns] == ["turn-000", "turn-001"]
    assert all(t.first_audio_latency_ms is not None and t.first_audio_latency_ms >= 0
               for t in metrics.turns)
    Transcript.model_validate_json((folder / "transcript.json").read_text())
    tools = ToolCalls.model_validate_json((folder / "tool-calls.json").read_text())
    assert [c.name for c in tools.tool_calls] == ["save_reminder"]
    assert tools.tool_calls[0].has_result
    interop = Interoperability.model_validate_json((folder / "interoperability.json").read_text())
    assert interop.schema_version == SCHEMA_VERSION and interop.imported_scores == {}
    for kind in ("scenario", "persona", "data", "environment", "script", "settings"):
        doc = ResolvedDocument.model_validate_json((folder / f"resolved-{kind}.json").read_text())
        assert doc.kind == kind
    assert (bundle / "evaluator.log").read_text().count("passed") >= 2


def test_trials_use_derived_seeds(contract_run):
    _, bundle = contract_run
    seeds = [TrialReport.model_validate_json((bundle / t / "trial-report.json").read_text()).seed
             for t in ("trial-001", "trial-002")]
    assert seeds == [42, 43]
