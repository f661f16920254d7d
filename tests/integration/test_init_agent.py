"""`voice-evaluator init DIR --agent WIRE`: the skeleton agent runs as written, and the starter
run file launches it; one paced trial per wire (its wire's turn taking, as a user runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # `python` in the launch command is the one voice-evaluator runs with, as in a venv
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", "voicelab", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=400)


@pytest.mark.parametrize("wire", ["websocket", "twilio", "pipecat"])
def test_the_skeleton_of_each_wire_runs_the_starter_suite(tmp_path, wire):
    made = _cli("init", "suite", "--agent", wire, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    suite = tmp_path / "suite"
    assert (suite / "agent.py").is_file() and "agent.py" in made.stdout
    done = _cli("run", "run.yaml", "--trials", "1", "--workers", "1", "--artifacts-dir", "runs",
                cwd=suite)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((suite / "runs" / "latest" / "run-report.json").read_text())
    assert report["adapter"] == wire and report["passed_trials"] == 1
    trial = suite / "runs" / "latest" / "trial-001"
    assert "agent listening on" in (trial / "product.log").read_text()  # launched per trial
    turns = json.loads((trial / "voice-metrics.json").read_text())["turns"]
    answered = [t for t in turns if t.get("first_audio_latency_ms") is not None]
    assert len(answered) >= 2, turns  # the greeting and the answer to the caller


def test_an_unknown_wire_is_a_usage_error(tmp_path):
    done = _cli("init", "suite", "--agent", "carrier-pigeon", cwd=tmp_path)
    assert done.returncode == 2 and "--agent" in done.stderr
    assert not (tmp_path / "suite").exists()
