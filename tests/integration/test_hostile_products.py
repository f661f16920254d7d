"""Products are hostile input: a storm of marks (Twilio), of unknown events (protocol v1) or
audio labelled 1 Hz (pipecat) ends the trial with exit 4 and ``resource_limit``, keeps the
evidence recorded until then, and never takes the evaluator's memory.

Each run is ``voice-evaluator run`` in a subprocess whose address space is capped
(``RLIMIT_AS``): before the limits, these products took it to 4.5-5.5 GB; a regression now
fails with a MemoryError instead of swapping. The hostile doubles are launched by the run
(``endpoint.launch``), in their own processes.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from voicelab.artifacts import read_json, read_voice_events

#: What a short call needs (about 0.7 GB of address space), far below what the storms took.
ADDRESS_SPACE_BYTES = 2 * 1024 ** 3
CAPABILITIES = {"twilio": ["streaming_input", "streaming_output"],
                "pipecat": ["streaming_input", "streaming_output"], "websocket": []}


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def write_call(folder: Path, *, adapter: str, double: str, settings: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    endpoint_settings: dict[str, Any] = {"uri": "ws://127.0.0.1:{port}/"}
    files = {
        "scenario.yaml": {
            "id": "hostile", "description": "a product that floods the evaluator",
            "conversation": {"first_speaker": "product",
                             "required_capabilities": CAPABILITIES[adapter]},
            "eval_spec": {"limits": {"max_turns": 2, "max_time_seconds": 60}}},
        "persona.yaml": {"name": "Jordan", "communication_style": "friendly"},
        "script.yaml": {"turns": [{"response": "Hello there."}]},
        "run.yaml": {
            "scenario_path": "scenario.yaml", "persona_path": "persona.yaml",
            "script_path": "script.yaml", "persona_mode": "scripted", "speech_provider": "tone",
            "pace_audio": True, "trial_seed": 7,
            "endpoint": {
                "adapter": adapter, "settings": endpoint_settings,
                "launch": {"command": [sys.executable, "-m", double, "--port", "{port}",
                                       "--settings", json.dumps(settings)],
                           "ready_pattern": '"uri"', "ready_timeout_seconds": 30}}},
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    return folder / "run.yaml"


def run_capped(run_file: Path, artifacts: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    completed = subprocess.run(
        [sys.executable, "-m", "voicelab", "run", str(run_file), "--artifacts-dir",
         str(artifacts), "--quiet"], capture_output=True, text=True, timeout=300,
        preexec_fn=_cap_memory)
    bundles = [p.parent for p in artifacts.glob("*/run-report.json") if p.parent.name != "latest"]
    assert len(bundles) == 1, completed.stderr[-3000:]
    return completed, bundles[0]


@pytest.mark.parametrize(("adapter", "double", "settings", "code", "words"), [
    ("twilio", "voicelab.doubles.twilio", {"hostile": "mark_storm"}, "resource_limit",
     "of them mark"),
    ("websocket", "voicelab.doubles.product", {"hostile": "event_storm"}, "resource_limit",
     "of them telemetry.unknown"),
    ("pipecat", "voicelab.doubles.pipecat", {"hostile": "low_rate_audio"}, "resource_limit",
     "declared sample rate of 1 Hz"),
], ids=["twilio-mark-storm", "v1-unknown-event-storm", "pipecat-1-hz-audio"])
def test_a_flooding_product_ends_the_trial_with_exit_4_and_its_evidence_kept(
        tmp_path: Path, adapter: str, double: str, settings: dict[str, Any], code: str,
        words: str) -> None:
    run_file = write_call(tmp_path / "suite", adapter=adapter, double=double, settings=settings)
    completed, bundle = run_capped(run_file, tmp_path / "runs")
    assert completed.returncode == 4, completed.stdout[-2000:] + completed.stderr[-3000:]
    assert "MemoryError" not in completed.stderr and "Traceback" not in completed.stderr
    report = read_json(bundle / "trial-001" / "trial-report.json")
    assert report["execution_status"] != "succeeded"
    failure = report["failures"][0]
    assert failure["code"] == code, report["failures"]
    assert words in failure["message"]
    # the evidence up to the limit is kept: the events and the product's own log
    events = read_voice_events(bundle / "trial-001" / "voice-events.jsonl")
    errors = [e for e in events if e["event_type"] == "product.error"]
    assert errors and errors[0]["attributes"]["code"] == code
    assert (bundle / "trial-001" / "product.log").is_file()
    assert (bundle / "trial-001" / "raw-endpoint-events.json").is_file()
