"""What an executor is: where a run's trials run, and what crosses to it.

A run opens itself on an executor (:meth:`Executor.open_run`) and submits its trials one job at a
time (:meth:`ExecutorRun.submit`); the call of a submitted trial holds a slot of the run's
concurrency until ``submit`` returns, and the trial is then settled (:meth:`TrialCall.settle`):
its result is handed to the run at once (a worker process's trial comes back scored) or once it
is scored while the next calls run (a trial run on the caller's event loop).

Built-in executors are named in :data:`voicelab.execution.EXECUTORS` (``inline``, ``local``,
``dask``); a plug-in is named by its dotted path, like an adapter.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._validate import RunPlan
from ..artifacts import LoopLag, ProbeOutcome, TrialReport, TurnMetrics, trial_folder
from ..config import LoadedRun
from ..errors import ConfigError
from ..runner import Failure, TrialPlan, TrialResult

#: Where a call run in this process is scored (``RunOptions(scoring=...)``): in the scoring
#: process beside the event loop, or on the loop.
SCORING_MODES = ("process", "loop")


def scoring_mode(value: str, *, key: str = "scoring") -> str:
    if value not in SCORING_MODES:
        raise ConfigError(f"expected one of {', '.join(SCORING_MODES)}, got {value!r}", key=key)
    return value


class WorkerLost(Exception):
    """The process running a trial died (or the trial could not be handed back)."""


@dataclass(frozen=True)
class RunContext:
    """What every trial of one run shares; pickled once by the parent, prepared once per worker."""

    #: unique per run (its run id): the key of the prepared run in every worker
    key: str
    loaded: LoadedRun
    run_id: str
    bundle: Path
    speech_cache_dir: Path
    run_product_settings: Mapping[str, Any] | None = None
    run_product_failure: Failure | None = None
    #: the store folder of the bundle when the workers publish their trials there themselves
    #: (Dask workers, which may not share this machine's disk): ``bundle`` is then only the
    #: caller's staging folder, which a worker never writes
    store_url: str | None = None


@dataclass(frozen=True)
class TrialJob:
    """One trial an executor runs: its index, seed and attempt, and what it runs with."""

    index: int
    seed: int
    #: an inconclusive trial run again is attempt 2, ... (its own session id)
    attempt: int = 1


@dataclass
class TrialOutcome:
    """What comes back from a worker: the small summary of a trial, never its audio."""

    index: int
    report: TrialReport | None = None
    turn_metrics: list[TurnMetrics] = field(default_factory=list)
    #: the trial's selectivity probes (the run report's table) and its loop lag (a lag budget)
    probes: list[ProbeOutcome] = field(default_factory=list)
    loop_lag: LoopLag | None = None
    cancelled: bool = False
    #: the run was cancelled before this trial started: nothing ran, nothing was written
    not_started: bool = False
    #: the trial could not run here (the worker lost, its run could not be prepared): why
    lost: str | None = None
    #: the code of that failed execution
    lost_code: str = "worker_lost"
    #: the worker's log records of this trial
    logs: list[logging.LogRecord] = field(default_factory=list)
    worker: str = ""
    #: the worker process's peak resident memory so far, in KiB (``ru_maxrss``)
    worker_peak_rss_kib: int = 0


@dataclass
class RunSpec:
    """A run as its executor sees it: the context its workers prepare, what only this process
    holds (the validated plan), and where its trials' results go."""

    context: RunContext
    plan: RunPlan
    #: trials of the run at once (also: finished calls that may wait to be scored)
    concurrency: int
    #: where a call run in this process is scored: ``process`` or ``loop``
    scoring: str
    #: the run takes a trial's result (the progress, the running report)
    finished: Callable[[TrialResult], Awaitable[None]]
    #: work a settled trial still does (its scoring); the run awaits it before it ends
    pending: set[asyncio.Task[None]] = field(default_factory=set)
    _blob: bytes | None = None

    @property
    def blob(self) -> bytes:
        """The context, pickled once for every worker."""
        if self._blob is None:
            self._blob = pickle.dumps(self.context)
        return self._blob

    def trial_plan(self, job: TrialJob, *, speech: Any = None) -> TrialPlan:
        return trial_plan(self.plan, self.context, job, speech=speech)

    def track(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)


def trial_plan(plan: RunPlan, context: RunContext, job: TrialJob, *, speech: Any) -> TrialPlan:
    """The plan of trial ``job`` of the run (``plan``, validated where the trial runs)."""
    return TrialPlan(loaded=plan.loaded, index=job.index, seed=job.seed,
                     trial_dir=context.bundle / trial_folder(job.index),
                     environment=plan.environment, adapter_cls=plan.adapter_cls,
                     persona_cls=plan.persona_cls, speech=speech,
                     probe_factory=plan.probe_factory,
                     speech_metrics=plan.loaded.run.speech_metrics, run_id=context.run_id,
                     script_audio=plan.script_audio, turn_taking=plan.turn_taking,
                     endpoint_settings=plan.endpoint_settings,
                     run_product_settings=context.run_product_settings,
                     run_product_failure=context.run_product_failure, attempt=job.attempt)


class TrialCall(Protocol):
    """A submitted trial whose call has ended."""

    #: the event loop's lag while the call ran (for a lag budget)
    loop_lag: LoopLag | None
    #: the run was interrupted while the trial ran (its evidence is kept all the same)
    cancelled: bool

    async def settle(self) -> None:
        """Hand the trial's result to the run: now, or from work in ``run.pending`` once it
        is scored. Returns when there is room for it (at most ``concurrency`` calls wait to
        be scored); interrupted meanwhile, the trial is scored all the same."""
        ...


class TrialDone:
    """A trial whose result is known when its call ends (a worker's finished trial, a trial
    that crashed): settling it hands the result to the run."""

    def __init__(self, run: RunSpec, result: TrialResult, *, cancelled: bool = False):
        self.run = run
        self.result = result
        self.loop_lag = result.loop_lag
        self.cancelled = cancelled

    async def settle(self) -> None:
        await self.run.finished(self.result)


class ExecutorRun(Protocol):
    """One run's trials on an executor."""

    async def submit(self, job: TrialJob) -> TrialCall:
        """Run the trial ``job``; returns once its call has ended. Cancelled while the call
        runs, it keeps the evidence the trial gathered (the returned call says ``cancelled``);
        before the call started, it raises the cancellation."""
        ...

    def finishing(self) -> None:
        """No trial is submitted until the next :meth:`submit`: finish what waits."""
        ...

    async def close(self) -> None:
        """The run ended: release what its trials shared."""
        ...


@runtime_checkable
class Executor(Protocol):
    """Where trials run (``inline``: the caller's event loop; ``local``: worker processes of
    this machine; ``dask``: a Dask cluster). One executor may serve several runs (a sweep's).

    ``shares_disk`` is False when the workers may not see the caller's disk: a run bound for a
    store then has its workers publish their own trials (``RunContext.store_url``)."""

    description: str
    shares_disk: bool

    async def start(self) -> None: ...

    async def open_run(self, run: RunSpec) -> ExecutorRun: ...

    async def close(self) -> None: ...


@runtime_checkable
class ExecutorFactory(Protocol):
    """An executor class of the registry: made for a run from ``arun``'s choices."""

    @classmethod
    def for_run(cls, *, workers: int | None, scheduler: str | None, parallel: int) -> Executor:
        ...
