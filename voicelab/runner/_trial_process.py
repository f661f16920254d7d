"""A Dask worker's trials run in a process of their own, beside the worker: its trial process.

A Dask worker's own event loop (the scheduler's messages, heartbeats, its health and profiling
ticks: ~125 wake-ups a second measured on a worker running 25 paced trials) runs in its main
thread. A trial loop in a thread of that process shares its GIL: every time the worker's loop
runs, an arrival waits for it, and when the machine is busy the worker's thread can be
descheduled while it holds the GIL. And a nanny starts its worker with a malloc setting that
stalled the trial loops by tens of milliseconds (:data:`NOT_INHERITED`), which only a process
started without it escapes. A trial loop in a process of its own shares nothing with the
worker but the machine's cores, like a local worker process (``--workers``): it *is* one, the
same :func:`._executors._worker_main` on the other end of a socket pair.

One trial process per Dask worker process, started on the worker's first trial and reused by
every trial and run after it (each run is prepared there once, as in a local worker). It ends
with its worker: when the worker's end of the socket closes (the worker exits or is killed),
it exits at once, and the trials it had in flight end with it, as they would have in the
worker itself; what they had written stays in the bundle. A trial process that dies fails its
trials in flight (``worker_lost``); the next trial starts a new one.

It is a plain subprocess (``python -c ...``), not a :mod:`multiprocessing` child: a nanny
starts its Dask worker as a daemonic process, which may not have multiprocessing children.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import signal
import subprocess
import threading
from multiprocessing.connection import Connection

from ._child import start_child
from ._worker import TrialJob, TrialOutcome

#: The command the trial process runs (the socket's file descriptor is appended).
SERVE = "import sys; from voicelab.runner._trial_process import serve; serve(int(sys.argv[1]))"
#: How long the reader waits for a trial process whose socket closed to exit (its exit code).
EXIT_WAIT_SECONDS = 5.0
#: Environment variables of the worker its trial process does not inherit. A nanny starts its
#: worker with ``MALLOC_TRIM_THRESHOLD_=65536`` (``distributed.nanny.pre-spawn-environ``, to
#: hand memory back to the system); set at all, it turns off glibc's dynamic mmap threshold, so
#: every allocation over 128 KiB (audio buffers) is a fresh mmap, faulted in page by page and
#: unmapped when freed. Measured with 50 paced trials on 2 cores: local workers given it stalled
#: their loops by 40-120 ms while the trials opened their calls (lag max median 75-81 ms, against
#: 20-29 ms without it), as the Dask workers' trial loops did.
NOT_INHERITED = ("MALLOC_TRIM_THRESHOLD_",)


class TrialProcessLost(Exception):
    """The trial process ended while it ran the trial."""


def serve(fd: int) -> None:
    """The trial process: a local worker's loop on the socket ``fd``; it ends with its worker."""
    from ._executors import _worker_main

    _worker_main(Connection(fd))
    # the worker is gone (or asked us to stop): so are the trials in flight, as in the worker
    # itself, without waiting for their threads
    os._exit(0)


class TrialProcess:
    """The Dask worker's side of its trial process (thread-safe; one per worker process:
    :func:`trial_process`)."""

    def __init__(self) -> None:
        self.process, self._connection = start_child(SERVE, drop_environment=NOT_INHERITED)
        self.name = f"{os.uname().nodename}:{self.process.pid}"
        self.alive = True
        self._lock = threading.Lock()
        self._job_ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[TrialOutcome]] = {}
        #: per run: the context the process was last sent (a run's trials mostly share one)
        self._contexts: dict[str, bytes] = {}
        threading.Thread(target=self._read, daemon=True,
                         name="voicelab-trial-process-reader").start()

    def submit(self, key: str, blob: bytes, job: TrialJob
               ) -> concurrent.futures.Future[TrialOutcome]:
        """Run the trial ``job`` of the run ``key`` (its pickled context ``blob``)."""
        future: concurrent.futures.Future[TrialOutcome] = concurrent.futures.Future()
        with self._lock:
            if not self.alive:
                future.set_exception(TrialProcessLost(self._ended()))
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

    def _send(self, message: tuple[object, ...]) -> None:
        if not self.alive:
            return
        try:
            self._connection.send(message)
        except OSError:
            pass  # it died: the reader fails its trials

    def _ended(self) -> str:
        code = self.process.returncode
        how = "" if code is None else f" (killed by {signal.Signals(-code).name})" \
            if code < 0 and -code in signal.valid_signals() else f" (exit code {code})"
        return f"the trial process {self.name} of the Dask worker ended while it ran{how}"

    def _read(self) -> None:
        while True:
            try:
                _kind, job_id, outcome = self._connection.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future = self._pending.pop(job_id, None)
            if future is not None:
                future.set_result(outcome)
        try:
            self.process.wait(EXIT_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        with self._lock:
            self.alive = False
            pending, self._pending = self._pending, {}
            self._connection.close()
        for future in pending.values():
            future.set_exception(TrialProcessLost(self._ended()))


_process: TrialProcess | None = None
_process_lock = threading.Lock()


def trial_process() -> TrialProcess:
    """This worker's trial process, started on first use (again if it died)."""
    global _process
    with _process_lock:
        if _process is None or not _process.alive:
            _process = TrialProcess()
        return _process


def existing_trial_process() -> TrialProcess | None:
    return _process
