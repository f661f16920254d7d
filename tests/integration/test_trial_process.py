"""A Dask worker's trial process (voicelab.execution._trial_process), driven from this process as
its worker: a real subprocess on a socket pair running the local workers' trial loop."""

from __future__ import annotations

import os
import pickle
import signal
import time
from pathlib import Path

import psutil
import pytest

import voicelab
from voicelab.execution import RunContext, TrialJob, WorkerLost
from voicelab.execution._trial_process import start_trial_process

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


#: the product opens at once, then takes 6 s to answer the user: a trial long in flight
STALLING = ["endpoint.settings.reply_latency_ms=[0, 6000]",
            "endpoint.settings.receive_timeout_seconds=60",
            "scenario.eval_spec.response_timeout_seconds=60"]


def _context(tmp_path: Path, key: str, overrides: list[str] | None = None) -> RunContext:
    return RunContext(key=key, loaded=voicelab.load_run(EXAMPLE, overrides=overrides or []),
                      run_id=key, bundle=tmp_path, speech_cache_dir=tmp_path / ".speech-cache")


def _talking(process: psutil.Process) -> int:
    return sum(c.status == psutil.CONN_ESTABLISHED for c in process.net_connections("tcp"))


def test_a_trial_runs_in_the_trial_process_without_the_nannys_malloc_setting(tmp_path,
                                                                          monkeypatch):
    # what a nanny gives its worker (distributed.nanny.pre-spawn-environ): the trial process
    # must not inherit it (every audio buffer would be a fresh mmap: measured loop stalls)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.setenv("VOICELAB_TEST_INHERITED", "yes")
    process = start_trial_process()
    try:
        environment = psutil.Process(process.pid).environ()
        assert "MALLOC_TRIM_THRESHOLD_" not in environment
        assert environment["VOICELAB_TEST_INHERITED"] == "yes"  # the rest of the worker's
        assert str(ROOT) in environment["PYTHONPATH"].split(os.pathsep)  # its import path
        blob = pickle.dumps(_context(tmp_path, "first"))
        outcome = process.submit("first", blob, TrialJob(1, 42)).result(timeout=120)
        assert outcome.report is not None and outcome.report.passed, outcome.lost
        assert outcome.worker == process.name == f"{os.uname().nodename}:{process.pid}"
        assert (tmp_path / "trial-001" / "trial-report.json").is_file()
        assert outcome.worker_peak_rss_kib > 0 and outcome.turn_metrics
        # the next trial of the run reuses the context it was sent (and the prepared run)
        again = process.submit("first", blob, TrialJob(2, 43)).result(timeout=120)
        assert again.report is not None and again.report.trial_id == "trial-002"
        process.release_run("first")
    finally:
        process.child.process.kill()
        process.child.process.wait(30)


def test_a_trial_process_that_dies_fails_its_trials_in_flight(tmp_path):
    process = start_trial_process()
    try:
        in_flight = process.submit("run", pickle.dumps(_context(tmp_path, "run")),
                                   TrialJob(1, 42))
        os.kill(process.pid, signal.SIGKILL)
        with pytest.raises(WorkerLost) as lost:
            in_flight.result(timeout=60)
        assert str(lost.value) == (f"the trial process {process.name} of the Dask worker "
                                   "ended while it ran (killed by SIGKILL)")
        assert not process.alive
        # a trial given to it afterwards fails at once; the worker starts a new one for it
        with pytest.raises(WorkerLost):
            process.submit("run", b"", TrialJob(2, 43)).result(timeout=5)
    finally:
        if process.child.process.poll() is None:
            process.child.process.kill()
        process.child.process.wait(30)


def test_a_cancelled_run_writes_the_evidence_of_its_trials_in_the_trial_process(tmp_path):
    """What Ctrl-C does to a Dask run: the caller asks every worker to cancel the run, and the
    trial in flight in the trial process writes its evidence and comes back cancelled."""
    process = start_trial_process()
    try:
        blob = pickle.dumps(_context(tmp_path, "stalling", STALLING))
        in_flight = process.submit("stalling", blob, TrialJob(1, 42))
        trial_process = psutil.Process(process.pid)
        deadline = time.monotonic() + 90  # until the call is under way (the product stalls)
        while time.monotonic() < deadline and not in_flight.done() and \
                _talking(trial_process) < 2:  # its client and the fake product it runs
            time.sleep(0.05)
        assert _talking(trial_process) >= 2, "the trial never started"
        process.cancel_run("stalling")
        outcome = in_flight.result(timeout=120)
        assert outcome.cancelled and outcome.report is not None
        assert outcome.report.exit_reason == "cancelled"
        assert (tmp_path / "trial-001" / "trial-report.json").is_file()
        # a trial of the cancelled run given afterwards does not start
        late = process.submit("stalling", blob, TrialJob(2, 43)).result(timeout=60)
        assert late.not_started and late.report is None
        assert not (tmp_path / "trial-002").exists()
    finally:
        process.child.process.kill()
        process.child.process.wait(30)
