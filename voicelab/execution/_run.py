"""A run: seeded trials of one plan on an executor, into one bundle.

:class:`Run` lives its bundle's life through a :class:`voicelab.artifacts.RunFolder` (folder
and lock, evaluator.log, ``run-report.json`` refreshed while it runs and written last, Ctrl-C
included, ``latest`` after it), owns a product launched once for the run, and the
admission of trials: the run's concurrency (or a sweep's shared semaphore), a loop-lag budget
(:mod:`._lag_budget`) and, in a retry pass, a narrower gate. Trials are started lazily: at most
``concurrency`` loops pull trial numbers, so a huge ``--trials`` costs no memory up front.
Each trial goes to the executor (:mod:`._protocol`), which alone knows where it runs; an
inconclusive trial is run again before it counts (:mod:`._attempts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._location import as_local_path
from .._validate import RunPlan
from ..artifacts import (
    PRODUCT_LOG,
    BudgetState,
    JudgeCalibration,
    Redacts,
    RemoteLocation,
    ReplayOrigin,
    RunFolder,
    RunReport,
    TelemetryExport,
    TrialAttempt,
    filter_member,
    filter_model,
    open_remote,
    trial_folder,
)
from ..config import remember_text_filter
from ..cost import CostBudget
from ..endpoints import EndpointError, ProductProcess
from ..runner import (
    FailFast,
    Failure,
    RunInterrupted,
    RunOutcome,
    TrialResult,
    crashed_trial,
    estimate_from_config,
    new_run_id,
    run_redactor,
    run_report,
    trial_seed,
    utc_now,
)
from ..scoring import proportion_interval
from ._attempts import (
    as_later_attempt,
    keep_earlier_attempt,
    keep_earlier_attempt_in_store,
    retry_concurrency,
)
from ._event_loop import event_loop_description
from ._lag_budget import LagBudget, admitted
from ._load_profile import RunLoad, StartSchedule, Turn, load_line
from ._observer import ObservedRun, Observers, RunObserver
from ._protocol import Executor, ExecutorRun, RunContext, RunSpec, TrialCall, TrialDone, TrialJob
from ._resume import ResumePoint
from ._staging import worker_store
from ._tuning import PROCESS_TUNING

logger = logging.getLogger(__name__)

#: While running, run-report.json is refreshed at most this often (and always at the end, Ctrl-C
#: included); every trial folder is complete on disk as soon as its trial ends.
RUNNING_REPORT_INTERVAL_SECONDS = 1.0


@dataclass(frozen=True)
class RunSettings:
    """What a :class:`Run` is told (built by :func:`voicelab.execution.arun`): the caller's
    :class:`voicelab.RunOptions` checked and resolved (``fail_fast`` a counter, ``max_cost`` a
    budget, ``only`` parsed), and the wiring of the command that runs it
    (:class:`._options.RunWiring`: a sweep's shared semaphore, counter and budget, a cell's
    folder name, ``latest``, a replay's origin). Each field is described where it is chosen."""

    trials: int | None = None
    concurrency: int | None = None
    artifacts_dir: str | Path | None = None
    overrides: Sequence[str] = ()
    run_id: str | None = None
    on_trial_done: Callable[[TrialResult, int, int], None] | None = None
    semaphore: asyncio.Semaphore | None = None
    link_latest: bool = True
    bundle_name: str | None = None
    label: str | None = None
    calibrations: Sequence[JudgeCalibration] = ()
    resume: str | Path | None = None
    rerun_failed: bool = False
    replay_of: ReplayOrigin | None = None
    executor: object = None
    workers: int | None = None
    scheduler: str | None = None
    lag_budget_ms: float | None = None
    scoring: str = "process"
    retry_inconclusive: int = 1
    observers: Sequence[RunObserver] = ()
    only: Sequence[str] = ()
    fail_fast: FailFast | None = None
    budget: CostBudget | None = None
    trial_estimate: float | None = None
    ramp_seconds: float | None = None
    arrival_rate: float | None = None
    max_concurrency: int | None = None
    schedule: StartSchedule | None = None


class Run:
    """One run of ``plan``'s trials (``pending``, of ``planned``; a resumed run's ``point``
    holds those done) on ``executor``; :meth:`execute` runs it to its end."""

    def __init__(self, plan: RunPlan, options: RunSettings, executor: Executor, *,
                 planned: int, parallel: int, pending: Sequence[int],
                 point: ResumePoint | None, folder: RunFolder[RunReport] | None,
                 retries: int, load: RunLoad):
        self.plan = plan
        #: when the first pass starts its trials, and the concurrency that achieved
        self.load = load
        self.loaded = plan.loaded
        self.options = options
        self.executor = executor
        self.planned = planned
        self.parallel = parallel
        self.pending = pending
        self.point = point
        #: the bundle: a resumed run's, reopened by the caller; a new run creates its own
        self.folder = folder
        self.retries = retries
        self.label = options.label
        self.resumed_at: list[str] = []
        self.results: list[TrialResult] = list(point.done) if point is not None else []
        #: the earlier attempts of the trials retried (their folders moved aside)
        self.attempts: dict[int, list[TrialAttempt]] = {}
        self.write_errors: list[str] = []
        self.interrupted = False
        #: every text the run writes passes it: its secrets (and a store URL's), and its
        #: redaction rules when it redacts (docs/artifacts.md, "Privacy")
        self.words: Redacts = run_redactor(self.loaded)
        if not self.words.changes_nothing:  # the command line's own lines say no more
            remember_text_filter(self.words.text)
        self.budget: LagBudget | None = None
        self.run_product: ProductProcess | None = None
        self.spec: RunSpec | None = None
        self.session: ExecutorRun | None = None
        self.observers = Observers(options.observers)
        self.observed: ObservedRun | None = None
        #: the cost budget's ticket of each trial in flight, by trial number
        self.cost_tickets: dict[int, int | None] = {}
        self.stopped_by_budget = False
        self._trial_estimate = options.trial_estimate
        #: what the observers exported (the final report's ``telemetry``)
        self.telemetry: TelemetryExport | None = None
        self._report_lock = asyncio.Lock()
        self._last_report = 0.0
        # set when the run opens its bundle (:meth:`_open_bundle`), starts and ends
        self.bundle: Path
        self.root: Path
        self.run_id: str
        self.started: str
        self.semaphore: asyncio.Semaphore
        self.final: RunReport

    # --- the bundle ---------------------------------------------------------------------------

    def _open_bundle(self) -> None:
        options, point = self.options, self.point
        if point is not None:
            assert self.folder is not None
            self.bundle, self.run_id = self.folder.path, point.report.run_id
            self.root = self.bundle.parent
            self.label = self.label if self.label is not None else point.report.label
            self.resumed_at = [*point.report.resumed_at, utc_now()]
            self.started = point.report.started_at
            return
        configured = options.artifacts_dir if options.artifacts_dir is not None \
            else self.loaded.run.artifacts_dir
        self.root = as_local_path(configured)
        self.run_id = options.run_id or new_run_id()
        self.folder = RunFolder.create(
            self.root, options.bundle_name or self.run_id, command="run", report=RunReport,
            source=None if options.artifacts_dir is not None else self.loaded.run_path,
            access=self.loaded.run.retention.access)
        self.bundle = self.folder.path
        self.started = utc_now()

    def _report(self, status: str) -> RunReport:
        report = run_report(self.loaded, run_id=self.run_id, bundle=self.bundle,
                          results=self.results, planned=self.planned, started=self.started,
                          status=status, label=self.label, calibrations=self.options.calibrations,
                          resumed_at=self.resumed_at, replay_of=self.options.replay_of,
                          lag_budget_ms=self.budget.budget_ms if self.budget else None,
                          lowest_concurrency=self.budget.lowest if self.budget else None,
                          only=self.options.only, stopped_early=self._stopped_early(),
                          stopped_after_failures=self.options.fail_fast.limit
                          if self.options.fail_fast is not None else None,
                          budget=self._budget_state())
        report = report.model_copy(update={"load_profile": self.load.profile,
                                           "achieved_concurrency": self.load.achieved()})
        if self.telemetry is not None:
            report = report.model_copy(update={"telemetry": self.telemetry})
        return report

    def _stopped_early(self) -> str | None:
        """Why planned trials did not start (``--fail-fast``), once the run stopped them."""
        fail_fast = self.options.fail_fast
        not_run = self.planned - len(self.results)
        if fail_fast is None or not fail_fast.stopped or not_run <= 0 or self.interrupted:
            return None
        return fail_fast.message(not_run)

    def _budget_state(self) -> BudgetState | None:
        budget = self.options.budget
        if budget is None:
            return None
        held_back = self.planned - len(self.results) if self.stopped_by_budget else 0
        return budget.state(not_started=max(0, held_back))

    def _expected_trial_cost(self) -> float | None:
        """What the next trial is expected to cost: the mean known cost of the run's trials
        so far, else the estimate from its configuration."""
        known = [r.report.cost.total for r in self.results
                 if r.report.cost is not None and r.report.cost.total is not None]
        if known:
            return math.fsum(known) / len(known)
        if self._trial_estimate is None:
            self._trial_estimate = estimate_from_config(
                self.loaded, trials=1, pricing=self.loaded.run.pricing,
                speech_cls=self.plan.speech_cls,
                output_transcripts=self.plan.abilities.capabilities["output_transcripts"],
                endpoint_settings=self.plan.endpoint_settings).per_trial
        return self._trial_estimate

    # --- the run --------------------------------------------------------------------------------

    async def execute(self) -> RunOutcome:
        """Run the trials and write the bundle; raises :class:`RunInterrupted` (with the
        partial outcome) once an interrupted run has written its evidence."""
        statistics = self.loaded.run.statistics
        # scipy.stats is imported here, not by the first report in the middle of the trials (its
        # import takes ~0.3 s, which would stall the event loop's arrival timestamps)
        proportion_interval(1, 2, confidence=statistics.confidence, method=statistics.interval)
        self._open_bundle()
        assert self.folder is not None
        with self.folder:  # the log closed and the lock released, however the run ends
            self.folder.start_log(run_id=self.run_id, words=self.words)
            with PROCESS_TUNING.during_run():
                self._log_start()
                try:
                    await self._run()
                finally:
                    await self._end()
        outcome = RunOutcome(self.final, self.bundle,
                             sorted(self.results, key=lambda r: r.report.trial), self.write_errors)
        if self.interrupted:
            # re-raised as a cancellation: asyncio.run turns it into KeyboardInterrupt (exit 130)
            raise RunInterrupted(outcome)
        return outcome

    def _log_start(self) -> None:
        if self.point is not None:
            logger.info("run %s resumed: %d of %d planned trial(s) to run, bundle %s",
                        self.run_id, len(self.pending), self.planned, self.bundle)
        else:
            logger.info("run %s: %d trial(s) of %s, concurrency %d, bundle %s, executor: %s, "
                        "event loop: %s", self.run_id, self.planned, self.loaded.scenario.id,
                        self.parallel, self.bundle, self.executor.description,
                        event_loop_description())
        logger.info("%s", load_line(self.load.profile))
        for warning in self.plan.summary.warnings:  # what validate says, said by run too
            logger.warning("%s", warning)

    async def _run(self) -> None:
        loaded = self.loaded
        if self.observers:
            self.observed = ObservedRun(
                run_id=self.run_id, bundle=self.bundle, scenario=loaded.scenario.id,
                persona=loaded.persona.name, environment=loaded.environment.name or "quiet",
                adapter=loaded.run.endpoint.adapter, planned=self.planned, label=self.label)
            self.observers.run_started(self.observed)
        run_product_settings, run_product_failure = await self._launch_product()
        self.spec = RunSpec(
            RunContext(key=self.run_id, loaded=loaded, run_id=self.run_id, bundle=self.bundle,
                       speech_cache_dir=self.root / ".speech-cache",
                       run_product_settings=run_product_settings,
                       run_product_failure=run_product_failure,
                       store_url=None if self.executor.shares_disk
                       else worker_store(self.bundle)),
            self.plan, concurrency=self.parallel, scoring=self.options.scoring,
            finished=self._finished)
        self.session = await self.executor.open_run(self.spec)
        self.semaphore = self.options.semaphore or asyncio.Semaphore(self.parallel)
        budget_ms = self.options.lag_budget_ms if self.options.lag_budget_ms is not None \
            else loaded.run.measurement.lag_budget_ms
        self.budget = LagBudget(budget_ms=budget_ms, ceiling=self.parallel) if budget_ms \
            else None
        assert self.folder is not None
        running_error = self.folder.write_report(self._report("running"), words=self.words)
        if running_error:
            self.write_errors.append(running_error)
        self._last_report = asyncio.get_running_loop().time()
        self.interrupted = await self._pass(self.pending, self.parallel, scheduled=True)
        await self._retry_inconclusive()

    async def _launch_product(self) -> tuple[Mapping[str, Any] | None, Failure | None]:
        """One product for every trial (``launch.per: run``): the settings it filled (its
        port), or why it could not start."""
        loaded = self.loaded
        launch = loaded.run.endpoint.launch
        if launch is None or launch.per != "run":
            return None, None
        self.run_product = ProductProcess(launch, settings=loaded.run.endpoint.settings,
                                          base_dir=loaded.base_dir, scrubber=loaded.scrubber)
        try:
            await self.run_product.start()
            return self.run_product.settings, None
        except EndpointError as error:
            return None, Failure("endpoint", loaded.scrubber.scrub_text(str(error)), error.code)

    async def _pass(self, todo: Sequence[int], width: int,
                    gate: asyncio.Semaphore | None = None, *, scheduled: bool = False) -> bool:
        """Run ``todo`` with at most ``width`` trials pulled at once, ``scheduled`` by the
        run's load profile (the first pass; retries start as slots free); True when the run
        was interrupted meanwhile."""
        indices = iter(todo)

        async def puller() -> None:
            me = asyncio.current_task()
            for index in indices:
                if me is not None and me.cancelling():
                    # a cancellation some cleanup absorbed still ends the run: never start
                    # another trial once interrupted
                    raise asyncio.CancelledError
                if self._stopping():
                    return
                turn = await self.load.turn() if scheduled else None
                if not await self._trial(index, gate, turn):
                    return  # the budget stops the run: no more trial starts

        tasks = [asyncio.create_task(puller()) for _ in range(min(width, len(todo)))]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            # gather has already cancelled every trial once; a second cancel would cut
            # short the cleanup in which an interrupted trial writes its evidence
            await asyncio.gather(*tasks, return_exceptions=True)
            return True
        return False

    def _stopping(self) -> bool:
        """--fail-fast: enough trials did not pass, here or in another cell of the sweep."""
        return self.options.fail_fast is not None and self.options.fail_fast.stopped

    async def _trial(self, index: int, gate: asyncio.Semaphore | None,
                     turn: Turn | None = None) -> bool:
        """Run trial ``index`` (in its load profile's ``turn``); False when the cost budget
        kept it from starting."""
        assert self.spec is not None and self.session is not None
        job = TrialJob(index, trial_seed(self.loaded.run.trial_seed, index),
                       attempt=len(self.attempts.get(index, ())) + 1)
        waited = self.semaphore.locked()
        async with admitted(self.budget) as slot, gate or contextlib.nullcontext(), \
                self.semaphore:
            if self._stopping():  # stopped while this trial waited for its slot
                return True
            if self.options.budget is not None:
                # waiting for the trials in flight to settle: help finish their scoring
                ticket = await self.options.budget.admit(self._expected_trial_cost,
                                                         waiting=self.session.finishing)
                if ticket is None:
                    if not self.stopped_by_budget:
                        logger.warning("budget: trial-%03d and the trials after it are not "
                                       "started", index)
                    self.stopped_by_budget = True
                    return False
                self.cost_tickets[index] = ticket
            started_wall = time.time()
            trial_dir = self.bundle / trial_folder(index)
            if self.point is not None and trial_dir.exists():
                # what an interrupted (or, rerun, failed) attempt left must not mix in
                await asyncio.to_thread(shutil.rmtree, trial_dir)
            call: TrialCall
            if self.observed is not None:
                self.observers.trial_started(self.observed, index)
            self.load.started(turn, waited=waited)
            try:
                call = await self.session.submit(job)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - one broken trial must not stop the run
                logger.exception("trial-%03d failed outside the conversation", index)
                call = TrialDone(self.spec, await asyncio.to_thread(
                    crashed_trial, self.spec.trial_plan(job), error, started_wall=started_wall))
            finally:
                self.load.ended()
            slot.loop_lag = call.loop_lag
        # the trial's slot is free: the next one starts while this one is settled
        await call.settle()
        if call.cancelled:
            raise asyncio.CancelledError
        return True

    async def _finished(self, result: TrialResult) -> None:
        if self.options.budget is not None:  # what it cost replaces what it was expected to
            self.options.budget.settle(self.cost_tickets.pop(result.report.trial, None),
                                       result.report.cost)
        earlier = self.attempts.get(result.report.trial)
        if earlier:  # a retry: it takes the place of the inconclusive attempt
            result = await asyncio.to_thread(as_later_attempt, self.bundle, result, earlier,
                                             store=self._worker_store())
            self.results[:] = [r for r in self.results if r.report.trial != result.report.trial]
        self.results.append(result)
        logger.info("%s: %s (%s)", result.summary.trial_id, result.report.status,
                    result.report.exit_reason)
        if self.options.fail_fast is not None:
            self.options.fail_fast.finished(
                passed=result.report.passed,
                final=result.report.status != "inconclusive" or result.report.attempt > self.retries)
        # told before anything is awaited: two trials settling together are counted in the
        # order they finished, each with its own count
        if self.options.on_trial_done is not None:
            self.options.on_trial_done(result, len(self.results), self.planned)
        if self.observed is not None:
            self.observers.trial_finished(self.observed, result)
        now = asyncio.get_running_loop().time()
        folder = self.folder
        assert folder is not None
        if now - self._last_report >= RUNNING_REPORT_INTERVAL_SECONDS and \
                not self._report_lock.locked():
            self._last_report = now
            async with self._report_lock:
                with contextlib.suppress(OSError):  # the final report says it all
                    # built in the thread too: its statistics cost O(trials), and the
                    # loop keeps stamping arrivals meanwhile (results only grow)
                    await asyncio.to_thread(
                        lambda: folder.write_report(self._report("running"),
                                                    words=self.words))

    async def _settled(self) -> None:
        """Every trial submitted so far settled: its status is known."""
        assert self.spec is not None and self.session is not None
        self.session.finishing()  # no trial starts until this is done: help finish them
        while self.spec.pending:
            await asyncio.gather(*list(self.spec.pending), return_exceptions=True)

    def _worker_store(self) -> RemoteLocation | None:
        """The store the workers publish their trials to (None: they write the bundle)."""
        url = self.spec.context.store_url if self.spec is not None else None
        return open_remote(url) if url is not None else None

    async def _retry_inconclusive(self) -> None:
        width = self.parallel
        for attempt in range(1, self.retries + 1):
            if self.interrupted or self._stopping():
                break
            try:
                await self._settled()
                again = sorted(r.report.trial for r in self.results
                               if r.report.status == "inconclusive"
                               and r.report.trial in self.pending
                               and r.report.attempt == attempt)
                if not again:
                    break
                store = self._worker_store()
                for index in again:
                    previous = next(r for r in self.results if r.report.trial == index)
                    kept = await asyncio.to_thread(
                        keep_earlier_attempt, self.bundle, previous, concurrency=width
                    ) if store is None else await asyncio.to_thread(
                        keep_earlier_attempt_in_store, store, previous, concurrency=width)
                    self.attempts.setdefault(index, []).append(kept)
            except asyncio.CancelledError:
                self.interrupted = True
                break
            width = retry_concurrency(width)
            logger.info("retrying %d inconclusive trial(s) (attempt %d), %d at a time",
                        len(again), attempt + 1, width)
            self.interrupted = await self._pass(again, width, asyncio.Semaphore(width))

    async def _end(self) -> None:
        """Whatever happened: every planned file on disk (or its failure in the report), the
        executor's share of the run released, the product stopped, the final report."""
        if self.session is not None:
            self.session.finishing()  # no trial starts any more: help finish the last ones
        if self.spec is not None and self.spec.pending:
            await asyncio.gather(*self.spec.pending, return_exceptions=True)
        if self.session is not None:
            await self.session.close()
        assert self.folder is not None
        if self.run_product is not None:
            await self.run_product.stop()
            problem = self.folder.write_member(PRODUCT_LOG, filter_member(
                PRODUCT_LOG, self.run_product.log_text().encode(), self.words))
            if problem:
                self.write_errors.append(problem)
        status = "interrupted" if self.interrupted else "complete"
        if self.observed is not None:  # flushed (bounded) before the report counts the export
            self.telemetry = await self.observers.run_ending(self.observed, status=status)
        self.final = filter_model(self._report(status), self.words)
        # latest moves last (a new run's only): it names a run with its report
        self.write_errors.extend(self.folder.finish(
            self.final, link_latest=self.point is None and self.options.link_latest))
        logger.info("run %s %s: %d/%d trial(s) passed, exit code %d", self.run_id,
                    self.final.status, self.final.passed_trials, self.final.executed_trials,
                    self.final.exit_code)
