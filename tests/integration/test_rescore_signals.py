"""``rescore`` stopped by a signal: the trial in progress is finished, the folders not reached stay
as they were, the run report still lists every trial (each as its folder says), the run's
``evaluator.log`` says how far it got, and a second ``rescore`` finishes the job.

The bundle is the seed suite's (``seed_run``: one real run per test process, conftest.py);
each test re-scores a copy (``seed_bundle``).
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

import voicelab
from voicelab.cli._main import main
from voicelab.runner import _rescore

ROOT = Path(__file__).resolve().parents[2]
TRIALS = ("trial-001", "trial-002")


def after_the_first_trial(monkeypatch: pytest.MonkeyPatch, then) -> list[str]:
    """``rescore_trial`` as it is, calling ``then()`` once, when the first trial is re-scored."""
    done: list[str] = []
    called: list[bool] = []
    real = _rescore.rescore_trial

    def rescore_trial(trial_dir: Path, **options):
        trial = real(trial_dir, **options)
        done.append(trial_dir.name)
        if not called:
            called.append(True)
            then()
        return trial

    monkeypatch.setattr(_rescore, "rescore_trial", rescore_trial)
    return done


def stamps(bundle: Path, trial: str) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (bundle / trial).iterdir()}


def test_a_stopped_rescore_keeps_the_other_trials_and_a_whole_run_report(seed_bundle, monkeypatch):
    report_before = (seed_bundle / "run-report.json").read_bytes()
    untouched = {trial: stamps(seed_bundle, trial) for trial in TRIALS[1:]}
    stop = threading.Event()
    done = after_the_first_trial(monkeypatch, stop.set)
    result = voicelab.rescore(seed_bundle, stop=stop)
    assert done == ["trial-001"]
    assert [t.trial_dir.name for t in result.trials] == ["trial-001"]
    assert [t.trial_dir.name for t in result.kept] == ["trial-002"]
    assert result.interrupted and "after 1 of 2 trial folder(s)" in result.notes[-1]
    # the kept trials were not written to; the report counts all three, each as it is (an
    # unchanged voicelab re-scores byte for byte, so the report is the same bytes)
    assert {trial: stamps(seed_bundle, trial) for trial in TRIALS[1:]} == untouched
    assert (seed_bundle / "run-report.json").read_bytes() == report_before
    log = (seed_bundle / "evaluator.log").read_text()
    assert "rescore: 2 trial folder(s)" in log
    assert "trial-001: re-scored, passed" in log
    assert "stopped by a signal after 1 of 2" in log


def test_sigterm_stops_the_command_after_the_trial_in_progress_and_rescore_finishes_it(
        seed_bundle, monkeypatch, capsys):
    done = after_the_first_trial(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGTERM))
    previous = signal.getsignal(signal.SIGTERM)
    assert main(["rescore", str(seed_bundle)]) == 143
    out, err = capsys.readouterr()
    assert done == ["trial-001"]
    assert "SIGTERM received: stopping after the trial in progress" in err
    assert "stopped by a signal after 1 of 2" in out
    assert signal.getsignal(signal.SIGTERM) is previous  # the command's handler is gone
    done.clear()
    assert main(["rescore", str(seed_bundle)]) == 0
    assert done == list(TRIALS)
    assert "2/2 trial(s) passed after re-scoring" in capsys.readouterr().out
