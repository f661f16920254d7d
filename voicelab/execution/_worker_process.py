"""The parent's end of a worker process (:func:`._worker.serve`): a local executor's worker, or a
Dask worker's trial process.

Thread-safe: a trial is submitted from any thread and its outcome comes back as a
:class:`concurrent.futures.Future`, resolved by the reader thread. Each run's context is sent
once (again only when it changed). A worker process that dies fails its trials in flight with
:class:`WorkerLost`, saying how it ended.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ._child import Child, ended_how, start_child
from ._protocol import TrialJob, TrialOutcome, WorkerLost

#: The entry point of a worker process (:func:`voicelab.execution._worker.serve`).
WORKER_ENTRY = "voicelab.execution._worker:serve"
#: How long the reader waits for a worker process whose channel closed to exit (its exit code).
EXIT_WAIT_SECONDS = 5.0


class WorkerProcess:
    """One worker process. ``describe_loss(process, how)`` says what a trial lost with it was
    running in (``how``: ``killed by SIGKILL``, ``exit code 1``)."""

    def __init__(self, *, describe_loss: Callable[[WorkerProcess, str], str],
                 drop_environment: Iterable[str] = ()):
        self.child: Child = start_child(WORKER_ENTRY, drop_environment=drop_environment)
        #: as the worker names itself in its outcomes
        self.name = f"{os.uname().nodename}:{self.child.pid}"
        self.alive = True
        self._describe_loss = describe_loss
        self._lock = threading.Lock()
        self._job_ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[TrialOutcome]] = {}
        #: per run: the context the process was last sent (a run's trials mostly share one)
        self._contexts: dict[str, bytes] = {}
        self.returncode: int | None = None
        threading.Thread(target=self._read, daemon=True,
                         name=f"voicelab-worker-{self.pid}-reader").start()

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def submit(self, key: str, blob: bytes, job: TrialJob
               ) -> concurrent.futures.Future[TrialOutcome]:
        """Run the trial ``job`` of the run ``key`` (its pickled context ``blob``)."""
        future: concurrent.futures.Future[TrialOutcome] = concurrent.futures.Future()
        with self._lock:
            if not self.alive:
                future.set_exception(WorkerLost(self._loss()))
                return future
            job_id = next(self._job_ids)
            self._pending[job_id] = future
            changed = self._contexts.get(key) != blob
            self._contexts[key] = blob
            self._send(("run", job_id, key, blob if changed else None, job))
        return future

    def cancel_run(self, key: str) -> None:
        with self._lock:
            self._send(("cancel", key))

    def release_run(self, key: str) -> None:
        with self._lock:
            self._contexts.pop(key, None)
            self._send(("release", key))

    def stop(self) -> None:
        """Ask it to end (its trials are done): it exits once it has read this."""
        with self._lock:
            self._send(("stop",))

    def _send(self, message: tuple[Any, ...]) -> None:
        if not self.alive:
            return
        try:
            self.child.channel.send(message)
        except OSError:
            pass  # it died: the reader fails its trials

    def _loss(self) -> str:
        return self._describe_loss(self, ended_how(self.returncode))

    def _read(self) -> None:
        while True:
            try:
                _kind, job_id, outcome = self.child.channel.receive()
            except (EOFError, OSError):
                break
            with self._lock:
                future = self._pending.pop(job_id, None)
            if future is not None:
                future.set_result(outcome)
        self.returncode = self.child.wait_ended(EXIT_WAIT_SECONDS)
        with self._lock:
            self.alive = False
            pending, self._pending = self._pending, {}
            self.child.channel.close()
        for future in pending.values():
            future.set_exception(WorkerLost(self._loss()))
