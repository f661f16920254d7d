"""An ingest stopped by SIGTERM (or Ctrl-C) ends as a run does: exit 143 (130), the calls
ingested so far kept with a run report saying ``interrupted``, the bundle's lock released, and
``latest`` moved only once that report is written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CALLS = sorted((ROOT / "datasets" / "production-calls").glob("call-*.flac"))


@pytest.mark.parametrize(("number", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_ingest_keeps_what_was_ingested_and_releases_the_bundle(
        tmp_path: Path, number: int, code: int):
    out = tmp_path / "production"
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab", "ingest", *map(str, CALLS), "--artifacts-dir",
         str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("*/trial-001/trial-report.json")):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the first call was never ingested"
        time.sleep(0.02)
    process.send_signal(number)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stdout + stderr
    assert "Traceback" not in stderr
    [bundle] = [p for p in out.iterdir() if p.is_dir() and not p.is_symlink()]
    report = json.loads((bundle / "run-report.json").read_text())
    assert report["status"] == "interrupted"
    assert 1 <= report["executed_trials"] < len(CALLS)
    assert report["planned_trials"] == len(CALLS)
    assert not (bundle / ".voicelab.lock").exists()
    assert (out / "latest").resolve() == bundle.resolve()
    log = (bundle / "evaluator.log").read_text()
    assert "trial-001: call-01 ingested" in log
    assert f"bundle: {bundle.name}" in stdout.replace(str(out) + "/", "") or \
        str(bundle.name) in stdout
