"""Running K seeded trials of one run config: concurrency, the run report, evaluator.log, gates."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import logging
import pickle
import shutil
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._exit_codes import EXIT_EXECUTION, EXIT_OK, EXIT_QUALITY, run_exit_code
from .._location import as_local_path
from .._validate import RunPlan, validate_run
from ..artifacts import (
    BundleLock,
    JudgeCalibration,
    ReplayOrigin,
    RunReport,
    TrialAttempt,
    TrialSummary,
    open_member_append,
    write_member,
)
from ..artifacts._bundle import write_json
from ..artifacts._store import published_location
from ..config import LoadedRun, known_secrets_scrubber, load_run
from ..endpoints import EndpointError, ProductProcess
from ..errors import ConfigError
from ..scoring import pass_at_k, pass_power_k, proportion_interval, run_statistics
from ._attempts import as_later_attempt, keep_earlier_attempt, retry_concurrency
from ._conversation import Failure
from ._executors import TrialExecutor, execute_trial, resolve_executor
from ._lag_budget import LagBudget, admitted
from ._remote import open_stage, run_staged, store_target, worker_store
from ._resume import ResumePoint, aresume_point, lock_resumed, read_run_report
from ._resume_overrides import resumed_overrides
from ._scoring import Call, Scorer, live_call, scoring_mode
from ._speech import open_speech
from ._trial import (
    TrialPlan,
    TrialResult,
    _TrialCancelled,
    crashed_trial,
    new_run_id,
    run_call,
    scored_result,
)
from ._worker import RunContext, TrialJob

logger = logging.getLogger(__name__)

#: While running, run-report.json is refreshed at most this often (and always at the end, Ctrl-C
#: included); every trial folder is complete on disk as soon as its trial ends.
RUNNING_REPORT_INTERVAL_SECONDS = 1.0
#: Worker threads (bundle writing, speech metrics, a synchronous persona) yield the GIL this
#: often, so they delay the event loop's arrival timestamps by at most about this much.
GIL_SWITCH_INTERVAL_SECONDS = 0.0005


class _RuntimeTuning:
    """Process settings for the duration of the runs in progress (they may overlap, e.g. a
    sweep's runs share one event loop): a short GIL switch interval, and the objects that
    existed before the first run frozen out of garbage collection, so a full collection scans
    only the runs' own objects (pauses of ~10 ms instead of ~40-80 ms that delay every arrival
    timestamp on the loop). Both are restored when the last run ends."""

    def __init__(self) -> None:
        self._active = 0
        self._switch_interval = 0.005
        self._log_level = logging.NOTSET
        self._lock = threading.Lock()  # a worker's trial thread and the caller's loop may share it

    def __enter__(self) -> None:
        with self._lock:
            self._enter()

    def _enter(self) -> None:
        if self._active == 0:
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_interval, GIL_SWITCH_INTERVAL_SECONDS))
            gc.freeze()
            # evaluator.log keeps INFO records: the package logger lets them through while
            # runs are in progress (restored afterwards; handlers elsewhere keep their levels)
            package_logger = logging.getLogger("voicelab")
            self._log_level = package_logger.level
            if package_logger.level == logging.NOTSET or package_logger.level > logging.INFO:
                package_logger.setLevel(logging.INFO)
        self._active += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._exit()

    def _exit(self) -> None:
        self._active -= 1
        if self._active == 0:
            gc.unfreeze()
            sys.setswitchinterval(self._switch_interval)
            logging.getLogger("voicelab").setLevel(self._log_level)


_tuning = _RuntimeTuning()

#: Trials on one event loop start at least this far apart. Opening a conversation (connect,
#: handshake, init) is the loop's busiest moment; 50 trials starting at once delayed the
#: arrival timestamps of the first greetings by up to 4 ms, spaced by 5 ms by under 1 ms.
START_SPACING_SECONDS = 0.005
_next_start: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, float] = \
    weakref.WeakKeyDictionary()


async def _start_slot() -> None:
    """Wait for this trial's start slot (shared by every run on the loop, e.g. a sweep's)."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    at = max(now, _next_start.get(loop, now))
    _next_start[loop] = at + START_SPACING_SECONDS
    if at > now:
        await asyncio.sleep(at - now)

_current_run: contextvars.ContextVar[str | None] = contextvars.ContextVar("voicelab_run",
                                                                          default=None)


class _RunLogFilter(logging.Filter):
    def __init__(self, run_id: str, scrubber: Any):
        super().__init__()
        self.run_id = run_id
        self.scrubber = scrubber

    def filter(self, record: logging.LogRecord) -> bool:
        if _current_run.get() != self.run_id:
            return False
        record.msg = self.scrubber.scrub_text(record.getMessage())
        record.args = None
        if record.exc_info:  # a traceback's text may quote a secret too: scrub it formatted
            record.exc_text = self.scrubber.scrub_text(_FORMATTER.formatException(record.exc_info))
            record.exc_info = None
        return True


_FORMATTER = logging.Formatter()


@dataclass
class RunOutcome:
    """What a run produced: the report (also on disk) and where the bundle is.

    ``write_errors`` lists bundle files that could not be written (a full disk): the run's exit
    code is then at least 4 even when every trial passed. ``location`` is where the bundle
    lives for its readers: its folder, or its store URL (``bundle_path`` is then the local
    staging folder it was written to, removed once published)."""

    report: RunReport
    bundle_path: Path
    trials: list[TrialResult] = field(default_factory=list)
    write_errors: list[str] = field(default_factory=list)
    location: str = ""

    def __post_init__(self) -> None:
        self.location = self.location or str(self.bundle_path)

    @property
    def exit_code(self) -> int:
        if self.write_errors and self.report.exit_code in (EXIT_OK, EXIT_QUALITY):
            return EXIT_EXECUTION
        return self.report.exit_code


class RunInterrupted(asyncio.CancelledError):
    """The run was cancelled (Ctrl-C, SIGTERM, a cancelled notebook cell) after writing what it
    had gathered; ``outcome`` is the partial run (report status ``interrupted``)."""

    def __init__(self, outcome: RunOutcome):
        super().__init__(f"run interrupted; partial bundle at {outcome.bundle_path}")
        self.outcome = outcome


#: Bounds that keep a typo (``--trials 1e20``) from exhausting the machine; a bigger study is
#: a sweep or several runs.
MAX_TRIALS = 100_000
MAX_CONCURRENCY = 1_000
#: Retries of an inconclusive trial (``--retry-inconclusive``).
MAX_RETRIES = 5


def trial_seed(base_seed: int, index: int) -> int:
    """Trial ``index`` (from 1) uses ``trial_seed + index - 1``: trial 1 reproduces the config's seed."""
    return base_seed + index - 1


def exit_code_for(results: Sequence[TrialResult], *, interrupted: bool, planned: int,
                  gates_blocked: bool = False) -> int:
    """130 interrupted, 4 a trial failed to execute (or did not run), 3 a trial did not pass
    (pass^k) or a run-config gate blocks, else 0 (:func:`voicelab._exit_codes.run_exit_code`)."""
    return run_exit_code(passed=[r.report.passed for r in results],
                         executed=[r.report.execution_status == "succeeded" for r in results],
                         planned=planned, interrupted=interrupted, gates_blocked=gates_blocked)


def _utc_now() -> str:
    return datetime.now(tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bounded(value: int, *, low: int, high: int, key: str, source: str | Path | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"must be a whole number from {low} to {high:,}, got {value!r}",
                          source=source, key=key)
    return value


def make_bundle_dir(root: Path, name: str, *, source: str | Path | None) -> Path:
    """Create ``root/name``; an unusable artifacts folder is a configuration error naming it."""
    bundle = (root / name).resolve()
    try:
        bundle.mkdir(parents=True, exist_ok=True)
        probe = bundle / ".voicelab-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        raise ConfigError(f"cannot create the bundle folder {bundle}: {reason}", source=source,
                          key="artifacts_dir") from None
    return bundle


class _BundleLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """evaluator.log, appended to (a resumed run continues it) but never through a link; a
    write failure (a full disk) stops the file quietly instead of printing a traceback per
    record to stderr; the run reports the failure once."""

    failed: str | None = None

    def __init__(self, path: Path):
        super().__init__(open_member_append(path))

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            super().close()

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        if self.failed is None:
            error = sys.exc_info()[1]
            self.failed = getattr(error, "strerror", None) or type(error).__name__


def _write_report_robustly(path: Path, report: BaseModel) -> str | None:
    """Write the run report; on a full disk, rewrite the existing file in place (its own blocks
    are freed first, so the final status usually fits where the atomic copy did not). Returns
    the error that remained, if any."""
    try:
        write_json(path, report)
        return None
    except OSError as error:
        first = error.strerror or type(error).__name__
    try:
        write_json(path, report, atomic=False)
        return None
    except OSError as error:
        return f"could not write {path.name}: {error.strerror or first}"


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
               executor: TrialExecutor | str | Any = None, workers: int | None = None,
               scheduler: str | None = None,
               lag_budget_ms: float | None = None, scoring: str = "process",
               retry_inconclusive: int = 1) -> RunOutcome:
    """Run seeded trials and write the bundle. Awaitable from a notebook's running event loop.

    Raises ConfigError before any trial when the configuration is invalid (including an
    artifacts folder that cannot be created). Trial execution failures do not raise: they are
    in the report (``exit_code`` 4). Cancellation raises :class:`RunInterrupted` once the
    evidence gathered so far is written.

    ``label`` names the run in frames and reports; ``calibrations`` (judge confusion counts,
    :func:`voicelab.scoring.read_calibration`) add judge-corrected pass rates to the report.
    ``resume`` is a bundle of this configuration to finish: only the planned trials that are
    not done run (interrupted or missing; with ``rerun_failed`` also those that did not pass),
    into the same bundle under the same run id and seeds; ``trials`` may extend its plan. A
    bundle of another configuration (suite hash) is refused with :class:`ConfigError`.
    ``replay_of`` names the run a replay re-sends (:func:`voicelab.areplay`) in the report.

    ``executor`` is where the trials run: ``None`` (this event loop), ``"local"`` (``workers``
    processes of this machine, default one per core; one worker is this event loop),
    ``"dask"`` (a Dask cluster at ``scheduler``, else a ``LocalCluster`` of ``workers``), a
    ``dask.distributed.Client``, or an executor (:class:`voicelab.runner.LocalExecutor`,
    :class:`voicelab.runner.DaskExecutor`) shared by several runs. The bundle is the same
    whatever runs the trials.

    ``lag_budget_ms`` (default: the run config's ``measurement.lag_budget_ms``) lowers the
    concurrency while finished trials saw a loop-lag p99 above it (:mod:`._lag_budget`).

    ``scoring`` is where a finished call is scored and its files written, in-process runs
    only: ``"process"`` (a scoring process beside this event loop, while the next calls run;
    runs with judges score on the loop) or ``"loop"`` (this event loop: no extra process, and
    a debugger or a patched function sees the scoring). The bundle is the same either way.

    ``retry_inconclusive``: how many times a trial that ends inconclusive (nothing failed, a
    critical verdict undecided) is run again, same seed, at half the concurrency each time
    (:mod:`._attempts`); one still inconclusive after that counts as not passed.
    """
    scoring_mode(scoring)
    if resume is not None and not isinstance(run, RunPlan | LoadedRun):
        overrides = _resumed_overrides(resume, overrides)
    if isinstance(run, RunPlan):
        plan = run
    else:
        plan = validate_run(run if isinstance(run, LoadedRun) else load_run(run,
                                                                            overrides=overrides))
    loaded = plan.loaded
    check_calibrations(loaded, calibrations)
    configured = artifacts_dir if artifacts_dir is not None else loaded.run.artifacts_dir
    given_at = None if artifacts_dir is not None else loaded.run_path
    store = store_target(configured, resume, source=given_at)
    if store is not None:  # the bundle lives in a store: run locally into a staging folder
        root_location, to_resume = store
        run_id = run_id or new_run_id()
        latest = (bundle_name or run_id) if link_latest and to_resume is None else None
        stage = await asyncio.to_thread(open_stage, root_location, resume=to_resume,
                                        latest=latest, source=given_at)
        return await run_staged(stage, lambda staging, local: arun(
            plan, trials=trials, concurrency=concurrency,
            artifacts_dir=staging if local is None else None, run_id=run_id,
            on_trial_done=on_trial_done, semaphore=semaphore, link_latest=link_latest,
            bundle_name=bundle_name, label=label, calibrations=calibrations, resume=local,
            rerun_failed=rerun_failed, replay_of=replay_of, executor=executor, workers=workers,
            scheduler=scheduler, lag_budget_ms=lag_budget_ms, scoring=scoring,
            retry_inconclusive=retry_inconclusive))
    point: ResumePoint | None = None
    lock: BundleLock | None = None
    if resume is not None:  # locked before its trials are counted: one writer at a time
        lock = lock_resumed(resume)
        try:
            point = await aresume_point(resume, loaded, trials=trials,
                                        rerun_failed=rerun_failed)
        except BaseException:
            lock.release()
            raise
        trials = point.planned
    trial_count = _bounded(trials if trials is not None else loaded.run.trials, low=1,
                           high=MAX_TRIALS, key="trials",
                           source=None if trials is not None else loaded.run_path)
    parallel = _bounded(concurrency if concurrency is not None else loaded.run.concurrency,
                        low=1, high=MAX_CONCURRENCY, key="concurrency",
                        source=None if concurrency is not None else loaded.run_path)
    pending = point.pending if point is not None else range(1, trial_count + 1)
    owned = False
    pool = None
    try:
        pool, owned = resolve_executor(executor, workers=workers, scheduler=scheduler,
                                       parallel=min(parallel, max(1, len(pending))))
        if owned and pool is not None:
            await pool.start()  # an unreachable scheduler is refused before the bundle exists
        return await _run_with(plan, pool, point=point, trial_count=trial_count,
                               parallel=parallel, pending=pending, artifacts_dir=artifacts_dir,
                               run_id=run_id, on_trial_done=on_trial_done, semaphore=semaphore,
                               link_latest=link_latest, bundle_name=bundle_name, label=label,
                               calibrations=calibrations, configured=configured,
                               replay_of=replay_of, lag_budget_ms=lag_budget_ms,
                               scoring=scoring, lock=lock,
                               retry_inconclusive=_bounded(
                                   retry_inconclusive, low=0, high=MAX_RETRIES,
                                   key="retry_inconclusive", source=None))
    finally:
        if owned and pool is not None:
            await pool.aclose()
        if lock is not None:
            lock.release()


async def _run_with(plan: RunPlan, executor: TrialExecutor | None, *, point: ResumePoint | None,
                    trial_count: int, parallel: int, pending: Sequence[int],
                    artifacts_dir: str | Path | None, run_id: str | None,
                    on_trial_done: Callable[[TrialResult, int, int], None] | None,
                    semaphore: asyncio.Semaphore | None, link_latest: bool,
                    bundle_name: str | None, label: str | None,
                    calibrations: Sequence[JudgeCalibration], configured: str | Path,
                    replay_of: ReplayOrigin | None, lag_budget_ms: float | None,
                    scoring: str, lock: BundleLock | None,
                    retry_inconclusive: int) -> RunOutcome:
    loaded = plan.loaded
    statistics = loaded.run.statistics
    # scipy.stats is imported here, not by the first report in the middle of the trials (its
    # import takes ~0.3 s, which would stall the event loop's arrival timestamps)
    proportion_interval(1, 2, confidence=statistics.confidence, method=statistics.interval)
    resumed_at: list[str] = []
    if point is not None:
        bundle, run_id = point.bundle, point.report.run_id
        root = bundle.parent
        label = label if label is not None else point.report.label
        resumed_at = [*point.report.resumed_at, _utc_now()]
    else:
        root = as_local_path(configured)
        run_id = run_id or new_run_id()
        bundle = make_bundle_dir(root, bundle_name or run_id,
                                 source=None if artifacts_dir is not None else loaded.run_path)
        lock = BundleLock(bundle, command="run").acquire()
        if link_latest:
            _point_latest(root, bundle)
    assert lock is not None
    try:
        handler = _BundleLogHandler(bundle / "evaluator.log")
    except BaseException:
        lock.release()
        raise
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # the run's secrets, and those met outside its configuration (a store URL's credentials)
    handler.addFilter(_RunLogFilter(run_id, loaded.scrubber.with_values(
        known_secrets_scrubber().secret_values)))
    handler.setLevel(logging.INFO)
    package_logger = logging.getLogger("voicelab")
    package_logger.addHandler(handler)
    token = _current_run.set(run_id)
    _tuning.__enter__()
    started = point.report.started_at if point is not None else _utc_now()
    results: list[TrialResult] = list(point.done) if point is not None else []
    if point is not None:
        logger.info("run %s resumed: %d of %d planned trial(s) to run, bundle %s", run_id,
                    len(pending), trial_count, bundle)
    else:
        logger.info("run %s: %d trial(s) of %s, concurrency %d, bundle %s, executor: %s", run_id,
                    trial_count, loaded.scenario.id, parallel, bundle,
                    executor.description if executor is not None else "in-process")
    write_errors: list[str] = []
    interrupted = False
    speech = None
    writes: set[asyncio.Task[None]] = set()
    run_product: ProductProcess | None = None
    run_product_settings: Mapping[str, Any] | None = None
    run_product_failure: Failure | None = None
    context: RunContext | None = None
    blob = b""
    budget: LagBudget | None = None
    scorer = Scorer(loaded, run_key=run_id, mode=scoring)
    try:
        if executor is None:  # the workers open their own
            speech = open_speech(loaded, plan.speech_cls, cache_dir=root / ".speech-cache")
        launch = loaded.run.endpoint.launch
        if launch is not None and launch.per == "run":  # one product for every trial
            run_product = ProductProcess(launch, settings=loaded.run.endpoint.settings,
                                         base_dir=loaded.base_dir, scrubber=loaded.scrubber)
            try:
                await run_product.start()
                run_product_settings = run_product.settings
            except EndpointError as error:
                run_product_failure = Failure("endpoint", loaded.scrubber.scrub_text(str(error)),
                                              error.code)
        if executor is not None:  # pickled once; each worker prepares it once
            context = RunContext(key=run_id, loaded=loaded, run_id=run_id, bundle=bundle,
                                 speech_cache_dir=root / ".speech-cache",
                                 run_product_settings=run_product_settings,
                                 run_product_failure=run_product_failure,
                                 store_url=None if getattr(executor, "shares_disk", True)
                                 else worker_store(bundle))
            blob = pickle.dumps(context)
        semaphore = semaphore or asyncio.Semaphore(parallel)
        budget_ms = lag_budget_ms if lag_budget_ms is not None \
            else loaded.run.measurement.lag_budget_ms
        budget = LagBudget(budget_ms=budget_ms, ceiling=parallel) if budget_ms else None
        report_lock = asyncio.Lock()

        def report(status: str) -> RunReport:
            return _run_report(loaded, run_id=run_id, bundle=bundle, results=results,
                               planned=trial_count, started=started, status=status,
                               label=label, calibrations=calibrations,
                               resumed_at=resumed_at, replay_of=replay_of, budget=budget)

        running_error = _write_report_robustly(bundle / "run-report.json", report("running"))
        if running_error:
            write_errors.append(running_error)
        loop = asyncio.get_running_loop()
        last_report = loop.time()

        async def remote(index: int) -> TrialResult:
            assert executor is not None and context is not None
            job = TrialJob(index, trial_seed(loaded.run.trial_seed, index),
                           attempt=len(attempts.get(index, ())) + 1)
            return await execute_trial(executor, context, blob, job)

        async def one(index: int, gate: asyncio.Semaphore | None = None) -> None:
            async with admitted(budget) as slot, gate or contextlib.nullcontext(), semaphore:
                if executor is None:  # a worker spaces the starts on its own loop
                    await _start_slot()
                trial = TrialPlan(loaded=loaded, index=index,
                                  seed=trial_seed(loaded.run.trial_seed, index),
                                  trial_dir=bundle / f"trial-{index:03d}",
                                  environment=plan.environment, adapter_cls=plan.adapter_cls,
                                  persona_cls=plan.persona_cls, speech=speech,
                                  probe_factory=plan.probe_factory,
                                  speech_metrics=loaded.run.speech_metrics, run_id=run_id,
                                  script_audio=plan.script_audio,
                                  turn_taking=plan.turn_taking,
                                  run_product_settings=run_product_settings,
                                  run_product_failure=run_product_failure,
                                  attempt=len(attempts.get(index, ())) + 1)
                started_wall = time.time()
                if point is not None and trial.trial_dir.exists():
                    # what an interrupted (or, rerun, failed) attempt left must not mix in
                    await asyncio.to_thread(shutil.rmtree, trial.trial_dir)
                call: Call | None = None
                try:
                    if executor is None:
                        with live_call():
                            call = await run_call(trial)
                    else:
                        result = await remote(index)
                except _TrialCancelled as cancelled:
                    await finished(cancelled.result)
                    raise
                except asyncio.CancelledError:
                    raise
                except Exception as error:  # noqa: BLE001 - one broken trial must not stop the run
                    logger.exception("trial-%03d failed outside the conversation", index)
                    result = await asyncio.to_thread(crashed_trial, trial, error,
                                                     started_wall=started_wall)
                slot.loop_lag = call.loop_lag if call is not None else result.loop_lag
            if call is None:
                await finished(result)
                return
            # The call's slot is free: the next call starts while this one is scored (in the
            # scoring process, or on this loop). At most `parallel` calls wait to be scored.
            try:
                await scoring_slots.acquire()
            except asyncio.CancelledError:  # interrupted while waiting: scored all the same
                schedule_scoring(trial, call, holding_slot=False)
                raise
            schedule_scoring(trial, call, holding_slot=True)
            if call.cancelled:
                raise asyncio.CancelledError

        def schedule_scoring(trial: TrialPlan, call: Call, *, holding_slot: bool) -> None:
            task = asyncio.create_task(score_behind(trial, call, holding_slot=holding_slot))
            writes.add(task)
            task.add_done_callback(writes.discard)

        async def score_behind(trial: TrialPlan, call: Call, *, holding_slot: bool) -> None:
            if not holding_slot:
                await scoring_slots.acquire()
            try:
                try:
                    result = scored_result(call, await scorer.score(call))
                except Exception as error:  # noqa: BLE001 - a scoring bug fails one trial
                    logger.error("%s failed while it was scored", call.trial_id,
                                 exc_info=(type(error), error, error.__traceback__))
                    result = await asyncio.to_thread(crashed_trial, trial, error,
                                                     started_wall=call.started_wall)
                await finished(result)
            finally:
                scoring_slots.release()

        async def finished(result: TrialResult) -> None:
            earlier = attempts.get(result.report.trial)
            if earlier:  # a retry: it takes the place of the inconclusive attempt
                result = await asyncio.to_thread(as_later_attempt, bundle, result, earlier)
                results[:] = [r for r in results if r.report.trial != result.report.trial]
            results.append(result)
            logger.info("%s: %s (%s)", result.summary.trial_id, result.report.status,
                        result.report.exit_reason)
            nonlocal last_report
            now = loop.time()
            if now - last_report >= RUNNING_REPORT_INTERVAL_SECONDS and not report_lock.locked():
                last_report = now
                async with report_lock:
                    with contextlib.suppress(OSError):  # the final report says it all
                        # built in the thread too: its statistics cost O(trials), and the
                        # loop keeps stamping arrivals meanwhile (results only grow)
                        await asyncio.to_thread(
                            lambda: write_json(bundle / "run-report.json", report("running")))
            if on_trial_done is not None:
                on_trial_done(result, len(results), trial_count)

        if executor is None:
            scorer.warm()
        scoring_slots = asyncio.Semaphore(parallel)

        # trials are started lazily by at most `width` workers: a huge --trials costs no
        # memory up front
        async def run_pass(todo: Sequence[int], width: int,
                           gate: asyncio.Semaphore | None = None) -> bool:
            """Run ``todo``; True when the run was interrupted meanwhile."""
            indices = iter(todo)

            async def worker() -> None:
                me = asyncio.current_task()
                for index in indices:
                    if me is not None and me.cancelling():
                        # a cancellation some cleanup absorbed still ends the run: never start
                        # another trial once interrupted
                        raise asyncio.CancelledError
                    await one(index, gate)

            tasks = [asyncio.create_task(worker()) for _ in range(min(width, len(todo)))]
            try:
                await asyncio.gather(*tasks)
            except asyncio.CancelledError:
                # gather has already cancelled every trial once; a second cancel would cut
                # short the cleanup in which an interrupted trial writes its evidence
                await asyncio.gather(*tasks, return_exceptions=True)
                return True
            return False

        attempts: dict[int, list[TrialAttempt]] = {}
        interrupted = await run_pass(pending, parallel)
        width = parallel
        for attempt in range(1, retry_inconclusive + 1):
            if interrupted:
                break
            try:
                scorer.finishing()  # no call starts until this pass is scored: help score it
                while writes:  # every call of this pass scored: its status is known
                    await asyncio.gather(*list(writes), return_exceptions=True)
                again = sorted(r.report.trial for r in results
                               if r.report.status == "inconclusive"
                               and r.report.trial in pending and r.report.attempt == attempt)
                if not again:
                    break
                if not getattr(executor, "shares_disk", True):
                    logger.warning("%d inconclusive trial(s) not retried: the workers publish "
                                   "their own trials to the store", len(again))
                    break
                for index in again:
                    previous = next(r for r in results if r.report.trial == index)
                    attempts.setdefault(index, []).append(await asyncio.to_thread(
                        keep_earlier_attempt, bundle, previous, concurrency=width))
            except asyncio.CancelledError:
                interrupted = True
                break
            width = retry_concurrency(width)
            logger.info("retrying %d inconclusive trial(s) (attempt %d), %d at a time",
                        len(again), attempt + 1, width)
            interrupted = await run_pass(again, width, asyncio.Semaphore(width))
    finally:
        scorer.finishing()  # no call starts any more: the loop helps score the last ones
        if writes:  # every planned file reaches the disk (or its failure the report) first
            await asyncio.gather(*writes, return_exceptions=True)
        if speech is not None:
            await speech.aclose()
        if executor is not None:
            await executor.release_run(run_id)
        if run_product is not None:
            await run_product.stop()
            try:
                write_member(bundle / "product.log", run_product.log_text().encode())
            except OSError as error:
                write_errors.append(f"could not write product.log: {error.strerror}")
        final = _run_report(loaded, run_id=run_id, bundle=bundle, results=results,
                            planned=trial_count, started=started,
                            status="interrupted" if interrupted else "complete", label=label,
                            calibrations=calibrations, resumed_at=resumed_at,
                            replay_of=replay_of, budget=budget)
        final_error = _write_report_robustly(bundle / "run-report.json", final)
        if final_error:
            write_errors.append(final_error)
        if handler.failed:
            write_errors.append(f"could not write evaluator.log: {handler.failed}")
        logger.info("run %s %s: %d/%d trial(s) passed, exit code %d", run_id, final.status,
                    final.passed_trials, final.executed_trials, final.exit_code)
        _current_run.reset(token)
        _tuning.__exit__()
        package_logger.removeHandler(handler)
        handler.close()
        lock.release()
    outcome = RunOutcome(final, bundle, sorted(results, key=lambda r: r.report.trial),
                         write_errors)
    if interrupted:
        # re-raised as a cancellation: asyncio.run turns it into KeyboardInterrupt (exit 130)
        raise RunInterrupted(outcome)
    return outcome


def _point_latest(root: Path, bundle: Path) -> None:
    latest = root / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(bundle.name)
    except OSError:
        pass  # a convenience only (some filesystems have no symlinks)


def _run_report(loaded: LoadedRun, *, run_id: str, bundle: Path, results: Sequence[TrialResult],
                planned: int, started: str, status: str, label: str | None = None,
                calibrations: Sequence[JudgeCalibration] = (),
                resumed_at: Sequence[str] = (), replay_of: ReplayOrigin | None = None,
                budget: LagBudget | None = None) -> RunReport:
    ordered = sorted(results, key=lambda r: r.report.trial)
    passed_flags = [r.report.passed for r in ordered]
    interrupted = status == "interrupted"
    statistics = run_statistics([r.report for r in ordered], [r.turn_metrics for r in ordered],
                                statistics=loaded.run.statistics, gates=loaded.run.gates,
                                calibrations=calibrations, curve=status != "running",
                                probes=[r.probes for r in ordered])
    code = exit_code_for(ordered, interrupted=interrupted, planned=planned,
                         gates_blocked=bool(statistics.blocking_gates))
    summaries: list[TrialSummary] = [r.summary for r in ordered]
    missing = planned - len(ordered)
    message = ""
    if missing and status != "running":
        message = f"{missing} planned trial(s) did not run because the run was interrupted"
    return RunReport(
        run_id=run_id, status=status,  # type: ignore[arg-type]
        scenario_id=loaded.scenario.id, persona=loaded.persona.name,
        environment=loaded.environment.name or "quiet", adapter=loaded.run.endpoint.adapter,
        suite_hash=loaded.suite_hash(), bundle_path=published_location(bundle),
        started_at=started,
        ended_at=_utc_now(), trial_count=planned, planned_trials=planned,
        executed_trials=len(ordered), passed_trials=sum(passed_flags),
        pass_at_k=pass_at_k(passed_flags), pass_power_k=pass_power_k(passed_flags)
        and len(ordered) == planned,
        exit_code=code, trials=summaries, message=message, label=label,
        run_file=str(loaded.run_path), resumed_at=list(resumed_at), replay_of=replay_of,
        overrides=loaded.recorded_overrides(),
        degraded_trials=sum(s.measurement_degraded for s in summaries),
        inconclusive_trials=sum(s.status == "inconclusive" for s in summaries),
        retried_trials=sum(s.attempts > 1 for s in summaries),
        lag_budget_ms=budget.budget_ms if budget else None,
        lowest_concurrency=budget.lowest if budget else None,
        **statistics.report_fields())


def _resumed_overrides(resume: str | Path, given: Sequence[str]) -> list[str]:
    """The run's recorded --set overrides, with the given ones (:mod:`._resume_overrides`)."""
    report = read_run_report(resume)
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
