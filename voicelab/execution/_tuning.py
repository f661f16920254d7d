"""Process settings that help a run's timestamps, changed only in a process that opts in.

While runs are in progress a tuned process has a short GIL switch interval (worker threads, such
as bundle writing or a synchronous persona, yield the GIL often, so they delay the event loop's
arrival stamps by at most about that much), the objects that existed before the first run
frozen out of garbage collection (a full collection then scans only the runs' own objects), and
full collections far apart: one comes after :data:`FULL_COLLECTION_AFTER` young-generation
collections instead of Python's 10. A full collection holds the loop while it scans every live
object, and every arrival stamped meanwhile is late by as much; with many concurrent calls the
runs' own objects are many and a full collection finds little to free until trials end. The
young generations are still collected as usual, so what is left over until the next full
collection is only cyclic garbage old enough to have reached the oldest generation; the full
collection runs when the last run ends.

All of this is process-global: in a notebook kernel or an application that embeds voicelab it
would change the user's own code, so nothing changes unless the process opts in
(:func:`tuned_process`; the command line does, and so does every worker process voicelab
starts). Everything is restored when the last run ends, and at the latest when the opt-in ends.
A process that froze objects itself (a preforking server) keeps them frozen: nothing is frozen
for the runs then, since unfreezing would release its own.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections.abc import Iterator

#: The GIL switch interval of a tuned process while runs are in progress (seconds).
GIL_SWITCH_INTERVAL_SECONDS = 0.0005
#: While runs are in progress, a full garbage collection comes after this many collections of
#: the middle generation (Python's default: 10): a hundred times rarer, so a long run still
#: frees its old cyclic garbage now and then.
FULL_COLLECTION_AFTER = 1000


class ProcessTuning:
    """The tuning of this process: applied while runs are in progress (they may overlap, e.g.
    a sweep's runs on one event loop, or a worker's trials) if the process opted in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a worker's trial thread and the caller's loop may share it
        self._opted_in = 0
        self._runs = 0
        #: the switch interval and the collection thresholds to restore, while it is applied
        self._saved_interval: float | None = None
        self._saved_thresholds: tuple[int, ...] = ()
        #: whether the tuning froze the objects (nothing was frozen before it)
        self._froze = False

    @property
    def applied(self) -> bool:
        return self._saved_interval is not None

    def opt_in(self) -> None:
        with self._lock:
            self._opted_in += 1

    def opt_out(self) -> None:
        with self._lock:
            self._opted_in -= 1
            if self._opted_in == 0:
                self._restore()

    @contextlib.contextmanager
    def during_run(self) -> Iterator[None]:
        """One run (or a worker's trial) in progress."""
        with self._lock:
            self._runs += 1
            if self._opted_in and not self.applied:
                self._saved_interval = sys.getswitchinterval()
                sys.setswitchinterval(min(self._saved_interval, GIL_SWITCH_INTERVAL_SECONDS))
                self._froze = gc.get_freeze_count() == 0
                if self._froze:
                    gc.freeze()
                self._saved_thresholds = gc.get_threshold()
                young, middle, oldest = self._saved_thresholds
                gc.set_threshold(young, middle, max(oldest, FULL_COLLECTION_AFTER))
        try:
            yield
        finally:
            with self._lock:
                self._runs -= 1
                if self._runs == 0:
                    self._restore()

    def _restore(self) -> None:
        if self._saved_interval is not None:
            if self._froze:
                gc.unfreeze()
            gc.set_threshold(*self._saved_thresholds)
            gc.collect()  # the full collection the runs put off
            sys.setswitchinterval(self._saved_interval)
            self._saved_interval = None
            self._froze = False


PROCESS_TUNING = ProcessTuning()


@contextlib.contextmanager
def tuned_process() -> Iterator[None]:
    """Let the runs started in this block tune this process (see the module): a short GIL
    switch interval, older objects frozen out of garbage collection and full collections put
    off while they run, all restored when the last of them ends. For scripts and services that
    run voicelab as their main work; a notebook kernel need not."""
    PROCESS_TUNING.opt_in()
    try:
        yield
    finally:
        PROCESS_TUNING.opt_out()
