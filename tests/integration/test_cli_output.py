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


BROKEN = "endpoint.settings.claim_without_tool=true"  # says "saved", saves nothing: fails


def test_only_chooses_trials_like_k_and_json_is_all_that_stdout_holds(suite):
    done = _cli("run", "run.yaml", "--trials", "4", "--workers", "1", "--set", NO_TIMING,
                "--artifacts-dir", "runs", "--only", "trial-002 or trial-004", "--json",
                cwd=suite)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)  # nothing but the document
    assert summary["summary_version"] == "1.0" and summary["kind"] == "run"
    assert summary["exit_code"] == 0 and summary["only"] == ["trial-002 or trial-004"]
    assert summary["planned_trials"] == summary["executed_trials"] == 2
    assert [(t["trial_id"], t["seed"], t["status"]) for t in summary["trials"]] == [
        ("trial-002", 2, "passed"), ("trial-004", 4, "passed")]  # their numbers and seeds
    assert Path(summary["location"], "trial-002", "trial-report.json").is_file()
    assert not Path(summary["location"], "trial-001").exists()
    assert "2/2 trial(s) passed" in done.stderr  # the human summary, on stderr


def test_fail_fast_starts_no_trial_once_enough_did_not_pass(suite):
    done = _cli("run", "run.yaml", "--trials", "8", "--concurrency", "1", "--workers", "1",
                "--set", BROKEN, "--artifacts-dir", "runs", "--fail-fast", "1", "--json",
                cwd=suite)
    assert done.returncode == 3, done.stderr  # what the trials decide, not 4 for those not run
    summary = json.loads(done.stdout)
    assert summary["stopped_after_failures"] == 1 and summary["planned_trials"] == 8
    assert 1 <= summary["executed_trials"] < 8
    assert summary["message"].startswith("stopped after ")
    report = json.loads((suite / "runs" / "latest" / "run-report.json").read_text())
    assert report["exit_code"] == 3 and report["stopped_after_failures"] == 1


def test_a_sweep_takes_only_and_json_per_cell(suite):
    done = _cli("sweep", "suite.yaml", "--workers", "1", "--set", NO_TIMING, "--artifacts-dir",
                "runs", "--only", "quiet and trial-001", "--json", cwd=suite)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["kind"] == "sweep" and summary["conversations"] == 2
    assert sorted(cell["cell_id"] for cell in summary["cells"]) == [
        "daily-plan-reminder__Jordan__quiet", "daily-plan-reminder__Sam__quiet"]
    assert all([t["trial_id"] for t in cell["trials"]] == ["trial-001"]
               for cell in summary["cells"])
    assert "conversations 2 (--only quiet and trial-001)" in done.stderr


@pytest.mark.parametrize(("only", "says"), [("nobody", "selects no trial"),
                                            ("quiet and (", "ends too early")])
def test_an_only_that_selects_nothing_or_does_not_parse_is_one_line_and_exit_2(suite, only,
                                                                               says):
    done = _cli("run", "run.yaml", "--only", only, cwd=suite)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--only" in done.stderr and says in done.stderr
