"""`voice-evaluator report` says only what its reader can act on: not the notebook kernel's
start-up warning (IPKernelApp, "running over TCP without encryption")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.cli._init import init_suite

ROOT = Path(__file__).resolve().parents[2]


def test_the_report_command_prints_no_kernel_warning(tmp_path):
    pytest.importorskip("papermill", reason="the report needs the notebooks extra")
    init_suite(tmp_path / "suite")
    outcome = voicelab.run(tmp_path / "suite" / "run.yaml", voicelab.RunOptions(
        trials=1,
        workers=1,
        artifacts_dir=tmp_path / "runs"))
    done = subprocess.run([sys.executable, "-m", "voicelab", "report", str(outcome.bundle_path),
                           "--output", str(tmp_path / "r.html")], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "IPKernelApp" not in done.stderr and "encryption" not in done.stderr, done.stderr
    assert done.stderr == ""
    assert "_<wbr/>" in (tmp_path / "r.html").read_text()  # headers that may break
