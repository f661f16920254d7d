"""The local executor: N worker processes on this machine (``--workers N``).

Each worker process runs its trials on its own event loop (:mod:`._worker`); the caller keeps the
run report, the progress and the signals, and never sees a trial's audio. Results stream back as
trials finish (:mod:`._process_run`).
"""

from __future__ import annotations

import asyncio
import time

from ._inline import InlineExecutor
from ._process_run import ProcessRun
from ._protocol import Executor, ExecutorRun, RunContext, RunSpec, TrialJob, TrialOutcome
from ._registry import check_workers
from ._worker_process import WorkerProcess

#: How long closing the executor waits for a worker process to exit before killing it.
STOP_GRACE_SECONDS = 10.0


def _lost_in(process: WorkerProcess, how: str) -> str:
    return f"the worker process running it (pid {process.pid}) ended while it ran ({how})"


class LocalExecutor:
    """``workers`` processes on this machine (started once, reused by every run and trial
    given to them); a dead process is replaced for the trials that follow."""

    #: the workers write the bundle where the caller does (a run bound for a store: into its
    #: staging folder, published by the caller)
    shares_disk = True

    def __init__(self, workers: int | None = None):
        self.workers = check_workers(workers)
        self.description = f"local, {self.workers} worker process(es)"
        self.peak_rss_kib: dict[str, int] = {}
        self._processes: list[WorkerProcess] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancelled: set[str] = set()

    @classmethod
    def for_run(cls, *, workers: int | None, scheduler: str | None, parallel: int) -> Executor:
        """``workers`` processes (default: one per core), no more than the trials that can run
        at once; one is the caller's event loop (:class:`InlineExecutor`)."""
        count = min(check_workers(workers), parallel)
        return cls(count) if count > 1 else InlineExecutor()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        while len(self._alive()) < self.workers:
            self._spawn()

    def _alive(self) -> list[WorkerProcess]:
        return [p for p in self._processes if p.alive]

    def _spawn(self) -> WorkerProcess:
        process = WorkerProcess(describe_loss=_lost_in)
        self._processes.append(process)
        return process

    async def open_run(self, run: RunSpec) -> ExecutorRun:
        return ProcessRun(self, run)

    def submit_job(self, context: RunContext, blob: bytes, job: TrialJob
                   ) -> asyncio.Future[TrialOutcome]:
        assert self._loop is not None, "start() the executor first"
        if len(self._alive()) < self.workers:  # replace a worker that died
            self._spawn()
        least_busy = min(self._alive(), key=lambda p: p.in_flight)
        return asyncio.wrap_future(least_busy.submit(context.key, blob, job), loop=self._loop)

    async def cancel_run(self, key: str) -> None:
        if key not in self._cancelled:  # every trial in flight asks; the workers hear it once
            self._cancelled.add(key)
            for process in self._alive():
                process.cancel_run(key)

    async def release_run(self, key: str) -> None:
        self._cancelled.discard(key)
        for process in self._alive():
            process.release_run(key)

    async def close(self) -> None:
        processes, self._processes = self._processes, []
        for process in processes:
            process.stop()

        def stop() -> None:
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            for process in processes:
                process.child.wait_ended(max(0.0, deadline - time.monotonic()))

        await asyncio.to_thread(stop)

    def worker_pids(self) -> list[int]:
        """The live worker processes (tests and benchmarks look at them)."""
        return [p.pid for p in self._alive()]
