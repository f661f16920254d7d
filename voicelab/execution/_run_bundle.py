"""A run's bundle and report: the bundle created, or a resumed run's reopened; the report while
the run runs; and what the run's progress decides in it: why planned trials did not start
(``--fail-fast``), and the cost budget trials are admitted against."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._location import as_local_path
from .._validate import RunPlan
from ..artifacts import BudgetState, Redacts, RunFolder, RunReport
from ..config import LoadedRun
from ..cost import CostBudget
from ..runner import FailFast, TrialResult, estimate_from_config, new_run_id, utc_now
from ._resume import ResumePoint
from ._run_settings import RunSettings

logger = logging.getLogger(__name__)

#: While running, run-report.json is refreshed at most this often (and always at the end, Ctrl-C
#: included); every trial folder is complete on disk as soon as its trial ends.
RUNNING_REPORT_INTERVAL_SECONDS = 1.0


@dataclass(frozen=True)
class BundlePlace:
    """Where a run writes and what its report says of its start."""

    folder: RunFolder[RunReport]
    #: the artifacts folder the bundle is in (its speech cache too)
    root: Path
    run_id: str
    started: str
    label: str | None
    #: a resumed run's earlier resumptions and this one
    resumed_at: list[str] = field(default_factory=list)


def open_bundle(loaded: LoadedRun, options: RunSettings, point: ResumePoint | None,
                folder: RunFolder[RunReport] | None) -> BundlePlace:
    """A new run's bundle, created; a resumed run's (``point``), reopened by the caller as
    ``folder``, keeps its id, start and label."""
    if point is not None:
        assert folder is not None
        report = point.report
        return BundlePlace(folder, folder.path.parent, report.run_id, report.started_at,
                           options.label if options.label is not None else report.label,
                           [*report.resumed_at, utc_now()])
    configured = options.artifacts_dir if options.artifacts_dir is not None \
        else loaded.run.artifacts_dir
    root = as_local_path(configured)
    run_id = options.run_id or new_run_id()
    created = RunFolder.create(
        root, options.bundle_name or run_id, command="run", report=RunReport,
        source=None if options.artifacts_dir is not None else loaded.run_path,
        access=loaded.run.retention.access)
    return BundlePlace(created, root, run_id, utc_now(), options.label)


def stopped_early(fail_fast: FailFast | None, *, not_run: int, interrupted: bool) -> str | None:
    """Why ``not_run`` planned trials did not start (``--fail-fast``), once it stopped them."""
    if fail_fast is None or not fail_fast.stopped or not_run <= 0 or interrupted:
        return None
    return fail_fast.message(not_run)


class RunCosts:
    """A run's trials admitted against its cost budget (``None``: no budget, every trial
    starts): each admitted at its expected cost, which its actual cost then replaces."""

    def __init__(self, budget: CostBudget | None, plan: RunPlan, *, estimate: float | None):
        self.budget = budget
        self.plan = plan
        #: one trial's cost estimated from the configuration (made when first needed)
        self._estimate = estimate
        #: the budget's ticket of each trial in flight, by trial number
        self._tickets: dict[int, int | None] = {}
        #: the budget kept a trial from starting
        self.stopped = False

    async def admit(self, index: int, results: Sequence[TrialResult], *,
                    waiting: Callable[[], None]) -> bool:
        """Whether trial ``index`` may start (``waiting``: called while it waits for the
        trials in flight to settle); False once the budget is spent."""
        if self.budget is None:
            return True
        ticket = await self.budget.admit(lambda: self.expected(results), waiting=waiting)
        if ticket is None:
            if not self.stopped:
                logger.warning("budget: trial-%03d and the trials after it are not started",
                               index)
            self.stopped = True
            return False
        self._tickets[index] = ticket
        return True

    def expected(self, results: Sequence[TrialResult]) -> float | None:
        """What the next trial is expected to cost: the mean known cost of ``results`` so
        far, else the estimate from the run's configuration."""
        known = [r.report.cost.total for r in results
                 if r.report.cost is not None and r.report.cost.total is not None]
        if known:
            return math.fsum(known) / len(known)
        if self._estimate is None:
            loaded = self.plan.loaded
            self._estimate = estimate_from_config(
                loaded, trials=1, pricing=loaded.run.pricing, speech_cls=self.plan.speech_cls,
                output_transcripts=self.plan.abilities.capabilities["output_transcripts"],
                endpoint_settings=self.plan.endpoint_settings).per_trial
        return self._estimate

    def settle(self, result: TrialResult) -> None:
        if self.budget is not None:
            self.budget.settle(self._tickets.pop(result.report.trial, None), result.report.cost)

    def state(self, *, planned: int, done: int) -> BudgetState | None:
        """The budget's state for the report (the trials it held back, once it stopped)."""
        if self.budget is None:
            return None
        held_back = planned - done if self.stopped else 0
        return self.budget.state(not_started=max(0, held_back))


class RunningReport:
    """``run-report.json`` while the run runs: written when it starts, then refreshed at most
    every :data:`RUNNING_REPORT_INTERVAL_SECONDS` as trials settle (never two at once)."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._last = 0.0

    def first(self, folder: RunFolder[RunReport], report: RunReport, *,
              words: Redacts) -> str | None:
        """The report a run starts with; the problem writing it, if any."""
        self._last = asyncio.get_running_loop().time()
        return folder.write_report(report, words=words)

    async def refresh(self, folder: RunFolder[RunReport], build: Callable[[], RunReport], *,
                      words: Redacts) -> None:
        """The report again, when it is due and no refresh is in progress."""
        now = asyncio.get_running_loop().time()
        if now - self._last < RUNNING_REPORT_INTERVAL_SECONDS or self._lock.locked():
            return
        self._last = now
        async with self._lock:
            with contextlib.suppress(OSError):  # the final report says it all
                # built in the thread too: its statistics cost O(trials), and the loop
                # keeps stamping arrivals meanwhile (results only grow)
                await asyncio.to_thread(lambda: folder.write_report(build(), words=words))
