"""Running a sweep (`voice-evaluator sweep`): every cell of a matrix plan is a run.

Every cell is an ordinary run bundle under the sweep folder (``<cell id>/trial-NNN``), run by
:func:`._arun.arun` on one executor shared by every cell; one semaphore bounds the conversations
in flight across the whole matrix, and ``matrix-report.json`` aggregates the cells
(:func:`voicelab.runner.matrix_report`). A sweep whose folder is in a store runs the same way
into a local staging folder, published as it goes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from .._location import is_url
from ..artifacts import (
    RUN_REPORT,
    JudgeCalibration,
    LoadProfile,
    MatrixReport,
    RunFolder,
    StageOutcome,
)
from ..config import LoadedRun, LoadedSuite
from ..cost import CostBudget
from ..errors import ConfigError
from ..runner import (
    BUDGET_REASON,
    FailFast,
    MatrixCellPlan,
    MatrixOutcome,
    MatrixPlan,
    RunInterrupted,
    RunOutcome,
    TrialResult,
    TrialSelection,
    conclude_cells,
    matrix_cell,
    matrix_report,
    new_run_id,
    plan_matrix,
    read_matrix_report,
    runs_redactor,
    stage_not_run,
    stage_outcome,
    strictest_access,
    utc_now,
)
from ._arun import arun_wired, check_calibrations, cost_budget, outside_a_loop
from ._load_profile import StartSchedule, load_profile, resumed_profile
from ._observer import RunObserver
from ._options import RunKeywords, RunOptions, RunWiring, options_from_keywords
from ._protocol import Executor, scoring_mode
from ._registry import choose_executor
from ._resume import check_suite_hash, read_run_report
from ._resume_overrides import resumed_overrides
from ._staging import open_stage, published, store_target


def arun_matrix(suite: str | Path | LoadedSuite | MatrixPlan, options: RunOptions | None = None,
                **keywords: Unpack[RunKeywords]) -> Coroutine[object, None, MatrixOutcome]:
    """Run every cell of a suite: ``await voicelab.arun_matrix(suite, options)`` (awaitable in
    a notebook); writes matrix-report.json. ``options`` (:class:`voicelab.RunOptions`) are
    :func:`voicelab.arun`'s; the keyword form still works for one release and warns.

    ``resume`` is a sweep folder of this suite to finish: each cell resumes its bundle (see
    :func:`voicelab.arun`), a cell that never started runs; the trials per cell default to the
    sweep's. Every cell's suite hash is checked before anything runs.

    ``executor``, ``workers`` and ``scheduler``: one executor (its worker processes or
    cluster) serves every cell. ``retry_inconclusive``, ``lag_budget_ms``, ``scoring`` and
    ``observers`` are each cell's run's.

    ``trials`` is per cell. ``only`` (``--only``) runs the cells and trials an expression selects
    (:meth:`voicelab.runner.MatrixPlan.select`); ``fail_fast`` (``--fail-fast``) counts the
    trials that did not pass across the whole matrix and starts none once it is reached.
    ``max_cost`` (default: the suite's ``budget:``) is one budget for every cell: no trial of
    any cell starts once it could be passed (docs/cost.md). A suite with ``stages:`` runs its
    matrix once per stage, in order, and stops at the first stage whose gate fails (or that the
    budget cut short): the stages after it never start.
    """
    chosen, wiring = options_from_keywords(options, keywords, call="voicelab.arun_matrix")
    return _arun_matrix(suite, chosen, shared_fail_fast=wiring.fail_fast)


async def _arun_matrix(suite: str | Path | LoadedSuite | MatrixPlan, options: RunOptions, *,
                       shared_fail_fast: FailFast | None) -> MatrixOutcome:
    """:func:`arun_matrix`'s sweep (``shared_fail_fast``: a counter the keyword form gave)."""
    trials, overrides, resume = options.trials, options.overrides, options.resume
    scoring_mode(options.scoring)  # every cell's: refused before the sweep folder exists
    selection = TrialSelection.parse(options.only)
    if not selection.everything and resume is not None:
        raise ConfigError("a resumed sweep runs the trials it planned: --only is for a new "
                          "sweep", source="CLI", key="--only")
    stop = shared_fail_fast if shared_fail_fast is not None else (
        None if options.fail_fast is None else FailFast(options.fail_fast))
    folder = _reopened(resume)  # a local sweep to finish: locked, its report read once
    try:
        previous = folder.previous if folder is not None else \
            read_matrix_report(resume) if resume is not None else None
        if previous is not None and not isinstance(suite, MatrixPlan):
            trials = previous.trials_per_cell if trials is None else trials
            overrides = resumed_overrides(previous.overrides, overrides, bundle=str(resume))
        plan = suite if isinstance(suite, MatrixPlan) else plan_matrix(
            suite, trials=trials, concurrency=options.concurrency, overrides=overrides)
        if not selection.everything and plan.selected_trials is None:
            plan = plan.select(selection)
        for one in plan.cells:
            check_calibrations(one.plan.loaded, options.calibrations)
        sweep = _Sweep(plan, on_trial_done=options.on_trial_done, label=options.label,
                       calibrations=tuple(options.calibrations),
                       rerun_failed=options.rerun_failed, executor=options.executor,
                       workers=options.workers, scheduler=options.scheduler,
                       retry_inconclusive=options.retry_inconclusive,
                       observers=tuple(options.observers), fail_fast=stop,
                       budget=_sweep_budget(plan, options.max_cost),
                       lag_budget_ms=options.lag_budget_ms, scoring=options.scoring,
                       profile=None if options.ramp_seconds is None
                       and options.arrival_rate is None and options.max_concurrency is None
                       else load_profile(concurrency=plan.concurrency,
                                         ramp_seconds=options.ramp_seconds,
                                         arrival_rate=options.arrival_rate,
                                         max_concurrency=options.max_concurrency,
                                         trials=plan.conversations))
    except BaseException:
        if folder is not None:
            folder.close()
        raise
    artifacts_dir, run_id = options.artifacts_dir, options.run_id
    spec = plan.suite.suite
    configured = artifacts_dir if artifacts_dir is not None else (
        spec.artifacts_dir or plan.suite.path.parent / "artifacts")
    given_at = None if artifacts_dir is not None else plan.suite.path
    store = store_target(configured, resume, source=given_at)
    if store is None:
        return await sweep.here(configured, folder=folder, run_id=run_id,
                                source=None if artifacts_dir is not None else plan.suite.path)
    # the sweep lives in a store: it writes a local staging folder, published as it goes
    root_location, to_resume = store
    run_id = run_id or new_run_id()
    stage = await asyncio.to_thread(open_stage, root_location, resume=to_resume,
                                    latest=None if to_resume else run_id, source=given_at)
    return await published(stage, sweep.here(stage.staging, resume=stage.resume,
                                              run_id=run_id, source=None))


def _reopened(resume: str | Path | None) -> RunFolder[MatrixReport] | None:
    """The local sweep folder to finish, reopened for ``sweep`` (None for none, or for a sweep
    in a store: its staged copy is reopened once downloaded)."""
    if resume is None or is_url(resume):
        return None
    return RunFolder.reopen(resume, command="sweep", report=MatrixReport)


def _sweep_budget(plan: MatrixPlan, max_cost: float | None) -> CostBudget | None:
    """One budget for the sweep (``max_cost``, else the suite's ``budget:``), in the price
    table's currency every cell must share."""
    spec = plan.suite.suite
    source = None if max_cost is not None else plan.suite.path
    amount = max_cost if max_cost is not None else (
        spec.budget.max_cost if spec.budget is not None else None)
    if amount is None:
        return None
    budgets = [cost_budget(one.plan.loaded, amount, source=source,
                           key="max_cost" if source is None else "budget.max_cost")
               for one in plan.cells]
    currencies = sorted({b.currency or "" for b in budgets})
    if len(currencies) > 1:
        raise ConfigError(f"one budget cannot count several currencies "
                          f"({', '.join(currencies)}): price every cell in one (the suite's "
                          f"pricing:)", source=plan.suite.path, key="pricing")
    return budgets[0]


def _profile_kept(plan: MatrixPlan, resumed: Path | None) -> LoadProfile:
    """The profile of a sweep the caller gave none: a resumed sweep's own (recorded in its
    cells' run reports), else the default for its concurrency."""
    started = [] if resumed is None else [resumed / one.cell_id for one in plan.cells
                                          if (resumed / one.cell_id / RUN_REPORT).is_file()]
    for cell in started:
        recorded = read_run_report(cell).load_profile
        if recorded is not None:
            return resumed_profile(recorded, concurrency=plan.concurrency,
                                   trials=plan.conversations)
    return load_profile(concurrency=plan.concurrency, trials=plan.conversations)


def _schedules(plan: MatrixPlan, profile: LoadProfile) -> dict[str, StartSchedule]:
    """The start schedule of each cell: one for the sweep, or one per stage (a later stage
    starts its trials under the profile afresh, not behind the arrivals of the first)."""
    groups = [stage.cells for stage in plan.stages] or [plan.cells]
    schedules: dict[str, StartSchedule] = {}
    for cells in groups:
        schedule = StartSchedule(profile, trials=sum(plan.trials_of(one) for one in cells))
        schedules.update((one.cell_id, schedule) for one in cells)
    return schedules


class CellProgress:
    """A sweep's progress: the trials done in every cell (a resumed cell starts from the trials
    it has), reported as one count to ``on_trial_done``."""

    def __init__(self, on_trial_done: Callable[[TrialResult, int, int], None] | None, *,
                 total: int):
        self.on_trial_done = on_trial_done
        self.total = total
        self._done_by_cell: dict[str, int] = {}

    def of(self, cell_id: str) -> Callable[[TrialResult, int, int], None]:
        """The progress callback of the cell's run."""
        def progress(result: TrialResult, cell_done: int, _total: int) -> None:
            self._done_by_cell[cell_id] = cell_done
            if self.on_trial_done is not None:
                self.on_trial_done(result, sum(self._done_by_cell.values()), self.total)

        return progress


@dataclass(frozen=True)
class _Sweep:
    """What the caller chose for a sweep, the same for every cell."""

    plan: MatrixPlan
    on_trial_done: Callable[[TrialResult, int, int], None] | None
    label: str | None
    calibrations: Sequence[JudgeCalibration]
    rerun_failed: bool
    executor: Any
    workers: int | None
    scheduler: str | None
    retry_inconclusive: int
    observers: Sequence[RunObserver] = ()
    fail_fast: FailFast | None = None
    budget: CostBudget | None = None
    lag_budget_ms: float | None = None
    scoring: str = "process"
    #: the sweep's load profile, when the caller gave one (else a resumed sweep's own, or the
    #: default): every cell starts its trials from one schedule
    profile: LoadProfile | None = None

    async def here(self, configured: str | Path, *,
                   folder: RunFolder[MatrixReport] | None = None,
                   resume: str | Path | None = None, run_id: str | None,
                   source: Path | None) -> MatrixOutcome:
        """The sweep into a new folder of ``configured`` (a local folder), or the local sweep
        folder to finish: ``folder`` reopened by the caller, else ``resume`` reopened here."""
        if folder is None and resume is not None:
            folder = _reopened(resume)
        if folder is None:
            run_id = run_id or new_run_id()
            folder = RunFolder.create(configured, run_id, command="sweep", report=MatrixReport,
                                      source=source, access=strictest_access(self._runs))
        with folder:  # one writer of the sweep folder at a time, released however it ends
            return await self._in(folder, run_id=run_id)

    async def _in(self, folder: RunFolder[MatrixReport], *, run_id: str | None
                  ) -> MatrixOutcome:
        """The sweep in its open ``folder``: a reopened one continues its run id, label and
        start, every started cell's suite hash checked before any cell runs."""
        plan, label, previous = self.plan, self.label, folder.previous
        run_dir = folder.path
        resumed_at: list[str] = []
        if previous is not None:
            run_id = previous.run_id
            for one in plan.cells:  # refuse before anything runs
                if (run_dir / one.cell_id / RUN_REPORT).is_file():
                    check_suite_hash(read_run_report(run_dir / one.cell_id), one.plan.loaded,
                                     bundle=run_dir / one.cell_id)
            label = label if label is not None else previous.label
            started = previous.started_at
            resumed_at = [*previous.resumed_at, utc_now()]
        else:
            started = utc_now()
        assert run_id is not None
        owned, pool = False, None
        try:
            pool, owned = choose_executor(self.executor, workers=self.workers,
                                          scheduler=self.scheduler,
                                          parallel=min(plan.concurrency, plan.conversations))
            if owned:
                await pool.start()
            return await self._cells(
                pool, run_id=run_id, folder=folder, started=started, label=label,
                resumed_at=resumed_at, written=folder.link_latest)
        finally:
            if owned and pool is not None:
                await pool.close()

    @property
    def _runs(self) -> list[LoadedRun]:
        return [one.plan.loaded for one in self.plan.cells]

    async def _cells(self, executor: Executor, *, run_id: str, folder: RunFolder[MatrixReport],
                     started: str, label: str | None, resumed_at: list[str],
                     written: Callable[[], None] | None) -> MatrixOutcome:
        plan, previous, run_dir = self.plan, folder.previous, folder.path
        profile = self.profile or _profile_kept(plan, run_dir if previous is not None else None)
        semaphore = asyncio.Semaphore(profile.max_concurrency)
        schedules = _schedules(plan, profile)
        outcomes: list[RunOutcome] = []
        stages: list[StageOutcome] = []
        progress = CellProgress(self.on_trial_done, total=plan.conversations)

        def report(status: str) -> MatrixReport:
            budget = self.budget
            held_back = plan.conversations - sum(o.report.executed_trials for o in outcomes)
            return matrix_report(
                plan, run_id=run_id, run_dir=run_dir, outcomes=outcomes, started=started,
                status=status, label=label, resumed_at=resumed_at,
                stages=[*stages, *(stage_not_run(later, because="not reached yet")
                                   for later in plan.stages[len(stages):])]
                if status == "running" else stages,
                budget=budget.state(not_started=max(0, held_back) if budget.stopped else 0)
                if budget is not None else None)

        write_errors: list[str] = []
        words = runs_redactor(self._runs)
        running_error = folder.write_report(report("running"), words=words)
        if running_error:
            write_errors.append(running_error)

        async def cell(one: MatrixCellPlan) -> None:
            # run ids stay unique across sweeps (labels join on them); folders are named by cell
            cell_dir = run_dir / one.cell_id
            started_before = previous is not None and (cell_dir / RUN_REPORT).is_file()
            try:
                outcome = await arun_wired(one.plan, RunOptions(
                    trials=plan.trials_of(one), artifacts_dir=run_dir,
                    run_id=f"{run_id}__{one.cell_id}", on_trial_done=progress.of(one.cell_id),
                    label=label, calibrations=self.calibrations,
                    resume=cell_dir if started_before else None,
                    rerun_failed=self.rerun_failed, executor=executor,
                    retry_inconclusive=self.retry_inconclusive, observers=self.observers,
                    only=plan.only or (), lag_budget_ms=self.lag_budget_ms,
                    scoring=self.scoring), RunWiring(
                    semaphore=semaphore, schedule=schedules[one.cell_id], link_latest=False,
                    bundle_name=one.cell_id,
                    fail_fast=self.fail_fast, budget=self.budget))
            except RunInterrupted as stopped:
                outcomes.append(stopped.outcome)
                raise
            outcomes.append(outcome)

        tasks: list[asyncio.Task[None]]
        if not plan.stages:
            tasks = [asyncio.create_task(cell(one)) for one in plan.cells]
        else:
            tasks = [asyncio.create_task(self._stages(cell, outcomes, stages))]
        return await conclude_cells(tasks, outcomes, run_dir=run_dir, write_errors=write_errors,
                                    report=report, words=words, written=written)

    async def _stages(self, cell: Callable[[MatrixCellPlan], Coroutine[Any, Any, None]],
                      outcomes: list[RunOutcome], stages: list[StageOutcome]) -> None:
        """The stages in order, each stage's cells at once; the first whose gate fails (or
        that the budget cut short) stops the sweep: no cell of a later stage starts."""
        plan = self.plan
        for index, stage in enumerate(plan.stages):
            tasks = [asyncio.create_task(cell(one)) for one in stage.cells]
            try:
                results = await asyncio.gather(*tasks, return_exceptions=True)
            except asyncio.CancelledError:
                await asyncio.gather(*tasks, return_exceptions=True)  # let them write
                raise
            for result in results:
                if isinstance(result, BaseException):
                    raise result
            ids = {one.cell_id for one in stage.cells}
            cells = [matrix_cell(o, bundle_path=str(o.bundle_path))
                     for o in outcomes if Path(o.bundle_path).name in ids]
            stopped = self.budget is not None and self.budget.stopped
            outcome = stage_outcome(stage, cells, plan.statistics, budget_stopped=stopped)
            stages.append(outcome)
            if outcome.status != "passed":
                because = (f"{BUDGET_REASON}: the sweep's budget stopped at stage "
                           f"{stage.name}" if stopped else
                           f"stage {stage.name} did not pass its gate ({outcome.reason})")
                stages.extend(stage_not_run(later, because=because)
                              for later in plan.stages[index + 1:])
                return


def run_matrix(suite: str | Path | LoadedSuite | MatrixPlan, options: RunOptions | None = None,
               **keywords: Unpack[RunKeywords]) -> MatrixOutcome:
    """Synchronous :func:`arun_matrix` for scripts; the keyword form warns, as for it."""
    chosen, wiring = options_from_keywords(options, keywords, call="voicelab.run_matrix")
    outside_a_loop("arun_matrix")
    return asyncio.run(_arun_matrix(suite, chosen, shared_fail_fast=wiring.fail_fast))
