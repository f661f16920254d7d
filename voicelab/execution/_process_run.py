"""The parent's side of trials run in worker processes (local ones, or a Dask cluster's).

A trial is a job handed to a worker (:meth:`JobExecutor.submit_job`); its outcome streams back
when it ends, with the worker's log records of it (logged here, marked with the worker). A
worker that dies loses only its trials in flight: each becomes a failed execution
(``runner``/``worker_lost``) with whatever evidence it had written (:func:`lost_trial`).
Interrupted, the run asks every worker to stop its trials, which write their evidence and come
back cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from .._atomic import make_folder
from ..artifacts import (
    TRIAL_REPORT,
    ExecutionFailure,
    TrialReport,
    filter_model,
    running_markers,
    trial_folder,
    write_json,
)
from ..runner import TrialCancelled, TrialResult, run_redactor, trial_summary, unscored_report
from ._child import handle_records
from ._protocol import RunContext, RunSpec, TrialCall, TrialDone, TrialJob, TrialOutcome, WorkerLost
from ._resume import read_trial_result
from ._staging import published_trial

logger = logging.getLogger(__name__)

#: After a cancel, how long the parent waits for a worker's trials to write their evidence.
CANCEL_GRACE_SECONDS = 60.0


class JobExecutor(Protocol):
    """An executor whose trials run in worker processes."""

    #: peak resident memory per worker seen so far, in KiB (from the trials' outcomes)
    peak_rss_kib: dict[str, int]

    def submit_job(self, context: RunContext, blob: bytes, job: TrialJob
                   ) -> asyncio.Future[TrialOutcome]: ...

    async def cancel_run(self, key: str) -> None: ...

    async def release_run(self, key: str) -> None: ...


class ProcessRun:
    """A run's trials on worker processes: each comes back finished (its bundle folder written
    by its worker)."""

    def __init__(self, executor: JobExecutor, run: RunSpec):
        self.executor = executor
        self.run = run
        self.blob = run.blob  # pickled once, now: a run that cannot be sent fails before a trial

    async def submit(self, job: TrialJob) -> TrialCall:
        try:
            return TrialDone(self.run, await execute_trial(self.executor, self.run.context,
                                                           self.blob, job))
        except TrialCancelled as cancelled:
            return TrialDone(self.run, cancelled.result, cancelled=True)

    def finishing(self) -> None:
        pass  # nothing waits here: a trial comes back finished

    async def close(self) -> None:
        await self.executor.release_run(self.run.context.key)


async def execute_trial(executor: JobExecutor, context: RunContext, blob: bytes,
                        job: TrialJob) -> TrialResult:
    """Run one trial on the executor. Cancelled, it asks the workers to stop the run's trials
    and raises :class:`TrialCancelled` with the evidence the trial wrote (or a plain
    cancellation when it had not started)."""
    future = executor.submit_job(context, blob, job)
    try:
        outcome = await asyncio.shield(future)
    except asyncio.CancelledError:
        await executor.cancel_run(context.key)
        try:
            outcome = await asyncio.wait_for(asyncio.shield(future), CANCEL_GRACE_SECONDS)
        except (TimeoutError, WorkerLost):
            raise asyncio.CancelledError from None
        if outcome.not_started or outcome.report is None:
            raise
        _log_records(outcome)
        raise TrialCancelled(_result_of(outcome)) from None
    except WorkerLost as lost:
        outcome = TrialOutcome(job.index, lost=str(lost))
    executor.peak_rss_kib[outcome.worker] = max(executor.peak_rss_kib.get(outcome.worker, 0),
                                                outcome.worker_peak_rss_kib)
    _log_records(outcome)
    if outcome.report is None:
        reason = outcome.lost or "the worker handed back no result"
        return await asyncio.to_thread(lost_trial, context, job, reason, code=outcome.lost_code)
    return _result_of(outcome)


def _result_of(outcome: TrialOutcome) -> TrialResult:
    assert outcome.report is not None
    return TrialResult(outcome.report, trial_summary(outcome.report), cancelled=outcome.cancelled,
                       turn_metrics=outcome.turn_metrics, probes=outcome.probes,
                       loop_lag=outcome.loop_lag)


def _log_records(outcome: TrialOutcome) -> None:
    """The worker's records of the trial go to the run's evaluator.log (and the console)."""
    handle_records(outcome.logs, note=f"[worker {outcome.worker}]")
    outcome.logs = []


def lost_trial(context: RunContext, job: TrialJob, reason: str, *,
               code: str = "worker_lost") -> TrialResult:
    """A trial whose worker was lost: a failed execution, keeping every file it had written. A
    trial that had finished (its report on disk, or in the store its worker publishes to)
    before its result was lost keeps its report."""
    if context.store_url is not None and code == "worker_lost":
        # its worker may have published it before it was lost (a worker that said why it
        # failed, e.g. worker_publish_failed, published nothing new)
        published = published_trial(context.store_url, job.index, job.seed)
        if published is not None:
            return published
    trial_dir = context.bundle / trial_folder(job.index)
    for marker in context.bundle.glob(running_markers(job.index)):
        marker.unlink(missing_ok=True)
    report_path = trial_dir / TRIAL_REPORT
    if report_path.is_file():
        try:
            report = TrialReport.model_validate_json(report_path.read_bytes())
            if report.trial == job.index and report.seed == job.seed:
                return read_trial_result(trial_dir, report)
        except (OSError, ValueError):
            pass  # a report cut short: the trial is lost after all
    loaded = context.loaded
    message = loaded.scrubber.scrub_text(reason)
    logger.error("trial-%03d: %s", job.index, message)
    try:
        present = sorted(p.name for p in trial_dir.iterdir() if not p.name.startswith("."))
    except OSError:
        present = []
    now = time.time()
    report = unscored_report(
        loaded, index=job.index, seed=job.seed, run_id=context.run_id, attempt=job.attempt,
        failure=ExecutionFailure(kind="runner", code=code, message=message),
        started_wall=now, ended_wall=now,
        files=sorted({*present, TRIAL_REPORT} - {f"{TRIAL_REPORT}.tmp"}))
    try:
        make_folder(trial_dir)
        write_json(report_path, filter_model(report, run_redactor(context.loaded)))
    except OSError as error:
        logger.error("trial-%03d: the trial report could not be written: %s", job.index,
                     error.strerror or type(error).__name__)
    return TrialResult(report, trial_summary(report))
