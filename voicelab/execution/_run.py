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
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from .._validate import RunPlan
from ..artifacts import (
    Redacts,
    RemoteLocation,
    RunFolder,
    RunReport,
    TelemetryExport,
    TrialAttempt,
    filter_model,
    open_remote,
    trial_folder,
)
from ..config import remember_text_filter
from ..endpoints import ProductProcess
from ..runner import (
    RunInterrupted,
    RunOutcome,
    TrialResult,
    crashed_trial,
    run_redactor,
    run_report,
    trial_seed,
)
from ..scoring import proportion_interval
from ._attempts import as_later_attempt, keep_earlier_attempts, retry_concurrency, to_retry
from ._event_loop import event_loop_description
from ._lag_budget import LagBudget, admitted
from ._load_profile import RunLoad, Turn, load_line
from ._observer import ObservedRun, Observers
from ._protocol import Executor, ExecutorRun, RunContext, RunSpec, TrialCall, TrialDone, TrialJob
from ._resume import ResumePoint
from ._run_bundle import (
    RunCosts,
    RunningReport,
    open_bundle,
    stopped_early,
)
from ._run_product import launch_run_product, stop_run_product
from ._run_settings import RunSettings
from ._staging import worker_store
from ._tuning import PROCESS_TUNING

logger = logging.getLogger(__name__)

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
        #: the cost budget's admission of each trial (none without a budget)
        self.costs = RunCosts(options.budget, plan, estimate=options.trial_estimate)
        #: what the observers exported (the final report's ``telemetry``)
        self.telemetry: TelemetryExport | None = None
        self.running_report = RunningReport()
        # set when the run opens its bundle (:meth:`_open_bundle`), starts and ends
        self.bundle: Path
        self.root: Path
        self.run_id: str
        self.started: str
        self.semaphore: asyncio.Semaphore
        self.final: RunReport

    # --- the bundle ---------------------------------------------------------------------------

    def _open_bundle(self) -> None:
        place = open_bundle(self.loaded, self.options, self.point, self.folder)
        self.folder, self.bundle, self.root = place.folder, place.folder.path, place.root
        self.run_id, self.started, self.resumed_at = place.run_id, place.started, place.resumed_at
        self.label = place.label

    def _report(self, status: str) -> RunReport:
        report = run_report(self.loaded, run_id=self.run_id, bundle=self.bundle,
                          results=self.results, planned=self.planned, started=self.started,
                          status=status, label=self.label, calibrations=self.options.calibrations,
                          resumed_at=self.resumed_at, replay_of=self.options.replay_of,
                          lag_budget_ms=self.budget.budget_ms if self.budget else None,
                          lowest_concurrency=self.budget.lowest if self.budget else None,
                          only=self.options.only,
                          stopped_early=stopped_early(self.options.fail_fast,
                                                      not_run=self.planned - len(self.results),
                                                      interrupted=self.interrupted),
                          stopped_after_failures=self.options.fail_fast.limit
                          if self.options.fail_fast is not None else None,
                          budget=self.costs.state(planned=self.planned, done=len(self.results)))
        report = report.model_copy(update={"load_profile": self.load.profile,
                                           "achieved_concurrency": self.load.achieved()})
        if self.telemetry is not None:
            report = report.model_copy(update={"telemetry": self.telemetry})
        return report

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
        # one product for every trial (``launch.per: run``), or why it could not start
        self.run_product, run_product_settings, run_product_failure = \
            await launch_run_product(loaded)
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
        running_error = self.running_report.first(self.folder, self._report("running"),
                                                  words=self.words)
        if running_error:
            self.write_errors.append(running_error)
        self.interrupted = await self._pass(self.pending, self.parallel, scheduled=True)
        await self._retry_inconclusive()

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
            # waiting for the trials in flight to settle: help finish their scoring
            if not await self.costs.admit(index, self.results, waiting=self.session.finishing):
                return False
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
        self.costs.settle(result)  # what it cost replaces what it was expected to
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
        assert self.folder is not None
        await self.running_report.refresh(self.folder, lambda: self._report("running"),
                                          words=self.words)

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
                again = to_retry(self.results, self.pending, attempt)
                if not again:
                    break
                kept = await asyncio.to_thread(keep_earlier_attempts, self.bundle, self.results,
                                               again, concurrency=width,
                                               store=self._worker_store())
                for index, attempt_kept in zip(again, kept, strict=True):
                    self.attempts.setdefault(index, []).append(attempt_kept)
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
            problem = await stop_run_product(self.run_product, self.folder, self.words)
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
