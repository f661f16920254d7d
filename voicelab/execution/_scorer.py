"""Where a run's finished calls are scored: the scoring process, else the event loop.

A run on the caller's event loop (:class:`._inline.InlineExecutor`) hands each finished call to
a :class:`Scorer`. It sends the call to the scoring process (:mod:`._scoring_process`) while
the loop goes on with the next calls, and scores it on the loop instead
(:func:`voicelab.runner.score_on_loop`) when the run has judges (LLM calls: concurrent on the
loop, not one after another in one process), when the caller asks (``RunOptions(scoring="loop")``),
when the call cannot be sent, and when the scoring process is lost (a warning says so; the
recording is still here, so nothing is lost). The bundle is the same, byte for byte, wherever
it is scored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pickle
import threading
import weakref
from collections.abc import Iterator

from ..config import LoadedRun
from ..runner import Call, Scored, score_on_loop
from ._scoring_process import (
    CannotSend,
    ScoringProcess,
    ScoringProcessLost,
    ScoringProcessUnavailable,
    scoring_process,
)

logger = logging.getLogger(__name__)

#: Calls in progress on each event loop (a sweep's runs share one); see :func:`live_call`.
_LIVE_CALLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = \
    weakref.WeakKeyDictionary()
#: How often a finishing run's scorer looks again whether the loop is free of calls.
HELP_POLL_SECONDS = 0.01


@contextlib.contextmanager
def live_call() -> Iterator[None]:
    """A call is in progress on this event loop: the loop scores no waiting call meanwhile."""
    loop = asyncio.get_running_loop()
    _LIVE_CALLS[loop] = _LIVE_CALLS.get(loop, 0) + 1
    try:
        yield
    finally:
        _LIVE_CALLS[loop] -= 1


class _Waiting:
    """A call waiting for the scoring process, until its sending thread or the idle loop takes
    it (whichever claims it first, under the scorer's lock)."""

    __slots__ = ("call", "taken", "on_loop")

    def __init__(self, call: Call, loop: asyncio.AbstractEventLoop):
        self.call = call
        self.taken: str | None = None  # "process" or "loop"
        #: the result, when the loop took it
        self.on_loop: asyncio.Future[Scored] = loop.create_future()


class Scorer:
    """Where one run's calls are scored: its scoring process, else the event loop.

    The scoring process takes the calls in the order they ended. Once the run starts no more
    calls (:meth:`finishing`) and no call is in progress on the loop, the loop scores waiting
    calls too, the newest first, so the run's last calls do not wait in one queue while a
    core sits idle."""

    def __init__(self, loaded: LoadedRun, *, run_key: str, mode: str = "process"):
        self.loaded = loaded
        self.run_key = run_key
        self._write_lock = asyncio.Lock()
        self._process: ScoringProcess | None = None
        self._blob = b""
        self._waiting: list[_Waiting] = []
        self._claims = threading.Lock()  # the sending thread and the loop claim calls
        self._helper: asyncio.Task[None] | None = None
        if mode == "process" and loaded.run.quality_evaluation is None:
            try:
                self._blob = pickle.dumps(loaded)
                self._process = scoring_process()
            except (pickle.PicklingError, TypeError, AttributeError) as error:
                logger.info("scoring on the event loop: the run's configuration cannot be "
                            "sent to a scoring process (%s)", error)

    @property
    def in_process(self) -> bool:
        return self._process is not None

    def warm(self) -> None:
        if self._process is not None:
            self._process.warm()

    async def score(self, call: Call) -> Scored:
        if self._process is not None:
            waiting = _Waiting(call, asyncio.get_running_loop())
            self._waiting.append(waiting)
            try:
                scored = await self._process.score(self.run_key, self._blob, call,
                                                   claim=lambda: self._claim(waiting, "process"))
                return scored if scored is not None else await waiting.on_loop
            except ScoringProcessUnavailable as unavailable:
                self._process = None
                logger.warning("%s: no scoring process (%s): this run's trials are scored on "
                               "the event loop", call.trial_id, unavailable)
            except ScoringProcessLost as lost:
                logger.warning("%s: the scoring process was lost (%s): scored on the event "
                               "loop instead", call.trial_id, lost)
            except CannotSend as error:
                logger.info("%s: scored on the event loop: its recording cannot be sent to the "
                            "scoring process (%s)", call.trial_id, error)
            finally:
                self._waiting.remove(waiting)
            if waiting.taken == "loop":  # the idle loop took it meanwhile
                return await waiting.on_loop
        return await score_on_loop(self.loaded, call, write_lock=self._write_lock)

    def _claim(self, waiting: _Waiting, by: str) -> bool:
        with self._claims:
            if waiting.taken is not None:
                return False
            waiting.taken = by
            return True

    def finishing(self) -> None:
        """The run starts no more calls (for now: a retry pass may start some again): the loop
        helps score the waiting ones when it is free."""
        if self._process is not None and (self._helper is None or self._helper.done()):
            self._helper = asyncio.create_task(self._help())

    async def _help(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            waiting = next((w for w in reversed(self._waiting) if not w.taken), None)
            if waiting is None:
                return
            if _LIVE_CALLS.get(loop, 0):  # another run's call (a sweep): its stamps come first
                await asyncio.sleep(HELP_POLL_SECONDS)
                continue
            if not self._claim(waiting, "loop"):
                continue
            try:
                waiting.on_loop.set_result(await score_on_loop(
                    self.loaded, waiting.call, write_lock=self._write_lock))
            except asyncio.CancelledError:
                waiting.on_loop.cancel()
                raise
            except Exception as error:  # noqa: BLE001 - the call's own scoring reports it
                waiting.on_loop.set_exception(error)
