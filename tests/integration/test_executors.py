"""Executors: local worker processes (--workers) and a real Dask cluster (the `dask scheduler`
and `dask worker` CLIs on 127.0.0.1). The bundle must not depend on what ran the trials, and a
worker killed mid-run loses only its trials in flight, reported as failed executions (exit 4)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from voicelab.cli import main
from voicelab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SUITE = ROOT / "examples" / "sweep-workload-neutral.yaml"
#: the product opens at once, then takes 6 s to answer the user: trials long in flight
STALLING = ["--set", "endpoint.settings.reply_latency_ms=[0, 6000]",
            "--set", "endpoint.settings.receive_timeout_seconds=60",
            "--set", "scenario.eval_spec.response_timeout_seconds=60"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


def trial_reports(bundle: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in bundle.glob("trial-*/trial-report.json")}


def comparable(report: dict) -> tuple:
    """What must not depend on the executor (ids and clock times do)."""
    return (report["seed"], report["passed"], report["execution_status"], report["exit_reason"],
            report["user_turns"], report["product_responses"], report["files"],
            [(v["name"], v["status"]) for v in report["verdicts"]], report["outcome_status"])


def only_bundle(folder: Path) -> Path:
    return next(p.parent for p in folder.glob("*/run-report.json") if p.parent.name != "latest")


def test_two_local_workers_write_the_bundle_one_process_writes(tmp_path):
    common = [str(EXAMPLE), "--trials", "4", "--concurrency", "4", "--quiet"]
    single = cli("run", *common, "--workers", "1", "--artifacts-dir", str(tmp_path / "one"))
    double = cli("run", *common, "--workers", "2", "--artifacts-dir", str(tmp_path / "two"))
    assert single.returncode == 0, single.stdout + single.stderr
    assert double.returncode == 0, double.stdout + double.stderr
    one, two = only_bundle(tmp_path / "one"), only_bundle(tmp_path / "two")
    log = (two / "evaluator.log").read_text()
    assert "executor: local, 2 worker process(es)" in log
    assert "executor: in-process" in (one / "evaluator.log").read_text()
    # the workers' own records reach the run's log, marked with the worker
    assert "[worker " in log and "connected to ws://" in log
    reports_one, reports_two = trial_reports(one), trial_reports(two)
    assert sorted(reports_two) == ["trial-001", "trial-002", "trial-003", "trial-004"]
    assert {k: comparable(v) for k, v in reports_two.items()} == \
        {k: comparable(v) for k, v in reports_one.items()}
    for name in reports_two:  # the same files in every trial folder
        assert sorted(p.name for p in (two / name).iterdir()) == \
            sorted(p.name for p in (one / name).iterdir())
    run_report = json.loads((two / "run-report.json").read_text())
    assert [t["trial"] for t in run_report["trials"]] == [1, 2, 3, 4]
    assert run_report["status"] == "complete" and run_report["passed_trials"] == 4


#: A script that calls voicelab.run with local workers and has no ``if __name__ == "__main__"``
#: guard: a multiprocessing child would run it again (and fail to start its own workers).
UNGUARDED_SCRIPT = """
import sys
import voicelab

print("script body ran", flush=True)
outcome = voicelab.run(sys.argv[1], voicelab.RunOptions(trials=3, concurrency=2, workers=2,
                                                        artifacts_dir=sys.argv[2]))
print("exit code", outcome.exit_code, outcome.report.passed_trials, flush=True)
"""


def test_a_script_without_a_main_guard_runs_its_trials_in_local_workers(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(EXAMPLE), str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=180, env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["script body ran", "exit code 0 3"]
    log = (only_bundle(tmp_path / "runs") / "evaluator.log").read_text()
    assert "executor: local, 2 worker process(es)" in log and "[worker " in log


def _worker_children(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if "voicelab.execution._worker" in " ".join(c.cmdline())]


def _talking(process: psutil.Process) -> int:
    """Established TCP connections of a worker and its children (a Dask worker's trial
    process): a trial in flight has its client and the fake product it runs in-process."""
    try:
        family = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    count = 0
    for member in family:
        try:
            count += sum(c.status == psutil.CONN_ESTABLISHED
                         for c in member.net_connections("tcp"))
        except psutil.NoSuchProcess:
            pass
    return count


def test_a_local_worker_killed_mid_run_loses_only_its_trials_in_flight(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--trials", "6",
         "--concurrency", "4", "--workers", "2", "--quiet", "--artifacts-dir", str(tmp_path),
         *STALLING], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.monotonic() + 90
        workers: list[psutil.Process] = []
        while time.monotonic() < deadline:  # both workers hold two conversations each
            workers = _worker_children(process.pid)
            if len(workers) == 2 and all(_talking(w) >= 4 for w in workers):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the workers never held their trials")
        victim = workers[0]
        victim.send_signal(signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 4, stdout + stderr
    assert "Traceback" not in stderr
    bundle = only_bundle(tmp_path)
    reports = trial_reports(bundle)
    assert len(reports) == 6  # every planned trial has its report: none silently dropped
    lost = {name for name, r in reports.items()
            if [f.get("code") for f in r["failures"]] == ["worker_lost"]}
    # least-loaded assignment: each worker took two of the first four trials
    assert lost in ({"trial-001", "trial-003"}, {"trial-002", "trial-004"})
    for name in lost:
        assert reports[name]["execution_status"] == "failed"
        assert f"pid {victim.pid}" in reports[name]["failures"][0]["message"]
        assert "SIGKILL" in reports[name]["failures"][0]["message"]
    # the others, including the two started after the loss (on a replacement), ran through
    assert all(reports[name]["passed"] for name in set(reports) - lost)
    run_report = json.loads((bundle / "run-report.json").read_text())
    assert run_report["exit_code"] == 4 and run_report["executed_trials"] == 6
    assert "ended while it ran" in stdout
    # resuming through the workers runs the lost trials again, into clean folders
    kept = {name: (bundle / name / "trial-report.json").read_bytes()
            for name in set(reports) - lost}
    resumed = cli("run", "--resume", str(bundle), "--rerun-failed", "--workers", "2",
                  "--quiet", *STALLING)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    reports = trial_reports(bundle)
    assert all(r["passed"] for r in reports.values()) and len(reports) == 6
    assert {name: (bundle / name / "trial-report.json").read_bytes() for name in kept} == kept


def test_sigint_with_local_workers_keeps_the_evidence_of_the_trials_in_flight(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--trials", "3",
         "--concurrency", "2", "--workers", "2", "--quiet", "--artifacts-dir", str(tmp_path),
         *STALLING], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # one conversation in flight in each worker
            workers = _worker_children(process.pid)
            if len(workers) == 2 and all(_talking(w) >= 2 for w in workers):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the workers never held their trials")
        time.sleep(0.5)  # the openings have played
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr
    bundle = only_bundle(tmp_path)
    report = json.loads((bundle / "run-report.json").read_text())
    assert report["status"] == "interrupted" and report["executed_trials"] == 2
    assert "1 planned trial(s) did not run" in report["message"]
    for name, trial in trial_reports(bundle).items():  # written by the workers, then listed
        assert trial["exit_reason"] == "cancelled" and trial["product_responses"] >= 1
        assert (bundle / name / "mixed.wav").stat().st_size > 44


# --- a real Dask cluster ------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# the dask_cluster fixture (a scheduler and two workers) is in conftest.py


def test_a_sweep_on_a_dask_cluster_equals_the_same_sweep_in_process(tmp_path, dask_cluster):
    address, pids = dask_cluster
    common = [str(SUITE), "--trials", "2", "--quiet"]
    local = cli("sweep", *common, "--workers", "1", "--artifacts-dir", str(tmp_path / "local"))
    remote = cli("sweep", *common, "--executor", "dask", "--scheduler", address,
                 "--artifacts-dir", str(tmp_path / "dask"))
    assert local.returncode == 0, local.stdout + local.stderr
    assert remote.returncode == 0, remote.stdout + remote.stderr
    local_dir = next((tmp_path / "local").glob("*/matrix-report.json")).parent
    remote_dir = next((tmp_path / "dask").glob("*/matrix-report.json")).parent
    cells = sorted(p.name for p in local_dir.iterdir() if p.is_dir())
    assert len(cells) == 4 and sorted(p.name for p in remote_dir.iterdir() if p.is_dir()) == cells
    for cell in cells:
        local_reports, remote_reports = (trial_reports(local_dir / cell),
                                         trial_reports(remote_dir / cell))
        assert sorted(remote_reports) == ["trial-001", "trial-002"]
        assert {k: comparable(v) for k, v in remote_reports.items()} == \
            {k: comparable(v) for k, v in local_reports.items()}
        assert "executor: dask, scheduler " + address in \
            (remote_dir / cell / "evaluator.log").read_text()
    # no attempt marker is left behind
    assert not list(remote_dir.glob("*/.trial-*.running"))
    # the Python API takes the user's own Client (as dask-jobqueue, Kubernetes or Coiled give)
    distributed = pytest.importorskip("distributed")
    import voicelab

    progress: list[tuple[str, int, int]] = []
    with distributed.Client(address, timeout=60) as client:
        outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
            trials=2,
            concurrency=2,
            executor=client,
            ramp_seconds=0.4,  # a load profile holds on a cluster as in process
            artifacts_dir=tmp_path / "api",
            on_trial_done=lambda result, done, total: progress.append(
                                   (result.summary.trial_id, done, total))))
    assert outcome.exit_code == 0 and outcome.report.passed_trials == 2
    profile, achieved = outcome.report.load_profile, outcome.report.achieved_concurrency
    assert profile is not None and (profile.kind, profile.ramp_seconds) == ("closed", 0.4)
    assert achieved is not None and [s.running for s in achieved.samples][0] == 1
    assert len(achieved.samples) == 4 and max(s.running for s in achieved.samples) <= 2
    # results stream back one by one as the trials finish
    assert sorted(progress) == sorted([(progress[0][0], 1, 2), (progress[1][0], 2, 2)])
    assert {p[0] for p in progress} == {"trial-001", "trial-002"}
    log = (outcome.bundle_path / "evaluator.log").read_text()
    assert f"executor: dask, scheduler {address}" in log
    # the trials ran in the workers' trial processes, beside the workers and not in them
    # (a Dask worker's event loop would share the trial loop's GIL): each is a worker's child
    ran_in = {int(pid) for pid in re.findall(r"\[worker [^\]:]+:(\d+)\]", log)}
    assert ran_in and not ran_in & set(pids.values())
    assert {psutil.Process(pid).ppid() for pid in ran_in} <= set(pids.values())


def test_a_dask_worker_killed_mid_run_loses_only_its_trials(tmp_path, dask_cluster):
    address, pids = dask_cluster
    idle = {pid: _talking(psutil.Process(pid)) for pid in pids.values()}  # the scheduler's
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--trials", "4",
         "--concurrency", "4", "--executor", "dask", "--scheduler", address, "--quiet",
         "--artifacts-dir", str(tmp_path / "run"), *STALLING],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # four trials in flight, two on each worker
            markers = {p.name for p in (tmp_path / "run").glob("*/.trial-*.running")}
            if len(markers) == 4 and all(_talking(psutil.Process(pid)) >= idle[pid] + 4
                                         for pid in pids.values()):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the trials never started on both workers")
        killed = psutil.Process(pids[sorted(pids)[0]])
        its_trial_processes = killed.children()
        assert its_trial_processes  # the trials run in a process of its own beside it
        killed.send_signal(signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 4, stdout + stderr
    assert "Traceback" not in stderr
    bundle = only_bundle(tmp_path / "run")
    reports = trial_reports(bundle)
    assert len(reports) == 4
    lost = [r for r in reports.values() if [f.get("code") for f in r["failures"]] == ["worker_lost"]]
    assert len(lost) == 2, stdout
    assert all("Dask worker running it was lost" in r["failures"][0]["message"] for r in lost)
    assert sum(r["passed"] for r in reports.values()) == 2  # the other worker's, run once
    assert not list(bundle.glob(".trial-*.running"))
    # its trial process ended with it (no orphan running trials on)
    _gone, alive = psutil.wait_procs(its_trial_processes, timeout=30)
    assert not alive


def test_the_local_cluster_leaves_the_callers_environment_alone(monkeypatch):
    """A nanny sets its pre-spawn variables in the caller's own os.environ; the LocalCluster a
    run starts has no MALLOC_TRIM_THRESHOLD_ among them (it would reach every process the
    caller starts later), and its workers run without Dask's profiler."""
    pytest.importorskip("distributed")
    import asyncio

    from voicelab.execution import DaskExecutor

    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)

    def worker_settings() -> tuple[str | None, bool]:
        import dask

        return (os.environ.get("MALLOC_TRIM_THRESHOLD_"),
                dask.config.get("distributed.worker.profile.enabled"))

    async def started() -> list[tuple[str | None, bool]]:
        executor = DaskExecutor(workers=1)
        await executor.start()
        try:
            return list((await executor._client.run(worker_settings)).values())
        finally:
            await executor.close()

    assert asyncio.run(started()) == [(None, False)]
    assert "MALLOC_TRIM_THRESHOLD_" not in os.environ


def test_executor_options_are_checked_in_one_line(monkeypatch, capsys, tmp_path):
    assert main(["run", str(EXAMPLE), "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "CLI: --scheduler: needs --executor dask" in capsys.readouterr().err
    assert main(["run", str(EXAMPLE), "--workers", "0"]) == 2
    assert "CLI: --workers: must be a whole number from 1 to 256, got 0" in capsys.readouterr().err
    pytest.importorskip("distributed")
    monkeypatch.setattr("voicelab.execution._dask.CONNECT_TIMEOUT_SECONDS", 2.0)
    assert main(["run", str(EXAMPLE), "--executor", "dask", "--scheduler",
                 f"tcp://127.0.0.1:{_free_port()}", "--artifacts-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "CLI: --scheduler: cannot connect to the Dask scheduler at tcp://127.0.0.1:" in err
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if it were not installed
    assert main(["run", str(EXAMPLE), "--executor", "dask",
                 "--artifacts-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'voicelab[dask]'" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # refused before any bundle


def test_a_run_that_cannot_be_prepared_in_a_worker_fails_its_trials_there(tmp_path, monkeypatch):
    """The worker side in this process (its own trial loop in a thread): a trial runs and writes
    its folder; a run the worker cannot prepare comes back as a failed execution, not a hang."""
    import voicelab
    from voicelab.execution import RunContext, TrialJob, _worker
    from voicelab.execution._process_run import lost_trial

    loaded = voicelab.load_run(EXAMPLE)
    service = _worker.trial_service()
    good = RunContext(key="good", loaded=loaded, run_id="good", bundle=tmp_path,
                      speech_cache_dir=tmp_path / ".speech-cache")
    outcome = service.submit(good, TrialJob(1, 42)).result(timeout=120)
    assert outcome.report is not None and outcome.report.passed
    assert (tmp_path / "trial-001" / "trial-report.json").is_file()
    assert outcome.worker_peak_rss_kib > 0 and outcome.turn_metrics
    service.release_run("good")

    def broken(_loaded):
        raise ConfigError("scenario.yaml is not readable here")

    monkeypatch.setattr(_worker, "_prepare_plan", broken)
    bad = RunContext(key="bad", loaded=loaded, run_id="bad", bundle=tmp_path,
                     speech_cache_dir=tmp_path / ".speech-cache")
    outcome = service.submit(bad, TrialJob(2, 43)).result(timeout=60)
    assert outcome.report is None and outcome.lost_code == "worker_setup_failed"
    assert "scenario.yaml is not readable here" in (outcome.lost or "")
    report = lost_trial(bad, TrialJob(2, 43), outcome.lost or "", code=outcome.lost_code).report
    assert [(f.kind, f.code) for f in report.failures] == [("runner", "worker_setup_failed")]
