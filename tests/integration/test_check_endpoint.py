"""`voice-evaluator check` / `voicelab.check_endpoint`: one short call to an endpoint, judged
point by point against what its adapter expects, on the fake product (healthy and broken in one
way each) and the Twilio media-stream double."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab

ROOT = Path(__file__).resolve().parents[2]
#: a product that completes after three turns and speaks in real time (so a barge-in lands
#: while it is still sending)
HEALTHY = {"audio_pacing": "realtime", "complete_after_turns": 3}


def _block(tmp_path: Path, settings: dict[str, object]) -> Path:
    path = tmp_path / "endpoint.yaml"
    path.write_text(json.dumps({"adapter": "fake", "settings": {**HEALTHY, **settings}}))
    return path


def _points(found: voicelab.execution.EndpointCheck) -> dict[str, str]:
    return {point.name: point.status for point in found.points}


def test_a_healthy_product_passes_every_point(tmp_path):
    found = voicelab.check_endpoint(_block(tmp_path, {}))
    assert _points(found) == {"connects": "passed", "answers": "passed",
                              "ends_turn": "passed", "transcripts": "passed",
                              "barge_in": "passed", "closes_cleanly": "passed"}
    assert found.exit_code == 0 and found.turn_taking == "client"


@pytest.mark.parametrize(("fault", "failed", "fix"), [
    ({"never_answer": True}, "answers", "reply to input_audio_buffer.commit"),
    ({"transcripts": False}, "transcripts", "response.output_audio_transcript.done"),
    ({"ignore_cancel": True}, "barge_in", "response.cancel"),
    ({"close_mid_response": 2}, "closes_cleanly", "never close or error mid-reply"),
])
def test_a_broken_product_fails_its_point_with_the_fix(tmp_path, fault, failed, fix):
    found = voicelab.check_endpoint(_block(tmp_path, fault))
    point = next(p for p in found.points if p.name == failed)
    assert point.status == "failed" and fix in point.fix, found.points
    assert found.exit_code == 3 and _points(found)["connects"] == "passed"


def test_the_command_checks_a_run_file_of_a_twilio_bot_and_says_what_does_not_apply(tmp_path):
    run = tmp_path / "run.yaml"
    (tmp_path / "scenario.yaml").write_text('{"id": "never-used"}')
    (tmp_path / "persona.yaml").write_text('{"name": "never-used"}')
    run.write_text(json.dumps({
        "scenario_path": "scenario.yaml", "persona_path": "persona.yaml",
        "pace_audio": True, "endpoint": {
            "adapter": "twilio", "settings": {"uri": "ws://127.0.0.1:{port}/"},
            "launch": {"command": [sys.executable, "-m", "voicelab.doubles.twilio", "--port",
                                   "{port}"], "ready_pattern": '"uri"'}}}))
    done = subprocess.run([sys.executable, "-m", "voicelab", "check", str(run), "--json"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)
    assert found["adapter"] == "twilio" and found["turn_taking"] == "server_vad"
    statuses = {p["name"]: p["status"] for p in found["points"]}
    assert statuses["transcripts"] == "not_applicable"  # the wire carries none
    assert statuses["barge_in"] == statuses["ends_turn"] == statuses["answers"] == "passed"


def test_a_product_that_cannot_be_reached_exits_4_with_the_fix(tmp_path):
    block = tmp_path / "endpoint.yaml"
    block.write_text('endpoint: {adapter: websocket, settings: {uri: "ws://127.0.0.1:9"}}\n')
    done = subprocess.run([sys.executable, "-m", "voicelab", "check", str(block)],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "FAIL connects: no connection" in done.stdout and "fix: check endpoint" in done.stdout


def test_a_file_that_is_neither_is_one_line_and_exit_2(tmp_path):
    other = tmp_path / "persona.yaml"
    other.write_text("name: Jordan\n")
    done = subprocess.run([sys.executable, "-m", "voicelab", "check", str(other)],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "persona.yaml" in done.stderr
