"""``arun`` / ``run``: a run config's seeded trials, from the configuration to the bundle.

The configuration is checked (counts, calibrations, a bundle to resume and its lock) before
anything runs; the executor is chosen (:mod:`._registry`) and started, so an unreachable
scheduler is refused before the bundle exists; then a :class:`._run.Run` runs the trials. A run
whose bundle lives in a store runs the same way into a local staging folder, published as it
goes (:func:`._staging.published`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._limits import MAX_RETRIES
from .._location import is_url
from .._validate import RunPlan, validate_run
from ..artifacts import JudgeCalibration, RemoteLocation, ReplayOrigin, RunFolder, RunReport
from ..config import LoadedRun, load_run
from ..cost import CostBudget
from ..errors import ConfigError
from ..runner import (
    MAX_CONCURRENCY,
    MAX_TRIALS,
    FailFast,
    RunOutcome,
    TrialResult,
    TrialSelection,
    bounded_count,
    new_run_id,
)
from ._observer import RunObserver
from ._protocol import scoring_mode
from ._registry import choose_executor
from ._resume import aresume_point, read_run_report
from ._resume_overrides import resumed_overrides
from ._run import Run, RunOptions
from ._staging import open_stage, published, store_target


def cost_budget(loaded: LoadedRun, max_cost: float, *, source: str | Path | None = None,
                key: str = "max_cost") -> CostBudget:
    """A budget of ``max_cost`` for ``loaded``'s trials: refused (ConfigError) without a
    price table, where nothing could be counted against it."""
    pricing = loaded.run.pricing
    if pricing is None:
        raise ConfigError("a budget needs the prices of what the trials use: give the run a "
                          "pricing: table or pricing_path: (docs/cost.md)", source=source,
                          key=key)
    if isinstance(max_cost, bool) or not isinstance(max_cost, int | float) \
            or not math.isfinite(max_cost) or max_cost <= 0:
        raise ConfigError(f"must be an amount above 0, got {max_cost!r}", source=source,
                          key=key)
    return CostBudget(float(max_cost), currency=pricing.currency)


def check_calibrations(loaded: LoadedRun, calibrations: Sequence[JudgeCalibration]) -> None:
    """Each calibration must be of a judge the run runs (its ``criterion`` is the judge name)."""
    quality = loaded.run.quality_evaluation
    judges = [] if quality is None else [
        *(judge.name for judge in quality.custom_judges),
        *(evaluator.type for evaluator in quality.azure_evaluators)]
    for calibration in calibrations:
        if calibration.criterion not in judges:
            raise ConfigError(f"calibrates the judge {calibration.criterion!r}, which this run "
                              f"does not run (judges: {', '.join(judges) or 'none'})",
                              source=calibration.source, key="criterion")


async def arun(run: RunPlan | LoadedRun | str | Path, *, trials: int | None = None,
               concurrency: int | None = None, artifacts_dir: str | Path | None = None,
               overrides: Sequence[str] = (), run_id: str | None = None,
               on_trial_done: Callable[[TrialResult, int, int], None] | None = None,
               semaphore: asyncio.Semaphore | None = None, link_latest: bool = True,
               bundle_name: str | None = None, label: str | None = None,
               calibrations: Sequence[JudgeCalibration] = (),
               resume: str | Path | None = None, rerun_failed: bool = False,
               replay_of: ReplayOrigin | None = None,
               executor: Any = None, workers: int | None = None,
               scheduler: str | None = None,
               lag_budget_ms: float | None = None, scoring: str = "process",
               retry_inconclusive: int = 1,
               observers: Sequence[RunObserver] = (),
               only: Sequence[str] | str | None = None,
               fail_fast: int | FailFast | None = None,
               max_cost: float | None = None, budget: CostBudget | None = None
               ) -> RunOutcome:
    """Run seeded trials and write the bundle. Awaitable from a notebook's running event loop.

    Raises ConfigError before any trial when the configuration is invalid (including an
    artifacts folder that cannot be created). Trial execution failures do not raise: they are
    in the report (``exit_code`` 4). Cancellation raises :class:`RunInterrupted` once the
    evidence gathered so far is written.

    The keywords are those of :class:`._run.RunOptions`, each described there. ``max_cost``
    (in the currency of the run's ``pricing:``, which it needs): no trial starts once what
    was spent, plus the expected cost of the trials in flight and of the next, would pass it;
    the trials in flight finish, the report says ``stopped: budget`` and the trials not
    started count as not run (exit code 4; docs/cost.md).

    Nothing process-wide changes (garbage collection, the GIL switch interval) unless the
    caller opted in with :func:`voicelab.execution.tuned_process`, as the command line does.
    """
    scoring_mode(scoring)
    selection = TrialSelection.parse(only)  # a bad expression is refused before anything
    if not selection.everything and resume is not None:
        raise ConfigError("a resumed run runs the trials its bundle planned: --only is for a "
                          "new run", source="CLI", key="--only")
    stop = fail_fast if isinstance(fail_fast, FailFast) or fail_fast is None \
        else FailFast(fail_fast)
    folder = _reopened(resume)  # a local bundle to resume: locked, its report read once
    try:
        if resume is not None and not isinstance(run, RunPlan | LoadedRun):
            overrides = _resumed_overrides(resume, overrides, folder)
        plan = _validated_plan(run, overrides)
        check_calibrations(plan.loaded, calibrations)
        if budget is None and max_cost is not None:
            budget = cost_budget(plan.loaded, max_cost)
    except BaseException:
        if folder is not None:
            folder.close()
        raise
    loaded = plan.loaded
    options = RunOptions(
        trials=trials, concurrency=concurrency, artifacts_dir=artifacts_dir,
        overrides=tuple(overrides), run_id=run_id, on_trial_done=on_trial_done,
        semaphore=semaphore, link_latest=link_latest, bundle_name=bundle_name, label=label,
        calibrations=tuple(calibrations), resume=resume, rerun_failed=rerun_failed,
        replay_of=replay_of, executor=executor, workers=workers, scheduler=scheduler,
        lag_budget_ms=lag_budget_ms, scoring=scoring, retry_inconclusive=retry_inconclusive,
        observers=tuple(observers), only=selection.expressions, fail_fast=stop,
        budget=budget)
    configured = artifacts_dir if artifacts_dir is not None else loaded.run.artifacts_dir
    given_at = None if artifacts_dir is not None else loaded.run_path
    store = store_target(configured, resume, source=given_at)
    if store is None:
        return await _run_here(plan, options, folder)
    return await _run_into_store(plan, options, store, given_at=given_at)


def _validated_plan(run: RunPlan | LoadedRun | str | Path, overrides: Sequence[str]
                    ) -> RunPlan:
    """``run`` checked (:func:`validate_run`), loaded first when it is a file."""
    if isinstance(run, RunPlan):
        return run
    return validate_run(run if isinstance(run, LoadedRun) else load_run(run, overrides=overrides))


async def _run_into_store(plan: RunPlan, options: RunOptions,
                          store: tuple[RemoteLocation, RemoteLocation | None], *,
                          given_at: Path | None) -> RunOutcome:
    """The run of a bundle that lives in a store: into a local staging folder, published as
    it goes."""
    root_location, to_resume = store
    run_id = options.run_id or new_run_id()
    latest = (options.bundle_name or run_id) if options.link_latest and to_resume is None \
        else None
    stage = await asyncio.to_thread(open_stage, root_location, resume=to_resume,
                                    latest=latest, source=given_at)
    staged = dataclasses.replace(
        options, artifacts_dir=stage.staging if stage.resume is None else None,
        resume=stage.resume, run_id=run_id)
    return await published(stage, _run_here(plan, staged))


def _reopened(resume: str | Path | None) -> RunFolder[RunReport] | None:
    """The local bundle to resume, reopened for ``run --resume`` (None for none, or for a
    bundle in a store: its staged copy is reopened once downloaded)."""
    if resume is None or is_url(resume):
        return None
    return RunFolder.reopen(resume, command="run --resume", report=RunReport)


async def _run_here(plan: RunPlan, options: RunOptions,
                    folder: RunFolder[RunReport] | None = None) -> RunOutcome:
    """The run into a local folder (or a local bundle to resume: ``folder`` when the caller
    reopened it); a reopened folder is closed however the run ends."""
    if options.resume is not None and folder is None:  # a staged copy of a store's bundle
        folder = _reopened(options.resume)
    try:
        return await _run_in(plan, options, folder)
    finally:
        if folder is not None:
            folder.close()


async def _run_in(plan: RunPlan, options: RunOptions,
                  folder: RunFolder[RunReport] | None) -> RunOutcome:
    """The run counted (a resumed one from its ``folder``'s report and trials), its executor
    chosen and started, then run; the caller closes ``folder``."""
    loaded = plan.loaded
    point = None
    trials = options.trials
    if folder is not None:  # locked before its trials are counted: one writer at a time
        point = await aresume_point(folder, loaded, trials=trials,
                                    rerun_failed=options.rerun_failed)
        trials = point.planned
    trial_count = bounded_count(trials if trials is not None else loaded.run.trials, low=1,
                                high=MAX_TRIALS, key="trials",
                                source=None if trials is not None else loaded.run_path)
    concurrency = options.concurrency
    parallel = bounded_count(concurrency if concurrency is not None else loaded.run.concurrency,
                             low=1, high=MAX_CONCURRENCY, key="concurrency",
                             source=None if concurrency is not None else loaded.run_path)
    pending: Sequence[int] = point.pending if point is not None else range(1, trial_count + 1)
    selection = TrialSelection.parse(options.only)
    if not selection.everything:
        pending = selection.trials(
            scenario=loaded.scenario.id, persona=loaded.persona.name,
            environment=loaded.environment.name or "quiet", count=trial_count,
            cell_id=options.bundle_name)
        if not pending:
            raise selection.nothing_selected(f"{loaded.scenario.id} / {loaded.persona.name} / "
                                             f"{loaded.environment.name or 'quiet'}")
        trial_count = len(pending)  # the planned trials are those chosen
    executor, owned = None, False
    try:
        executor, owned = choose_executor(options.executor, workers=options.workers,
                                          scheduler=options.scheduler,
                                          parallel=min(parallel, max(1, len(pending))))
        if owned:
            await executor.start()  # an unreachable scheduler is refused before the bundle exists
        retries = bounded_count(options.retry_inconclusive, low=0, high=MAX_RETRIES,
                                key="retry_inconclusive", source=None)
        return await Run(plan, options, executor, planned=trial_count, parallel=parallel,
                         pending=pending, point=point, folder=folder, retries=retries).execute()
    finally:
        if owned and executor is not None:
            await executor.close()


def _resumed_overrides(resume: str | Path, given: Sequence[str],
                       folder: RunFolder[RunReport] | None) -> list[str]:
    """The run's recorded --set overrides (from the reopened ``folder``'s report, else the
    store's), with the given ones (:mod:`._resume_overrides`)."""
    report = folder.previous if folder is not None and folder.previous is not None \
        else read_run_report(resume)
    return resumed_overrides(report.overrides, given, bundle=str(resume))


def run_sync(coroutine_function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``coroutine_function(*args, **kwargs)`` from synchronous code (scripts, not notebooks)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine_function(*args, **kwargs))
    name = coroutine_function.__name__
    raise RuntimeError(f"voicelab.{name[1:]}() cannot be called from a running event loop (a "
                       f"notebook): use `await voicelab.{name}(...)`")


def run(run_config: LoadedRun | str | Path, **kwargs: Any) -> RunOutcome:
    """Synchronous wrapper of :func:`arun` for scripts (not inside a running event loop)."""
    return run_sync(arun, run_config, **kwargs)
