"""voicelab against a real pipecat bot over SmallWebRTC (examples/pipecat-smallwebrtc/bot.py),
out of CI's default path: pipecat lives in its own environment, named by ``PIPECAT_PYTHON``
(``python3 -m venv V && V/bin/pip install "pipecat-ai[webrtc]" fastapi``); without it the test
is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from voicelab.artifacts import read_json

pytest.importorskip("aiortc")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PIPECAT_PYTHON = os.environ.get("PIPECAT_PYTHON", "")


def pipecat_available() -> bool:
    if not PIPECAT_PYTHON:
        return False
    probe = subprocess.run([PIPECAT_PYTHON, "-c", "import pipecat.transports.smallwebrtc."
                            "request_handler"], capture_output=True, timeout=60)
    return probe.returncode == 0


@pytest.mark.skipif(not pipecat_available(), reason="PIPECAT_PYTHON names no pipecat install")
def test_a_real_pipecat_bot_is_called_and_measured(tmp_path):
    run = subprocess.run([sys.executable, "-m", "voicelab", "run",
                          str(EXAMPLES / "run-webrtc-pipecat.yaml"), "--quiet",
                          "--artifacts-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    [trial] = [path for path in tmp_path.glob("*/trial-001") if path.parent.name != "latest"]
    metrics = read_json(trial / "voice-metrics.json")
    answered = [t for t in metrics["turns"] if t["response_latency_ms"] is not None]
    assert answered and not any(t["timing_degraded"] for t in answered)
    raw = read_json(trial / "raw-endpoint-events.json")["events"]
    kinds = {e["raw"].get("type") for e in raw if isinstance(e.get("raw"), dict)}
    assert {"bot-ready", "bot-started-speaking", "bot-stopped-speaking"} <= kinds
    [facts] = [e["raw"]["webrtc"] for e in raw
               if isinstance(e.get("raw"), dict) and "webrtc" in e["raw"]]
    assert facts["connection"]["arrival_stamps"] == "kernel", json.dumps(facts)
