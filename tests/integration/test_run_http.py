"""The runner through the built-in HTTP adapter (non-streaming), and the capability gate that
keeps a streaming scenario from running against it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import voicelab
from voicelab.doubles.product import FakeHttpProduct

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def test_a_full_run_over_http(tmp_path):
    async def scenario():
        async with FakeHttpProduct({"input_transcript": "record the plan and save the reminder"}
                                   ) as product:
            loaded = voicelab.load_run(EXAMPLE, overrides=[
                "endpoint.adapter=http",
                f"endpoint.settings={{url: '{product.url}', opening_request: true}}",
                # the seed scenario asks for streaming, which HTTP cannot give
                "scenario.conversation.required_capabilities=[]",
                "scenario.eval_spec.outcome_spec={}"])
            return await voicelab.arun(loaded, voicelab.RunOptions(
                trials=2,
                artifacts_dir=tmp_path))

    outcome = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert outcome.exit_code == 0, [t.report.failures for t in outcome.trials]
    report = outcome.trials[0].report
    assert report.exit_reason == "endpoint_completion" and report.product_responses == 2
    metrics = json.loads((outcome.bundle_path / "trial-001" / "voice-metrics.json").read_text())
    reply = metrics["turns"][1]
    # one POST per user turn: the whole reply arrives at once, stamped on arrival
    assert reply["first_audio_latency_ms"] is not None and reply["output_audio_seconds"] > 1
    transcript = json.loads((outcome.bundle_path / "trial-001" / "transcript.json").read_text())
    user = next(t for t in transcript["turns"] if t["role"] == "user")
    assert user["heard_as"] == "record the plan and save the reminder"


def test_a_streaming_scenario_is_refused_before_any_connection(tmp_path):
    for command in ("validate", "run"):
        result = subprocess.run(
            [sys.executable, "-m", "voicelab", command, str(EXAMPLE), "--set",
             "endpoint.adapter=http", "--set", "endpoint.settings={url: 'http://127.0.0.1:9/x'}",
             *(["--artifacts-dir", str(tmp_path)] if command == "run" else [])],
            capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert "conversation.required_capabilities" in result.stderr
        assert "streaming_input" in result.stderr and "scenario-workload-neutral" in result.stderr
    assert not any(tmp_path.iterdir()), "nothing ran, nothing was written"


def test_a_product_that_cannot_open_is_refused_when_it_should_speak_first(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "voicelab", "validate", str(EXAMPLE), "--set",
         "endpoint.adapter=http", "--set", "endpoint.settings={url: 'http://127.0.0.1:9/x'}",
         "--set", "scenario.conversation.required_capabilities=[]"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "conversation.first_speaker" in result.stderr and "opening_request" in result.stderr
