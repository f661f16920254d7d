"""A Dask worker's trials run in a process of their own, beside the worker: its trial process.

A Dask worker's own event loop (the scheduler's messages, heartbeats, its health and profiling
ticks) runs in its main thread. A trial loop in a thread of that process shares its GIL: every
time the worker's loop runs, an arrival waits for it, and when the machine is busy the worker's
thread can be descheduled while it holds the GIL. And a nanny starts its worker with a malloc
setting that stalls the trial loops (:data:`NOT_INHERITED`), which only a process started
without it escapes. A trial loop in a process of its own shares nothing with the worker but the
machine's cores, like a local worker process (``--workers``): it *is* one, the same
:func:`._worker.serve` on the other end of a socket pair.

One trial process per Dask worker process, started on the worker's first trial and reused by
every trial and run after it (each run is prepared there once, as in a local worker). It ends
with its worker: when the worker's end of the socket closes (the worker exits or is killed),
it exits at once, and the trials it had in flight end with it, as they would have in the
worker itself; what they had written stays in the bundle. A trial process that dies fails its
trials in flight (``worker_lost``); the next trial starts a new one.

It is started as every child is (:mod:`._child`): a nanny starts its Dask worker as a daemonic
process, which may not have multiprocessing children.
"""

from __future__ import annotations

import threading

from ._worker_process import WorkerProcess

#: Environment variables of the worker its trial process does not inherit. A nanny starts its
#: worker with ``MALLOC_TRIM_THRESHOLD_=65536`` (``distributed.nanny.pre-spawn-environ``, to
#: hand memory back to the system); set at all, it turns off glibc's dynamic mmap threshold, so
#: every allocation over 128 KiB (audio buffers) is a fresh mmap, faulted in page by page and
#: unmapped when freed, which stalls a trial loop while its trials open their calls.
NOT_INHERITED = ("MALLOC_TRIM_THRESHOLD_",)


def _lost_in(process: WorkerProcess, how: str) -> str:
    return f"the trial process {process.name} of the Dask worker ended while it ran ({how})"


def start_trial_process() -> WorkerProcess:
    return WorkerProcess(describe_loss=_lost_in, drop_environment=NOT_INHERITED)


_process: WorkerProcess | None = None
_process_lock = threading.Lock()


def trial_process() -> WorkerProcess:
    """This worker's trial process, started on first use (again if it died)."""
    global _process
    with _process_lock:
        if _process is None or not _process.alive:
            _process = start_trial_process()
        return _process


def existing_trial_process() -> WorkerProcess | None:
    return _process
