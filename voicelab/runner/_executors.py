"""Executors: where a run's trials execute.

``arun`` runs trials in its own event loop (one process) unless it is given an executor:

* :class:`LocalExecutor` — N worker processes on this machine (``--workers N``), each running
  its trials on its own event loop (:mod:`._worker`); the parent keeps the run report, the
  progress and the signals, and never sees a trial's audio.
* :class:`~._dask.DaskExecutor` — trials submitted to a ``dask.distributed`` cluster
  (``--executor dask [--scheduler ADDRESS]``).

Results stream back as trials finish. A worker that dies loses only its trials in flight: each
becomes a failed execution (``runner``/``worker_lost``) with whatever evidence it had written.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..artifacts import ExecutionFailure, TrialReport
from ..artifacts._bundle import write_json
from ..audio import CANONICAL_FORMAT
from ..errors import ConfigError
from ._scoring import utc_iso
from ._trial import (
    TrialResult,
    _TrialCancelled,
    configured_session_id,
    trial_session_id,
    trial_summary,
)
from ._worker import RunContext, TrialJob, TrialOutcome, trial_service

logger = logging.getLogger(__name__)

#: After a cancel, how long the parent waits for a worker's trials to write their evidence.
CANCEL_GRACE_SECONDS = 60.0
#: How long closing the executor waits for a worker process to exit before killing it.
STOP_GRACE_SECONDS = 10.0
MAX_WORKERS = 256


class WorkerLost(Exception):
    """The worker running a trial died (or the trial could not be handed back)."""


@runtime_checkable
class TrialExecutor(Protocol):
    """Runs trials away from the caller's event loop; ``submit`` returns when it is done.

    An executor whose workers may not share the caller's disk says so with a class attribute
    ``shares_disk = False``: for a run bound for a store its workers then publish their own
    trials (``RunContext.store_url``). Without the attribute the workers share the disk."""

    description: str
    #: peak resident memory per worker seen so far, in KiB (from the trials' outcomes)
    peak_rss_kib: dict[str, int]

    async def start(self) -> None: ...

    def submit(self, context: RunContext, blob: bytes, job: TrialJob
               ) -> asyncio.Future[TrialOutcome]: ...

    async def cancel_run(self, key: str) -> None: ...

    async def release_run(self, key: str) -> None: ...

    async def aclose(self) -> None: ...


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)


def check_workers(workers: int | None, *, source: str | Path | None = None) -> int:
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or \
            not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"must be a whole number from 1 to {MAX_WORKERS}, got {workers!r}",
                          source=source, key="workers")
    return workers


def resolve_executor(executor: Any, *, workers: int | None, scheduler: str | None,
                     parallel: int) -> tuple[TrialExecutor | None, bool]:
    """The executor a run uses and whether the run owns it (starts and closes it).

    ``None`` (without ``workers``) is the in-process run, and so is ``"local"`` with one worker
    (after capping by the trials that can run at once); ``"dask"`` or a
    ``dask.distributed.Client`` the Dask executor; an executor instance is used as it is
    (shared, e.g. by a sweep's cells)."""
    if isinstance(executor, TrialExecutor):
        return executor, False
    if executor is not None and type(executor).__name__ == "Client" and \
            type(executor).__module__.startswith("distributed"):
        from ._dask import DaskExecutor

        return DaskExecutor(client=executor), True
    if executor not in (None, "local", "dask"):
        raise ConfigError(f"must be 'local', 'dask', an executor or a dask.distributed.Client, "
                          f"got {executor!r}", key="executor")
    if executor is None and workers is None and scheduler is None:
        return None, False  # the library's default: this event loop
    if scheduler is not None and executor != "dask":
        raise ConfigError("a scheduler address needs the dask executor (--executor dask)",
                          key="scheduler")
    count = check_workers(workers)
    if executor == "dask":
        from ._dask import DaskExecutor

        return DaskExecutor(scheduler=scheduler, workers=count, parallel=parallel), True
    count = min(count, parallel)
    return (LocalExecutor(count), True) if count > 1 else (None, False)


# --- the parent's side of one trial -----------------------------------------------------------

async def execute_trial(executor: TrialExecutor, context: RunContext, blob: bytes,
                        job: TrialJob) -> TrialResult:
    """Run one trial on the executor. Cancelled, it asks the workers to stop the run's trials
    and raises :class:`_TrialCancelled` with the evidence the trial wrote (or a plain
    cancellation when it had not started)."""
    future = executor.submit(context, blob, job)
    try:
        outcome = await asyncio.shield(future)
    except asyncio.CancelledError:
        await executor.cancel_run(context.key)
        try:
            outcome = await asyncio.wait_for(asyncio.shield(future), CANCEL_GRACE_SECONDS)
        except (TimeoutError, WorkerLost):
            raise asyncio.CancelledError from None
        if outcome.not_started or outcome.report is None:
            raise
        _replay_logs(outcome)
        raise _TrialCancelled(_result_of(outcome)) from None
    except WorkerLost as lost:
        outcome = TrialOutcome(job.index, lost=str(lost))
    executor.peak_rss_kib[outcome.worker] = max(executor.peak_rss_kib.get(outcome.worker, 0),
                                                outcome.worker_peak_rss_kib)
    _replay_logs(outcome)
    if outcome.report is None:
        reason = outcome.lost or "the worker handed back no result"
        return await asyncio.to_thread(lost_trial, context, job, reason, code=outcome.lost_code)
    return _result_of(outcome)


def _result_of(outcome: TrialOutcome) -> TrialResult:
    assert outcome.report is not None
    return TrialResult(outcome.report, trial_summary(outcome.report), cancelled=outcome.cancelled,
                       turn_metrics=outcome.turn_metrics, probes=outcome.probes,
                       loop_lag=outcome.loop_lag)


def _replay_logs(outcome: TrialOutcome) -> None:
    """The worker's records of the trial go to the run's evaluator.log (and the console)."""
    for level, name, message in outcome.logs:
        logging.getLogger(name).log(level, "%s [worker %s]", message, outcome.worker)
    outcome.logs = []


def lost_trial(context: RunContext, job: TrialJob, reason: str, *,
               code: str = "worker_lost") -> TrialResult:
    """A trial whose worker was lost: a failed execution, keeping every file it had written. A
    trial that had finished (its report on disk, or in the store its worker publishes to)
    before its result was lost keeps its report."""
    from ._remote import published_trial
    from ._resume import read_trial_result

    if context.store_url is not None and code == "worker_lost":
        # its worker may have published it before it was lost (a worker that said why it
        # failed, e.g. worker_publish_failed, published nothing new)
        published = published_trial(context.store_url, job.index, job.seed)
        if published is not None:
            return published
    trial_dir = context.bundle / f"trial-{job.index:03d}"
    for marker in context.bundle.glob(f".trial-{job.index:03d}.*.running"):
        marker.unlink(missing_ok=True)
    report_path = trial_dir / "trial-report.json"
    if report_path.is_file():
        try:
            report = TrialReport.model_validate_json(report_path.read_bytes())
            if report.trial == job.index and report.seed == job.seed:
                return read_trial_result(trial_dir, report)
        except (OSError, ValueError):
            pass  # a report cut short: the trial is lost after all
    loaded = context.loaded
    message = loaded.scrubber.scrub_text(reason)
    logger.error("trial-%03d: %s", job.index, message)
    try:
        present = sorted(p.name for p in trial_dir.iterdir() if not p.name.startswith("."))
    except OSError:
        present = []
    now = time.time()
    report = TrialReport(
        trial=job.index, trial_id=f"trial-{job.index:03d}", seed=job.seed,
        session_id=trial_session_id(loaded, job.index, context.run_id, attempt=job.attempt),
        configured_session_id=configured_session_id(loaded), scenario_id=loaded.scenario.id,
        persona=loaded.persona.name, environment=loaded.environment.name or "quiet",
        adapter=loaded.run.endpoint.adapter, trace_id="", execution_status="failed",
        exit_reason="error", passed=False, started_at=utc_iso(now), ended_at=utc_iso(now),
        duration_seconds=0.0,
        failures=[ExecutionFailure(kind="runner", code=code, message=message)],
        audio_format=CANONICAL_FORMAT.to_dict(),
        files=sorted({*present, "trial-report.json"} - {"trial-report.json.tmp"}))
    try:
        trial_dir.mkdir(parents=True, exist_ok=True)
        write_json(report_path, report)
    except OSError as error:
        logger.error("trial-%03d: the trial report could not be written: %s", job.index,
                     error.strerror or type(error).__name__)
    return TrialResult(report, trial_summary(report))


# --- local worker processes -------------------------------------------------------------------

def _worker_main(connection: Connection) -> None:
    """A local worker process: jobs in on the pipe, outcomes out as trials finish."""
    # the parent owns the signals: it cancels the run and the trials write their evidence
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.getLogger("voicelab").addHandler(logging.NullHandler())  # the parent logs them
    service = trial_service()
    contexts: dict[str, RunContext] = {}
    send_lock = threading.Lock()

    def reply(job_id: int, index: int, done: Any) -> None:
        try:
            outcome = done.result()
        except BaseException as error:  # noqa: BLE001 - the parent must hear of every job
            outcome = TrialOutcome(index, lost=f"{type(error).__name__}: {error}",
                                   worker=service.name)
        with send_lock:
            try:
                connection.send(("done", job_id, outcome))
            except OSError:
                pass  # the parent is gone

    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            break  # the parent is gone: so are we
        kind = message[0]
        if kind == "run":
            _, job_id, key, blob, job = message
            if blob is not None:
                contexts[key] = pickle.loads(blob)
            done = service.submit(contexts[key], job)
            done.add_done_callback(functools.partial(reply, job_id, job.index))
        elif kind == "cancel":
            service.cancel_run(message[1])
        elif kind == "release":
            contexts.pop(message[1], None)
            service.release_run(message[1])
        elif kind == "stop":
            break


@dataclass
class _Process:
    number: int
    process: BaseProcess
    connection: Connection
    pending: dict[int, tuple[asyncio.Future[TrialOutcome], int]] = field(default_factory=dict)
    #: the runs whose context this process has been sent
    contexts: set[str] = field(default_factory=set)
    alive: bool = True


class LocalExecutor:
    """``workers`` processes on this machine (spawned once, reused by every run and trial
    given to them); a dead process is replaced for the trials that follow."""

    #: the workers write the bundle where the caller does (a run bound for a store: into its
    #: staging folder, published by the caller)
    shares_disk = True

    def __init__(self, workers: int | None = None):
        self.workers = check_workers(workers)
        self.description = f"local, {self.workers} worker process(es)"
        self.peak_rss_kib: dict[str, int] = {}
        self._processes: list[_Process] = []
        self._numbers = itertools.count(1)
        self._job_ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context = multiprocessing.get_context("spawn")
        self._cancelled: set[str] = set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        while len(self._alive()) < self.workers:
            self._spawn()

    def _alive(self) -> list[_Process]:
        return [p for p in self._processes if p.alive]

    def _spawn(self) -> _Process:
        parent_end, child_end = self._context.Pipe()
        number = next(self._numbers)
        process = self._context.Process(target=_worker_main, args=(child_end,), daemon=True,
                                        name=f"voicelab-worker-{number}")
        process.start()
        child_end.close()
        entry = _Process(number, process, parent_end)
        self._processes.append(entry)
        threading.Thread(target=self._read, args=(entry,), daemon=True,
                         name=f"voicelab-worker-{number}-reader").start()
        return entry

    def _call(self, callback: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    def _read(self, entry: _Process) -> None:
        while True:
            try:
                message = entry.connection.recv()
            except (EOFError, OSError):
                break
            self._call(self._on_message, entry, message)
        entry.process.join(5.0)
        self._call(self._on_lost, entry)

    def _on_message(self, entry: _Process, message: Any) -> None:
        _, job_id, outcome = message
        future, _index = entry.pending.pop(job_id, (None, 0))
        if future is not None and not future.done():
            future.set_result(outcome)

    def _on_lost(self, entry: _Process) -> None:
        if not entry.alive:
            return
        entry.alive = False
        code = entry.process.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 and \
            -code in signal.valid_signals() else f"exit code {code}"
        reason = (f"the worker process running it (pid {entry.process.pid}) ended while it "
                  f"ran ({how})")
        for future, _index in entry.pending.values():
            if not future.done():
                future.set_exception(WorkerLost(reason))
        entry.pending.clear()

    def submit(self, context: RunContext, blob: bytes, job: TrialJob
               ) -> asyncio.Future[TrialOutcome]:
        assert self._loop is not None, "start() the executor first"
        if len(self._alive()) < self.workers:  # replace a worker that died
            self._spawn()
        entry = min(self._alive(), key=lambda p: (len(p.pending), p.number))
        job_id = next(self._job_ids)
        future: asyncio.Future[TrialOutcome] = self._loop.create_future()
        entry.pending[job_id] = (future, job.index)
        first = context.key not in entry.contexts
        entry.contexts.add(context.key)
        try:
            entry.connection.send(("run", job_id, context.key, blob if first else None, job))
        except OSError:
            self._on_lost(entry)
        return future

    def _broadcast(self, message: tuple[Any, ...]) -> None:
        for entry in self._alive():
            try:
                entry.connection.send(message)
            except OSError:
                self._on_lost(entry)

    async def cancel_run(self, key: str) -> None:
        if key not in self._cancelled:  # every trial in flight asks; the workers hear it once
            self._cancelled.add(key)
            self._broadcast(("cancel", key))

    async def release_run(self, key: str) -> None:
        self._cancelled.discard(key)
        self._broadcast(("release", key))
        for entry in self._processes:
            entry.contexts.discard(key)

    async def aclose(self) -> None:
        self._broadcast(("stop",))
        processes = [entry.process for entry in self._processes]

        def stop() -> None:
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            for process in processes:
                process.join(max(0.0, deadline - time.monotonic()))
                if process.is_alive():
                    process.kill()
                    process.join(5.0)

        await asyncio.to_thread(stop)
        for entry in self._processes:
            entry.alive = False
            entry.connection.close()
        self._processes.clear()

    def worker_pids(self) -> list[int]:
        """The live worker processes (tests and benchmarks look at them)."""
        return [p.process.pid for p in self._alive() if p.process.pid is not None]
