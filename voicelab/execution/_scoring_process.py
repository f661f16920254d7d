"""The scoring process: finished calls scored beside the event loop that ran them.

A run on the caller's event loop sends its finished calls here (one process per Python process,
at a low priority) while the loop goes on with the next calls: the loop that timestamps
arrivals spends no time on placement, metrics and serialization, nor waits for the GIL behind
the threads that write the files (``benchmarks/bench_runner.py`` measures what that buys). The
process scores with :func:`voicelab.runner.score_now` and writes a bundle's files one after
another (no writer threads to wake).

A :class:`~voicelab.runner.Call` crosses without its listener (rebuilt from the events by the
code that followed them live) and without its clean speech when there are no speech metrics
(only they read it; a fifth of the bytes). A thread of the parent pickles it, each PCM stream
joined once into an out-of-band buffer (:class:`._child.Frame`), hands the frame to the kernel
and waits for the reply: calls that end together would otherwise hold the loop for all their
pickles in a row while the trials still talking wait to be read. The reply is unpickled on the
loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import pickle
import signal
import threading
from collections.abc import Callable

from ..config import LoadedRun
from ..recording import USER_CLEAN, PcmStream
from ..runner import Call, Scored, score_now
from ._child import (
    Channel,
    Child,
    Frame,
    RecordCollector,
    collected,
    ended_how,
    handle_records,
    start_child,
)

logger = logging.getLogger(__name__)

#: The scoring process's niceness. CFS weighs nice 10 at a tenth of nice 0: a waking event loop
#: takes the core from it at once, and beside a busy process it still gets a tenth of a core.
#: Nice 19 (or ``SCHED_IDLE``) would starve it for as long as other work kept the machine busy.
SCORING_NICENESS = 10
#: The entry point of the scoring process (its priority is lowered before it imports anything).
SCORING_ENTRY = "voicelab.execution._scoring_process:serve"


class ScoringProcessLost(Exception):
    """The scoring process ended while it scored a trial."""


class ScoringProcessUnavailable(ScoringProcessLost):
    """No scoring process can be started here (the run scores on its loop from then on)."""


class ScoringFailed(Exception):
    """Scoring raised in the scoring process (a bug): the message names the error."""


class CannotSend(Exception):
    """A call that cannot be pickled (an adapter's object in its events): scored on the loop."""


def serve(fd: int) -> None:
    """The scoring process: score each call it is sent, one at a time, until its parent's end of
    the channel closes."""
    # Ctrl-C reaches the whole process group: the parent decides (the trials in flight are
    # still scored and written); a SIGINT here would lose them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    package = logging.getLogger("voicelab")
    package.setLevel(logging.DEBUG)  # the parent's handlers filter
    package.propagate = False
    package.addHandler(RecordCollector(logging.DEBUG))
    channel = Channel.of_fd(fd)
    loaded: LoadedRun | None = None
    while True:
        try:  # the run (when it changed), then the call
            blob = channel.receive()
            call = channel.receive()
        except (EOFError, OSError):
            return
        if blob is not None:
            loaded = pickle.loads(blob)
        with collected() as records:
            try:
                assert loaded is not None
                reply: tuple[object, ...] = ("scored", score_now(loaded, call), records)
            except Exception as error:  # noqa: BLE001 - the parent fails the trial, not the run
                logger.debug("scoring failed", exc_info=True)
                reply = ("failed", f"{type(error).__name__}: {error}", records)
        try:
            channel.send(reply)
        except (OSError, pickle.PicklingError):
            return


def _frame_of(call: Call) -> Frame:
    """``call`` as the scoring process receives it: without the clean speech when there are
    no speech metrics."""
    streams = call.recording.streams
    clean = streams.get(USER_CLEAN)
    if call.speech_metrics or clean is None:
        return Frame.of(call)
    streams[USER_CLEAN] = PcmStream()
    try:
        return Frame.of(call)
    finally:
        streams[USER_CLEAN] = clean


class ScoringProcess:
    """The parent's end of one scoring process: started on first use, reused by every run of
    this Python process, replaced when it dies. Calls are pickled and sent one at a time from a
    thread of its own, which waits for the reply."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="voicelab-scoring")
        self._child: Child | None = None
        self._run_key: str | None = None

    @property
    def pid(self) -> int | None:
        """The process's id while it runs (``None`` before it is started), for a benchmark or
        a monitor that reads its CPU time."""
        child = self._child
        return child.pid if child is not None and child.process.poll() is None else None

    def _start(self) -> Child:
        try:
            return self._spawn()
        except (OSError, ValueError) as error:
            raise ScoringProcessUnavailable(
                f"it could not be started: {type(error).__name__}: {error}") from None

    def _spawn(self) -> Child:
        self._child = start_child(SCORING_ENTRY, niceness=SCORING_NICENESS)
        self._run_key = None
        return self._child

    def warm(self) -> None:
        """Start the process now, from its thread (its imports overlap the first call)."""
        self._thread.submit(self._warm_now)

    def _warm_now(self) -> None:
        with self._lock, contextlib.suppress(ScoringProcessUnavailable):  # said when used
            if self._child is None:
                self._start()

    def _roundtrip(self, run_key: str, loaded_blob: bytes, call: Call,
                   claim: Callable[[], bool] | None) -> Frame | None:
        """Pickle one call and send it (with its run, when the process has another), and wait
        for the reply. ``None``: ``claim`` said the call was taken elsewhere (by the idle event
        loop) while it waited. The call is pickled here, once claimed (nothing else reads it
        then), not on the loop: calls that end together would hold the loop as long as all
        their pickles take, while the trials still talking wait to be read."""
        if claim is not None and not claim():
            return None
        try:
            frame = _frame_of(call)
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            raise CannotSend(f"{type(error).__name__}: {error}") from None
        with self._lock:
            child = self._child or self._start()
            run = Frame.of(loaded_blob if run_key != self._run_key else None)
            try:
                child.channel.send_frame(run)
                child.channel.send_frame(frame)
                self._run_key = run_key
                return child.channel.receive_frame()
            except (EOFError, OSError) as error:
                raise ScoringProcessLost(self._lost(error)) from None

    def _lost(self, error: BaseException) -> str:
        child, self._child = self._child, None
        if child is None:
            return type(error).__name__
        child.channel.close()
        return ended_how(child.wait_ended(5.0))

    async def score(self, run_key: str, loaded_blob: bytes, call: Call, *,
                    claim: Callable[[], bool] | None = None) -> Scored | None:
        """The call scored in the process; ``None`` when ``claim`` (asked by the sending thread
        when the call's turn comes) says it was taken elsewhere."""
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(self._thread, self._roundtrip, run_key,
                                           loaded_blob, call, claim)
        if reply is None:
            return None
        kind, value, records = reply.load()
        handle_records(records)
        if kind == "failed":
            raise ScoringFailed(value)
        return value


_PROCESS: ScoringProcess | None = None


def scoring_process() -> ScoringProcess:
    """This Python process's scoring process."""
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = ScoringProcess()
    return _PROCESS
