"""Dask workers publish their own trials to a store: a real Dask cluster (the ``dask`` CLIs)
and a real S3-compatible server (moto), both on 127.0.0.1 (the fixtures are in conftest.py);
the worker's side alone (a trial it cannot publish, one it published before it was lost)
against an in-memory store double that refuses what a full or closed bucket refuses.

The workers stand for other machines: they have a home and a temporary folder of their own,
reach the store with their own environment (the standard AWS variables), and the test watches
the caller's temporary folder (where its staging folder is) for any trial folder while the run
goes on: none may ever appear there.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import voicelab
from voicelab.analysis import load_frames
from voicelab.artifacts import TRIAL_FILES
from voicelab.execution import RunContext, TrialJob
from voicelab.execution._dask import PUBLISH_FAILED, RESCHEDULED, dask_trial
from voicelab.execution._process_run import lost_trial
from voicelab.execution._worker import trial_service

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


@pytest.fixture
def worker_home(tmp_path: Path) -> Path:
    home = tmp_path / "worker-home"
    (home / "tmp").mkdir(parents=True)
    return home


@pytest.fixture
def dask_worker_env(s3: Any, worker_home: Path) -> dict[str, str]:
    """As on another machine: a home and a temporary folder of the workers' own, and the
    store reached through the standard AWS variables (not fsspec's configuration)."""
    env = {key: value for key, value in s3.env.items() if not key.startswith("FSSPEC_")}
    # a user's own adapter module may be put in worker_home/adapters
    (worker_home / "adapters").mkdir()
    return {**env, "PYTHONPATH": os.pathsep.join((str(ROOT), str(worker_home / "adapters"))),
            "HOME": str(worker_home),
            "TMPDIR": str(worker_home / "tmp"), "XDG_CACHE_HOME": str(worker_home / ".cache"),
            "AWS_ENDPOINT_URL": s3.endpoint}


class FolderWatch:
    """Every trial folder that appears under ``root`` while it watches (polled every 5 ms: a
    trial folder lives there for its whole trial, hundreds of milliseconds at least)."""

    def __init__(self, root: Path):
        self.root = root
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.005):
            for folder, dirs, _files in os.walk(self.root):
                self.seen.update(str(Path(folder, d).relative_to(self.root))
                                 for d in dirs if d.startswith("trial-"))

    def __enter__(self) -> FolderWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cli(s3: Any, *args: str, cwd: Path, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=180, env=env or s3.env, cwd=cwd)


def test_dask_workers_publish_their_own_trials_to_the_store(s3, dask_cluster, worker_home,
                                                            tmp_path):
    address, _pids = dask_cluster
    caller_tmp = tmp_path / "caller-tmp"
    caller_tmp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    runs = f"s3://{s3.bucket}/dask-runs"
    dask = ["--executor", "dask", "--scheduler", address, "--quiet"]
    caller_env = {**s3.env, "TMPDIR": str(caller_tmp)}
    with FolderWatch(caller_tmp) as caller, FolderWatch(worker_home / "tmp") as workers:
        first = cli(s3, "run", str(EXAMPLE), "--trials", "3", "--concurrency", "3",
                    "--artifacts-dir", runs, *dask, cwd=work, env=caller_env)
        assert first.returncode == 0, first.stdout + first.stderr
    assert caller.seen == set()  # the caller's staging folder never held a trial
    assert list(caller_tmp.iterdir()) == []  # and is gone
    with FolderWatch(caller_tmp) as resuming, FolderWatch(worker_home / "tmp") as extending:
        # resuming through the workers extends the run: the trials done stay, one more runs
        resumed = cli(s3, "run", "--resume", f"{runs}/latest", "--trials", "4", *dask,
                      cwd=work, env=caller_env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # the caller downloads the reports of the trials done (what resuming reads), no more
    assert {Path(p).name for p in resuming.seen} == {"trial-001", "trial-002", "trial-003"}
    assert list(caller_tmp.iterdir()) == []
    # the workers wrote each trial in a scratch folder of theirs, and removed it
    assert {Path(p).name for p in workers.seen} == {"trial-001", "trial-002", "trial-003"}
    assert {Path(p).name for p in extending.seen} == {"trial-004"}
    assert list((worker_home / "tmp").glob("voicelab-trial-*")) == []

    s3.fs.invalidate_cache()
    run_id = s3.fs.cat_file(f"{s3.bucket}/dask-runs/LATEST").decode().strip()
    bundle = f"dask-runs/{run_id}"
    for trial in ("trial-001", "trial-002", "trial-003", "trial-004"):
        assert s3.names(f"{bundle}/{trial}") == set(TRIAL_FILES)
    assert not [name for name in s3.names(bundle) if name.endswith(".running")]
    report = s3.json(f"{bundle}/run-report.json")
    assert report["status"] == "complete" and report["exit_code"] == 0
    assert report["executed_trials"] == 4 and report["passed_trials"] == 4
    assert [t["trial_id"] for t in report["trials"]] == \
        ["trial-001", "trial-002", "trial-003", "trial-004"]
    assert len(report["resumed_at"]) == 1
    log = s3.fs.cat_file(f"{s3.bucket}/{bundle}/evaluator.log").decode()
    for trial in ("trial-001", "trial-002", "trial-003", "trial-004"):
        assert f"{trial}: published to s3://{s3.bucket}/{bundle}/{trial} by the worker" in log
    assert f"executor: dask, scheduler {address}" in log

    page = cli(s3, "report", f"{runs}/latest", "--output", f"s3://{s3.bucket}/pages/dask.html",
               cwd=work)
    assert page.returncode == 0, page.stdout + page.stderr
    s3.fs.invalidate_cache()
    assert run_id in s3.fs.cat_file(f"{s3.bucket}/pages/dask.html").decode()
    frames = load_frames(f"{runs}/latest")
    assert list(frames.trials["trial_id"]) == ["trial-001", "trial-002", "trial-003",
                                               "trial-004"]
    assert len(frames.turns) >= 4


def test_an_inconclusive_trial_published_by_a_worker_is_retried_in_the_store(
        s3, dask_cluster, worker_home, tmp_path):
    from test_inconclusive_retry import DEAF_ONCE_ADAPTER

    address, _pids = dask_cluster
    adapters = worker_home / "adapters"  # on the workers' path, and the caller's below
    (adapters / "deaf_once.py").write_text(DEAF_ONCE_ADAPTER, encoding="utf-8")
    product = subprocess.Popen([sys.executable, "-m", "voicelab.doubles.product"],
                               stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    uri = json.loads(product.stdout.readline())["uri"]  # type: ignore[union-attr]
    runs = f"s3://{s3.bucket}/retried"
    try:
        # each worker's trial process loses the transcripts of its first call: with two
        # workers, the third attempt at the latest finds one that has made a call
        done = cli(s3, "run", str(EXAMPLE), "--trials", "1", "--artifacts-dir", runs,
                   "--executor", "dask", "--scheduler", address, "--quiet",
                   "--retry-inconclusive", "2",
                   "--set", "endpoint.adapter=deaf_once.TranscriptsFromTheSecondCall",
                   "--set", f"endpoint.settings={{uri: '{uri}'}}",
                   "--set", "outcome_probe=null", "--set", "scenario.eval_spec.outcome_spec={}",
                   cwd=tmp_path, env={**s3.env, "PYTHONPATH": os.pathsep.join(
                       (str(ROOT), str(adapters)))})
    finally:
        product.terminate()
        product.wait(10)
    assert done.returncode == 0, done.stdout + done.stderr
    s3.fs.invalidate_cache()
    run_id = s3.fs.cat_file(f"{s3.bucket}/retried/LATEST").decode().strip()
    bundle = f"retried/{run_id}"
    report = s3.json(f"{bundle}/trial-001/trial-report.json")
    assert report["status"] == "passed" and report["attempt"] >= 2
    assert [a["attempt"] for a in report["attempts"]] == list(range(1, report["attempt"]))
    for earlier in report["attempts"]:  # each earlier attempt kept in the store, as evidence
        assert earlier["status"] == "inconclusive"
        kept = s3.names(f"{bundle}/{earlier['path']}")
        assert "attempt-report.json" in kept and "trial-report.json" not in kept
        assert s3.json(f"{bundle}/{earlier['path']}/attempt-report.json")["attempt"] == \
            earlier["attempt"]
    assert s3.names(f"{bundle}/trial-001") == set(TRIAL_FILES)
    run_report = s3.json(f"{bundle}/run-report.json")
    assert run_report["exit_code"] == 0 and run_report["retried_trials"] == 1
    assert [t["trial_id"] for t in run_report["trials"]] == ["trial-001"]
    frames = load_frames(f"{runs}/latest")  # one trial: the attempts are evidence
    assert list(frames.trials["trial_id"]) == ["trial-001"]


# --- the worker's side, in this process (its trial loop in a thread), against a store double ---

class QuotaStore(MemoryFileSystem):
    """An in-memory store that refuses new objects whose path contains ``refused`` (as a
    bucket over its quota, or one the worker's credentials may not write, refuses a PUT)."""

    protocol = "voicelab-quota"
    refused = "/trial-"
    store: dict[str, Any] = {}  # its own objects, not memory://'s
    pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, str):
            path = path.removeprefix("voicelab-quota://")
        return super()._strip_protocol(path)

    def _refuse(self, path: str) -> None:
        if self.refused in self._strip_protocol(path):
            raise PermissionError(f"quota exceeded: {path} was not written")

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode:
            self._refuse(path)
        return super()._open(path, mode, *args, **kwargs)

    def pipe_file(self, path: str, value: bytes, *args: Any, **kwargs: Any) -> None:
        self._refuse(path)
        super().pipe_file(path, value, *args, **kwargs)


@pytest.fixture
def worker_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as a Dask worker: its scratch folders in ``<tmp>/worker-tmp``."""
    fsspec.register_implementation(QuotaStore.protocol, QuotaStore, clobber=True)
    scratch = tmp_path / "worker-tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return scratch


def _context(tmp_path: Path, key: str, store_url: str) -> RunContext:
    loaded = voicelab.load_run(EXAMPLE)
    # the caller's staging folder: the worker must never write it
    staging = tmp_path / "staging" / key
    staging.mkdir(parents=True)
    return RunContext(key=key, loaded=loaded, run_id=key, bundle=staging,
                      speech_cache_dir=staging / ".speech-cache", store_url=store_url)


def test_a_worker_that_cannot_publish_fails_the_trial_and_says_why(worker_side, tmp_path,
                                                                   monkeypatch):
    fs = QuotaStore()
    # the store takes the attempt's marker, then refuses the trial's objects (quota)
    context = _context(tmp_path, "quota", "voicelab-quota://runs/quota")
    job = TrialJob(1, 42)
    outcome = asyncio.run(dask_trial(pickle.dumps(context), job, "attempt1"))
    assert outcome.report is None and outcome.lost_code == PUBLISH_FAILED
    kept = worker_side.glob("voicelab-trial-*/trial-001")
    folder = next(kept)  # the evidence stays on the worker, and the message says where
    assert (folder / "trial-report.json").is_file()
    assert outcome.lost is not None and "quota exceeded" in outcome.lost
    assert str(folder) in outcome.lost and "could not publish the trial to " \
        "voicelab-quota://runs/quota/trial-001" in outcome.lost
    assert not fs.exists("/runs/quota/trial-001/trial-report.json")
    assert fs.find("/runs/quota") == []  # the marker is gone too
    # the caller turns it into a failed execution (exit 4), written in its staging folder
    result = lost_trial(context, job, outcome.lost, code=outcome.lost_code)
    assert result.report.execution_status == "failed"
    assert [(f.kind, f.code) for f in result.report.failures] == \
        [("runner", "worker_publish_failed")]
    assert (context.bundle / "trial-001" / "trial-report.json").is_file()
    trial_service().release_run("quota")

    # a store the worker cannot write at all: refused before the trial runs
    monkeypatch.setattr(QuotaStore, "refused", "/")
    closed = _context(tmp_path, "closed", "voicelab-quota://runs/closed")
    outcome = asyncio.run(dask_trial(pickle.dumps(closed), TrialJob(2, 43), "attempt2"))
    assert outcome.report is None and outcome.lost_code == PUBLISH_FAILED
    assert outcome.lost is not None and outcome.lost.startswith(
        "the Dask worker ") and "cannot write to the store voicelab-quota://runs/closed: " \
        "quota exceeded" in outcome.lost
    assert list(worker_side.glob("voicelab-trial-*/trial-002")) == []  # nothing ran
    assert list(closed.bundle.iterdir()) == []


def test_a_trial_published_before_its_worker_was_lost_keeps_its_result(worker_side, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(QuotaStore, "refused", "/nothing-refused/")
    fs = QuotaStore()
    context = _context(tmp_path, "kept", "voicelab-quota://runs/kept")
    job = TrialJob(1, 42)
    outcome = asyncio.run(dask_trial(pickle.dumps(context), job, "attempt1"))
    assert outcome.report is not None and outcome.report.passed
    assert any("published to voicelab-quota://runs/kept/trial-001 by the worker"
               in record.getMessage() for record in outcome.logs)
    assert fs.exists("/runs/kept/trial-001/trial-report.json")
    assert list(worker_side.glob("voicelab-trial-*")) == []  # the scratch copy is gone
    assert list(context.bundle.iterdir()) == []  # the caller's staging was never written
    # a rescheduled attempt (its marker in the store: the first worker died) does not run
    fs.pipe_file("/runs/kept/.trial-002.attempt2.running", b"")
    again = asyncio.run(dask_trial(pickle.dumps(context), TrialJob(2, 43), "attempt2"))
    assert again.report is None and again.lost == RESCHEDULED
    # the caller lost the first result after the worker published it: read back, not failed
    result = lost_trial(context, job, "the Dask worker running it was lost")
    assert result.report.passed and result.report.trial_id == "trial-001"
    assert result.turn_metrics == outcome.turn_metrics
    assert list(context.bundle.iterdir()) == []
    # the rescheduled one is a failed execution, and its attempt's marker goes
    lost = lost_trial(context, TrialJob(2, 43), again.lost or "")
    assert [f.code for f in lost.report.failures] == ["worker_lost"]
    assert sorted(fs.find("/runs/kept")) == sorted(f"/runs/kept/trial-001/{name}"
                                                   for name in TRIAL_FILES)
    # a worker that said why it failed published nothing new: the report there is older
    refused = lost_trial(context, job, "refused", code=PUBLISH_FAILED)
    assert [f.code for f in refused.report.failures] == [PUBLISH_FAILED]
    shutil.rmtree(context.bundle / "trial-001")  # (written by the caller: another case now)
    # so is it when a worker died before its publishing ended (its marker is still there,
    # e.g. a resumed trial run again): lost, not the earlier attempt's report
    fs.pipe_file("/runs/kept/.trial-001.attempt3.running", b"")
    died = lost_trial(context, job, "the Dask worker running it was lost")
    assert [f.code for f in died.report.failures] == ["worker_lost"]
    assert not fs.exists("/runs/kept/.trial-001.attempt3.running")
    trial_service().release_run("kept")
