"""Ctrl-C during a run: exit 130, the in-flight trial's evidence kept, a run report saying what
happened and which planned trials did not run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def test_sigint_writes_the_interrupted_trial_and_reports_it(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--trials", "4",
         "--artifacts-dir", str(tmp_path),
         # the product opens at once, then takes 30 s to answer the user: a trial in flight
         "--set", "endpoint.settings.reply_latency_ms=[0, 30000]",
         "--set", "endpoint.settings.receive_timeout_seconds=60",
         "--set", "scenario.eval_spec.response_timeout_seconds=60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(tmp_path.glob("*/run-report.json")):
            time.sleep(0.05)
        time.sleep(1.5)  # the opening has played and the user has spoken
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr
    bundle = next(p.parent for p in tmp_path.glob("*/run-report.json"))
    report = json.loads((bundle / "run-report.json").read_text())
    assert report["status"] == "interrupted" and report["exit_code"] == 130
    assert report["planned_trials"] == 4 and report["executed_trials"] == 1
    assert "3 planned trial(s) did not run" in report["message"]
    trial = json.loads((bundle / "trial-001" / "trial-report.json").read_text())
    assert trial["exit_reason"] == "cancelled"
    assert trial["failures"][0]["kind"] == "cancelled"
    assert trial["user_turns"] == 1 and trial["product_responses"] >= 1
    assert (bundle / "trial-001" / "mixed.wav").stat().st_size > 44
    assert "interrupted" in (bundle / "evaluator.log").read_text()
