"""A hard stop before a run or a sweep spends too much (``--max-cost``, a suite's ``budget:``).

A trial is admitted only while what was spent (the known amounts of the trials that settled),
plus what the trials in flight are expected to cost, plus this trial's expected cost, stays
within the budget; a trial that does not fit while others are in flight waits for them to
settle (their real cost replaces the expectation) before it is decided. Once one is refused,
no trial starts any more (the trials in flight finish): a budget is a stop, not a scheduler
that goes looking for cheaper cells. A trial's expected cost is its run's measured mean once
some of its trials have settled, else the run's estimate from its configuration; the caller
passes it to :meth:`CostBudget.admit`. What a budget counts is an expectation while trials are
in flight: the spend can pass it by what those expectations missed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

from ..artifacts import BudgetState, TrialCost

logger = logging.getLogger(__name__)


class CostBudget:
    """One budget, shared by the trials of a run or by every cell of a sweep (one event loop)."""

    def __init__(self, max_cost: float, *, currency: str | None = None):
        if not max_cost > 0:
            raise ValueError(f"a budget must be more than 0, got {max_cost!r}")
        self.max_cost = float(max_cost)
        self.currency = currency
        self.spent = 0.0
        #: a trial was refused: no more start
        self.stopped = False
        self._in_flight: dict[int, float] = {}
        self._tickets = itertools.count(1)
        self._settled = asyncio.Event()  # a trial in flight settled

    @property
    def committed(self) -> float:
        """What was spent and what the trials in flight are expected to spend."""
        return self.spent + sum(self._in_flight.values())

    async def admit(self, expected: Callable[[], float | None], *,
                    waiting: Callable[[], None] | None = None) -> int | None:
        """A ticket for a trial expected to cost ``expected()`` (None: not known, counted as
        nothing), or None when starting it would pass the budget (the budget then stops).

        While trials are in flight their cost is an expectation: a trial that does not fit
        waits for the next of them to settle (what it really cost, and a better expectation,
        may make room) and is refused only when it does not fit with none in flight;
        ``waiting`` is told when it starts to wait (nothing starts meanwhile)."""
        while not self.stopped:
            amount = expected() or 0.0
            if self.committed + amount <= self.max_cost:
                ticket = next(self._tickets)
                self._in_flight[ticket] = amount
                return ticket
            if not self._in_flight:
                logger.warning("budget: %.6g spent; a trial expected to cost %.6g would pass "
                               "the budget of %.6g: no new trial starts", self.spent, amount,
                               self.max_cost)
                self.stopped = True
                break
            self._settled.clear()
            if waiting is not None:
                waiting()
            await self._settled.wait()
        return None

    def settle(self, ticket: int | None, cost: TrialCost | None) -> None:
        """The trial of ``ticket`` ended: what it really cost replaces its expectation (its
        known amounts; a trial that left no cost spent nothing known)."""
        if ticket is not None:
            self._in_flight.pop(ticket, None)
        if cost is not None and cost.total is not None:
            self.spent += cost.total
        self._settled.set()

    def state(self, *, not_started: int) -> BudgetState:
        """The budget as a report says it, with the ``not_started`` trials it held back."""
        return BudgetState(max_cost=self.max_cost, currency=self.currency,
                           spent=round(self.spent, 9), trials_not_started=not_started)
