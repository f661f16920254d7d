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
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Unpack

from .._limits import MAX_RETRIES
from .._location import is_url
from .._validate import RunPlan, validate_run
from ..artifacts import JudgeCalibration, RemoteLocation, RunFolder, RunReport
from ..config import LoadedRun, load_run
from ..cost import CostBudget
from ..errors import ConfigError
from ..runner import (
    MAX_CONCURRENCY,
    MAX_TRIALS,
    FailFast,
    RunOutcome,
    TrialSelection,
    bounded_count,
    new_run_id,
)
from ._load_profile import RunLoad, StartSchedule, load_profile, resumed_profile
from ._options import RunKeywords, RunOptions, RunWiring, options_from_keywords
from ._protocol import scoring_mode
from ._registry import choose_executor
from ._resume import ResumePoint, aresume_point, read_run_report
from ._resume_overrides import resumed_overrides
from ._run import Run, RunSettings
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
        *(evaluator.type for evaluator in quality.azure_evaluators),
        *(judge.name for judge in quality.judges)]
    for calibration in calibrations:
        if calibration.criterion not in judges:
            raise ConfigError(f"calibrates the judge {calibration.criterion!r}, which this run "
                              f"does not run (judges: {', '.join(judges) or 'none'})",
                              source=calibration.source, key="criterion")


#: What a run is given: a checked plan, a loaded configuration, or a run file's path.
RunSource = RunPlan | LoadedRun | str | Path


def arun(config: RunSource, options: RunOptions | None = None,
         **keywords: Unpack[RunKeywords]) -> Coroutine[object, None, RunOutcome]:
    """Run seeded trials and write the bundle: ``await voicelab.arun(config, options)``,
    from a notebook's running event loop too.

    ``config`` is a run file, a :class:`voicelab.config.LoadedRun` or a checked plan;
    ``options`` (:class:`RunOptions`) what the caller chose, each field described there.
    Raises ConfigError before any trial when the configuration is invalid (including an
    artifacts folder that cannot be created). Trial execution failures do not raise: they are
    in the report (``exit_code`` 4). Cancellation raises :class:`RunInterrupted` once the
    evidence gathered so far is written.

    The keyword form (``arun(config, trials=3)``) still works for one release and warns. A
    plain function that returns the run's coroutine, so that warning names the caller's line
    even under ``asyncio.run``.

    Nothing process-wide changes (garbage collection, the GIL switch interval) unless the
    caller opted in with :func:`voicelab.execution.tuned_process`, as the command line does.
    """
    chosen, wiring = options_from_keywords(options, keywords, call="voicelab.arun")
    return arun_wired(config, chosen, wiring)


async def arun_wired(config: RunSource, options: RunOptions,
                     wiring: RunWiring | None = None) -> RunOutcome:
    """:func:`arun`, for a command that runs the run as one of its parts (a sweep's cell, a
    replay) and fixes its ``wiring``."""
    wired = wiring if wiring is not None else RunWiring()
    scoring_mode(options.scoring)
    selection = TrialSelection.parse(options.only)  # a bad expression is refused before anything
    if not selection.everything and options.resume is not None:
        raise ConfigError("a resumed run runs the trials its bundle planned: --only is for a "
                          "new run", source="CLI", key="--only")
    folder = _reopened(options.resume)  # a local bundle to resume: locked, its report read once
    try:
        overrides: Sequence[str] = options.overrides
        if options.resume is not None and not isinstance(config, RunPlan | LoadedRun):
            overrides = _resumed_overrides(options.resume, overrides, folder)
        plan = _validated_plan(config, overrides)
        check_calibrations(plan.loaded, options.calibrations)
        settings = _settings(options, wired, plan.loaded, overrides=overrides,
                             only=selection.expressions)
    except BaseException:
        if folder is not None:
            folder.close()
        raise
    loaded = plan.loaded
    artifacts_dir = options.artifacts_dir
    configured = artifacts_dir if artifacts_dir is not None else loaded.run.artifacts_dir
    given_at = None if artifacts_dir is not None else loaded.run_path
    store = store_target(configured, options.resume, source=given_at)
    if store is None:
        return await _run_here(plan, settings, folder)
    return await _run_into_store(plan, settings, store, given_at=given_at)


def _settings(options: RunOptions, wiring: RunWiring, loaded: LoadedRun, *,
              overrides: Sequence[str], only: Sequence[str]) -> RunSettings:
    """What the :class:`._run.Run` is told: the options checked and resolved (a fail-fast
    count, a cost budget: the sweep's shared ones when it wired them in) and the wiring."""
    budget = wiring.budget
    if budget is None and options.max_cost is not None:
        budget = cost_budget(loaded, options.max_cost)
    stop = wiring.fail_fast if wiring.fail_fast is not None else (
        None if options.fail_fast is None else FailFast(options.fail_fast))
    return RunSettings(
        trials=options.trials, concurrency=options.concurrency,
        artifacts_dir=options.artifacts_dir, overrides=tuple(overrides),
        run_id=options.run_id, on_trial_done=options.on_trial_done,
        semaphore=wiring.semaphore, link_latest=wiring.link_latest,
        bundle_name=wiring.bundle_name, label=options.label,
        calibrations=tuple(options.calibrations), resume=options.resume,
        rerun_failed=options.rerun_failed, replay_of=wiring.replay_of,
        executor=options.executor, workers=options.workers, scheduler=options.scheduler,
        lag_budget_ms=options.lag_budget_ms, scoring=options.scoring,
        retry_inconclusive=options.retry_inconclusive, observers=tuple(options.observers),
        only=only, fail_fast=stop, budget=budget, trial_estimate=wiring.trial_estimate,
        ramp_seconds=options.ramp_seconds, arrival_rate=options.arrival_rate,
        max_concurrency=options.max_concurrency, schedule=wiring.schedule)


def _validated_plan(run: RunSource, overrides: Sequence[str]) -> RunPlan:
    """``run`` checked (:func:`validate_run`), loaded first when it is a file."""
    if isinstance(run, RunPlan):
        return run
    return validate_run(run if isinstance(run, LoadedRun) else load_run(run, overrides=overrides))


async def _run_into_store(plan: RunPlan, options: RunSettings,
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


async def _run_here(plan: RunPlan, options: RunSettings,
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


async def _run_in(plan: RunPlan, options: RunSettings,
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
    load = _run_load(options, parallel=parallel, point=point, trials=len(pending))
    if options.schedule is None or load.profile.kind == "open":
        # an open profile's; a sweep's cell keeps its own, under the sweep's semaphore
        parallel = load.profile.max_concurrency
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
                         pending=pending, point=point, folder=folder, retries=retries,
                         load=load).execute()
    finally:
        if owned and executor is not None:
            await executor.close()


def _run_load(options: RunSettings, *, parallel: int, point: ResumePoint | None,
              trials: int) -> RunLoad:
    """The run's load profile: its sweep's schedule, the caller's choice, the resumed run's
    own (``run --resume`` keeps it unless one is given), else the default for ``parallel``."""
    if options.schedule is not None:
        return RunLoad(options.schedule)
    if options.ramp_seconds is None and options.arrival_rate is None \
            and options.max_concurrency is None and point is not None:
        profile = resumed_profile(point.report.load_profile, concurrency=parallel,
                                  trials=trials)
    else:
        profile = load_profile(concurrency=parallel, ramp_seconds=options.ramp_seconds,
                               arrival_rate=options.arrival_rate,
                               max_concurrency=options.max_concurrency, trials=trials)
    return RunLoad(StartSchedule(profile, trials=trials))


def _resumed_overrides(resume: str | Path, given: Sequence[str],
                       folder: RunFolder[RunReport] | None) -> list[str]:
    """The run's recorded --set overrides (from the reopened ``folder``'s report, else the
    store's), with the given ones (:mod:`._resume_overrides`)."""
    report = folder.previous if folder is not None and folder.previous is not None \
        else read_run_report(resume)
    return resumed_overrides(report.overrides, given, bundle=str(resume))


def run_sync(coroutine_function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``coroutine_function(*args, **kwargs)`` from synchronous code (scripts, not notebooks)."""
    outside_a_loop(coroutine_function.__name__)
    return asyncio.run(coroutine_function(*args, **kwargs))


def outside_a_loop(name: str) -> None:
    """Refuse the synchronous form of ``voicelab.<name>`` where an event loop is running (a
    notebook), naming the awaitable form to use there."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"voicelab.{name[1:]}() cannot be called from a running event loop (a "
                       f"notebook): use `await voicelab.{name}(...)`")


def run(config: RunSource, options: RunOptions | None = None,
        **keywords: Unpack[RunKeywords]) -> RunOutcome:
    """Synchronous :func:`arun` for scripts (not inside a running event loop):
    ``voicelab.run(config, options)``; the keyword form warns, as for :func:`arun`."""
    chosen, wiring = options_from_keywords(options, keywords, call="voicelab.run")
    outside_a_loop("arun")
    return asyncio.run(arun_wired(config, chosen, wiring))
