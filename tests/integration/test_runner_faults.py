"""A faulted fake product produces the matching metrics, verdicts and exit codes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.runner import RunOutcome

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


#: these tests judge the product's timings, not the test machine's load: a busy machine must not
#: make their timing verdicts inconclusive (docs/artifacts.md, measurement_quality)
TRUSTED_TIMINGS = ("measurement={max_loop_lag_p99_ms: 1000, max_loop_lag_max_ms: 1000,"
                   " max_first_audio_error_ms: 1000}")


def run_example(tmp_path: Path, *overrides: str, trials: int = 1) -> RunOutcome:
    loaded = voicelab.load_run(EXAMPLE, overrides=[TRUSTED_TIMINGS, *overrides])
    return asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=trials,
        artifacts_dir=tmp_path)))


def turn_metrics(outcome: RunOutcome, trial: str = "trial-001") -> list[dict]:
    path = outcome.bundle_path / trial / "voice-metrics.json"
    return json.loads(path.read_text())["turns"]


def verdicts(outcome: RunOutcome) -> dict[str, bool]:
    return {v.name: v.passed for v in outcome.trials[0].report.verdicts}


def test_late_audio_is_measured_and_gated(tmp_path):
    outcome = run_example(tmp_path, "endpoint.settings.reply_latency_ms=[0, 450]",
                          "scenario.eval_spec.max_first_audio_latency_ms=300")
    opening, reply = turn_metrics(outcome)
    assert opening["first_audio_latency_ms"] < 200
    # the fake waits 450 ms after response.create; loopback and scheduling add a little
    assert 450 <= reply["first_audio_latency_ms"] < 650
    assert verdicts(outcome)["first_audio_latency"] is False
    assert outcome.exit_code == 3


def test_stall_becomes_playback_stall_and_dead_air(tmp_path):
    outcome = run_example(tmp_path, "endpoint.settings.stall_ms=1500",
                          "endpoint.settings.stall_after_seconds=0.5",
                          "endpoint.settings.stall_on_response=2")
    opening, reply = turn_metrics(outcome)
    assert opening["playback_stall_ms"] == 0
    # 0.5 s of audio arrives at once, then nothing for 1.5 s: the listener waits ~1.0 s
    assert reply["playback_stall_ms"] == pytest.approx(1000, abs=80)
    assert reply["dead_air_ms"] >= 950
    assert outcome.exit_code == 0  # no bound set: measured, not gated


def test_clipping_and_truncation_show_in_output_signal(tmp_path):
    clipped = run_example(tmp_path / "clip", "endpoint.settings.clip=true")
    reply = turn_metrics(clipped)[1]
    assert reply["output"]["clipped_sample_ratio"] > 0.01
    assert turn_metrics(clipped)[0]["output"]["clipped_sample_ratio"] > 0.01

    truncated = run_example(tmp_path / "cut", "endpoint.settings.truncate=true")
    assert turn_metrics(truncated)[1]["output"]["possible_truncation"] is True
    clean = run_example(tmp_path / "clean")
    assert turn_metrics(clean)[1]["output"]["possible_truncation"] is False
    assert turn_metrics(clean)[1]["output"]["clipped_sample_ratio"] == 0


BARGE_IN = ['script.turns=[{"response": "Wait, one thing first.", "keywords": ["daily plan"], '
            '"interrupt_after_seconds": 1.0}]',
            "endpoint.settings.audio_pacing=realtime", "endpoint.settings.pacing_speed=4",
            "scenario.eval_spec.max_interruption_stop_ms=300"]


def test_barge_in_is_honoured(tmp_path):
    outcome = run_example(tmp_path, *BARGE_IN)
    opening = turn_metrics(outcome)[0]
    assert opening["interrupted"] is True
    assert opening["status"] == "cancelled"
    assert opening["interruption_stop_latency_ms"] < 300
    assert verdicts(outcome)["interruption_honoured"] is True
    raw = json.loads((outcome.bundle_path / "trial-001" / "raw-endpoint-events.json").read_text())
    completed = [e["raw"] for e in raw["events"] if e["type"] == "conversation_complete"][0]
    assert "response.cancel" in completed["client_messages"]
    assert outcome.exit_code == 0


def test_ignored_cancel_keeps_talking_and_fails_the_bound(tmp_path):
    outcome = run_example(tmp_path, *BARGE_IN, "endpoint.settings.ignore_cancel=true")
    opening = turn_metrics(outcome)[0]
    assert opening["interrupted"] is True
    # ~4 s of audio left at 4x real time: it keeps arriving for about a second
    assert opening["interruption_stop_latency_ms"] > 600
    assert opening["audio_after_interrupt_ms"] > 2000
    assert verdicts(outcome)["interruption_honoured"] is False
    assert outcome.exit_code == 3


def test_mid_turn_close_is_an_execution_failure_with_artifacts(tmp_path):
    outcome = run_example(tmp_path, "endpoint.settings.close_mid_response=2")
    report = outcome.trials[0].report
    assert report.exit_reason == "connection_closed"
    assert report.execution_status == "failed"
    assert report.failures and report.failures[0].kind == "endpoint"
    assert (outcome.bundle_path / "trial-001" / "product.wav").is_file()
    assert outcome.exit_code == 4


def test_product_error_event(tmp_path):
    outcome = run_example(tmp_path, "endpoint.settings.error_on_response=2")
    report = outcome.trials[0].report
    assert report.exit_reason == "error"
    assert "product error" in report.failures[0].message
    assert outcome.exit_code == 4


def test_never_answering_is_no_response(tmp_path):
    outcome = run_example(tmp_path, "endpoint.settings.never_answer=true",
                          "scenario.eval_spec.response_timeout_seconds=0.5",
                          "endpoint.settings.receive_timeout_seconds=5")
    report = outcome.trials[0].report
    assert report.exit_reason == "no_response"
    assert report.failures[0].kind == "timeout"
    assert outcome.exit_code == 4


def test_cli_exit_codes_for_quality_and_execution_failures(tmp_path):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "voicelab", "run", str(EXAMPLE),
                               "--artifacts-dir", str(tmp_path), *args],
                              capture_output=True, text=True, timeout=120)

    quality = cli("--set", "scenario.expected_topics=[plan recorded, invoice sent]")
    assert quality.returncode == 3, quality.stderr
    assert "FAIL" in quality.stdout and "expected_topics" in quality.stdout
    execution = cli("--set", "endpoint.settings.close_mid_response=1")
    assert execution.returncode == 4, execution.stderr
    assert "Traceback" not in execution.stderr
