"""The inline executor: trials run on the caller's event loop (the library's default).

The run's speech provider is opened here, once. A trial's call runs on the loop; when it ends,
its slot of the run's concurrency is free and the next call starts while this one is scored
(:class:`._scorer.Scorer`: in the scoring process, else on the loop). At most ``concurrency``
finished calls wait to be scored: a trial whose call ended waits for room before its run
starts another one (:meth:`InlineCall.settle`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..errors import ConfigError
from ..runner import Call, TrialPlan, crashed_trial, open_speech, run_call, scored_result
from ._protocol import Executor, ExecutorRun, RunSpec, TrialCall, TrialJob
from ._scorer import Scorer, live_call
from ._start_spacing import start_slot

logger = logging.getLogger(__name__)


class InlineExecutor:
    """Trials on the caller's event loop."""

    description = "in-process"
    shares_disk = True

    @classmethod
    def for_run(cls, *, workers: int | None, scheduler: str | None, parallel: int) -> Executor:
        if workers not in (None, 1):
            raise ConfigError(f"the inline executor runs the trials on this event loop: no "
                              f"worker processes (got {workers})", key="workers")
        return cls()

    async def start(self) -> None:
        pass  # nothing to start: the caller's loop runs the trials

    async def open_run(self, run: RunSpec) -> ExecutorRun:
        return InlineRun(run)

    async def close(self) -> None:
        pass


class InlineRun:
    """One run's trials on the caller's loop: the speech provider they share, the scorer of
    their calls, and the room for finished calls waiting to be scored."""

    def __init__(self, run: RunSpec):
        self.run = run
        loaded = run.plan.loaded
        self.speech: Any = open_speech(loaded, run.plan.speech_cls,
                                       cache_dir=run.context.speech_cache_dir)
        self.scorer = Scorer(loaded, run_key=run.context.key, mode=run.scoring)
        self.room = asyncio.Semaphore(run.concurrency)
        self.scorer.warm()

    async def submit(self, job: TrialJob) -> TrialCall:
        await start_slot()
        trial = self.run.trial_plan(job, speech=self.speech)
        with live_call():
            call = await run_call(trial)
        return InlineCall(self, trial, call)

    def finishing(self) -> None:
        self.scorer.finishing()

    async def close(self) -> None:
        await self.speech.aclose()

    def score_behind(self, trial: TrialPlan, call: Call, *, holding_room: bool) -> None:
        self.run.track(self._score(trial, call, holding_room=holding_room))

    async def _score(self, trial: TrialPlan, call: Call, *, holding_room: bool) -> None:
        if not holding_room:
            await self.room.acquire()
        try:
            try:
                result = scored_result(call, await self.scorer.score(call))
            except Exception as error:  # noqa: BLE001 - a scoring bug fails one trial
                logger.error("%s failed while it was scored", call.trial_id,
                             exc_info=(type(error), error, error.__traceback__))
                result = await asyncio.to_thread(crashed_trial, trial, error,
                                                 started_wall=call.started_wall)
            await self.run.finished(result)
        finally:
            self.room.release()


class InlineCall:
    """A call that ended on the caller's loop, to be scored while the next calls run."""

    def __init__(self, session: InlineRun, trial: TrialPlan, call: Call):
        self.session = session
        self.trial = trial
        self.call = call
        self.loop_lag = call.loop_lag
        self.cancelled = call.cancelled

    async def settle(self) -> None:
        try:
            await self.session.room.acquire()
        except asyncio.CancelledError:  # interrupted while waiting: scored all the same
            self.session.score_behind(self.trial, self.call, holding_room=False)
            raise
        self.session.score_behind(self.trial, self.call, holding_room=True)
