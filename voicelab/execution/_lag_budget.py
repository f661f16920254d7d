"""Concurrency from a loop-lag budget: fewer trials at once while the loop cannot keep up.

``measurement.lag_budget_ms`` bounds the loop-lag p99 a trial may see. The run admits trials
through a :class:`LagBudget`, an AIMD controller over the number of trials in flight: a trial
that saw a p99 above the budget halves the limit (multiplicative decrease); after as many
trials within budget as the limit allows, the limit grows by one again (additive increase), up
to the configured concurrency. Only trials admitted under the current limit count, so one
burst of lag that every trial in flight saw lowers the limit once, not once per trial.
Deterministic given the sequence of observations (the unit tests feed it a fake lag source).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..artifacts import LoopLag

logger = logging.getLogger(__name__)


@dataclass
class Admission:
    """A trial's slot: the controller's epoch when it was admitted."""

    epoch: int
    #: what the trial saw, set by the runner when it ends (``None``: it did not run to an end)
    loop_lag: LoopLag | None = None


class LagBudget:
    def __init__(self, *, budget_ms: float, ceiling: int):
        if ceiling < 1:
            raise ValueError("the concurrency ceiling must be at least 1")
        self.budget_ms = budget_ms
        self.ceiling = ceiling
        self.limit = ceiling
        self.lowest = ceiling
        self.decreases = 0
        self.epoch = 0
        self.active = 0
        self._within = 0
        self._changed = asyncio.Condition()

    async def acquire(self) -> Admission:
        async with self._changed:
            await self._changed.wait_for(lambda: self.active < self.limit)
            self.active += 1
            return Admission(self.epoch)

    async def release(self, admission: Admission) -> None:
        """The trial ended (its ``loop_lag``, if any, is what it saw)."""
        lag = admission.loop_lag
        async with self._changed:
            self.active -= 1
            self.observe(admission, lag.p99 if lag is not None else None)
            self._changed.notify_all()

    def observe(self, admission: Admission, loop_lag_p99_ms: float | None) -> None:
        if loop_lag_p99_ms is None or admission.epoch != self.epoch:
            return
        if loop_lag_p99_ms > self.budget_ms:
            if self.limit > 1:
                logger.info("loop lag p99 %.1f ms over the %g ms budget: concurrency %d -> %d",
                            loop_lag_p99_ms, self.budget_ms, self.limit, self.limit // 2)
                self.limit = max(1, self.limit // 2)
                self.lowest = min(self.lowest, self.limit)
                self.decreases += 1
                self._advance()
            return
        self._within += 1
        if self._within >= self.limit and self.limit < self.ceiling:
            self.limit += 1
            self._advance()

    def _advance(self) -> None:
        self.epoch += 1
        self._within = 0


@contextlib.asynccontextmanager
async def admitted(budget: LagBudget | None) -> AsyncIterator[Admission]:
    """A slot under ``budget`` for one trial (no budget: at once); the runner sets the slot's
    ``loop_lag`` when the trial ends."""
    if budget is None:
        yield Admission(0)
        return
    admission = await budget.acquire()
    try:
        yield admission
    finally:
        await budget.release(admission)
