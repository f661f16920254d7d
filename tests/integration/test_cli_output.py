"""What `voice-evaluator run` and `sweep` print where a user reads it: a pipe closed early, a CI
log (no terminal), --only, --fail-fast and --json. Unpaced runs of the starter suite against
the embedded fake product, in a subprocess (the CLI as a user runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from voicelab.cli._init import init_suite

ROOT = Path(__file__).resolve().parents[2]
#: the latency verdict is left out: on a busy machine it may be undecided (tested elsewhere)
NO_TIMING = "scenario.eval_spec.max_first_audio_latency_ms=null"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    init_suite(tmp_path / "suite")
    return tmp_path / "suite"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


def test_a_reader_that_leaves_early_ends_the_run_quietly_with_its_own_code(suite):
    # `voice-evaluator run ... | head -1`: here the reader leaves before the first line
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab", "run", "run.yaml", "--trials", "2", "--workers", "1",
         "--set", NO_TIMING, "--artifacts-dir", "runs"],
        cwd=suite, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    process.stdout.close()
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "error" not in stderr
    report = json.loads((suite / "runs" / "latest" / "run-report.json").read_text())
    assert report["status"] == "complete" and report["passed_trials"] == 2


def test_a_ci_log_says_what_starts_at_once_then_each_trial_once_as_it_finishes(suite):
    # a CI log: stdout and stderr into one pipe, no terminal
    log = subprocess.run(
        [sys.executable, "-m", "voicelab", "run", "run.yaml", "--trials", "4", "--concurrency",
         "2", "--workers", "1", "--set", NO_TIMING, "--artifacts-dir", "runs"],
        cwd=suite, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=300)
    assert log.returncode == 0, log.stdout
    lines = log.stdout.splitlines()
    assert lines[0].startswith("starting 4 trial(s) of daily-plan-reminder / Jordan / office "
                               "against fake: bundle "), lines[:3]
    for trial in ("trial-001", "trial-002", "trial-003", "trial-004"):
        assert sum(line.count(f"{trial} seed") for line in lines) == 1, log.stdout
    counts = [line.split("]")[0] for line in lines if line.startswith("[")]
    assert counts == ["[1/4", "[2/4", "[3/4", "[4/4"], log.stdout
    finished = lines.index(next(line for line in lines if line.startswith("progress: 4/4")))
    assert finished > max(i for i, line in enumerate(lines) if line.startswith("[")), log.stdout
    assert "4/4 trial(s) passed" in log.stdout
