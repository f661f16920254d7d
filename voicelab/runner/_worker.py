"""The worker side of the executors: a process's own event loop that runs trials of many runs.

A :class:`TrialService` lives once per worker process (a local worker process, a Dask worker):
one thread with its own event loop, on which every trial the process is given runs. What a run
shares (the validated plan, the speech provider) is prepared once per process and run, on the
first trial, and released when the run ends. A trial writes its own folder of the bundle (the
parent never sees its audio) and hands back only its report and per-response metrics.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import gc
import importlib
import logging
import os
import pickle
import resource
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts import LoopLag, ProbeOutcome, TrialReport, TurnMetrics
from ..config import LoadedRun
from ._conversation import Failure
from ._speech import open_speech
from ._trial import TrialPlan, _TrialCancelled, crashed_trial, run_trial

logger = logging.getLogger(__name__)


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
    #: the worker's log records of this trial: (level, logger name, message)
    logs: list[tuple[int, str, str]] = field(default_factory=list)
    worker: str = ""
    #: the worker process's peak resident memory so far, in KiB (``ru_maxrss``)
    worker_peak_rss_kib: int = 0


_trial_logs: contextvars.ContextVar[list[tuple[int, str, str]] | None] = \
    contextvars.ContextVar("voicelab_trial_logs", default=None)
_FORMATTER = logging.Formatter()


class _TrialLogCollector(logging.Handler):
    """Keeps each trial's log records with its outcome: the parent writes them to the run's
    evaluator.log, as if the trial had run in-process."""

    def emit(self, record: logging.LogRecord) -> None:
        records = _trial_logs.get()
        if records is None:
            return
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + _FORMATTER.formatException(record.exc_info)
        records.append((record.levelno, record.name, message))


@dataclass
class _PreparedRun:
    plan: Any  # RunPlan
    speech: Any


def peak_rss_kib() -> int:
    """This process's peak resident set size in KiB (Linux reports ``ru_maxrss`` in KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak // 1024) if sys.platform == "darwin" else int(peak)


class TrialService:
    """A worker process's trial loop (one per process: :func:`trial_service`)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._runs: dict[str, _PreparedRun] = {}
        self._preparing: dict[str, asyncio.Future[_PreparedRun]] = {}
        self._tasks: dict[str, set[asyncio.Task[Any]]] = {}
        self._cancelled: set[str] = set()
        self.name = f"{os.uname().nodename}:{os.getpid()}"
        logging.getLogger("voicelab").addHandler(_TrialLogCollector(logging.INFO))
        self._thread = threading.Thread(target=self._serve, name="voicelab-trials", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    # --- called from any thread ---------------------------------------------------------------

    def submit(self, context: RunContext | bytes, job: TrialJob
               ) -> concurrent.futures.Future[TrialOutcome]:
        return asyncio.run_coroutine_threadsafe(self._run(context, job), self.loop)

    def cancel_run(self, key: str) -> None:
        """Cancel the run's trials here: those in flight write their evidence and come back
        cancelled; those not started yet come back ``not_started``."""
        self.loop.call_soon_threadsafe(self._cancel, key)

    def release_run(self, key: str) -> None:
        asyncio.run_coroutine_threadsafe(self._release(key), self.loop)

    # --- on the trial loop ----------------------------------------------------------------------

    def _cancel(self, key: str) -> None:
        if key in self._cancelled:  # a second cancel would cut short the evidence writing
            return
        self._cancelled.add(key)
        for task in list(self._tasks.get(key, ())):
            task.cancel()

    async def _release(self, key: str) -> None:
        self._cancelled.discard(key)
        prepared = self._runs.pop(key, None)
        if prepared is not None:
            await prepared.speech.aclose()

    async def _prepare(self, context: RunContext) -> _PreparedRun:
        prepared = self._runs.get(context.key)
        if prepared is not None:
            return prepared
        waiting = self._preparing.get(context.key)
        if waiting is None:  # the first trial of the run here validates it (off the loop)
            waiting = self.loop.create_future()
            self._preparing[context.key] = waiting
            try:
                plan = await asyncio.to_thread(_prepare_plan, context.loaded)
                speech = open_speech(context.loaded, plan.speech_cls,
                                     cache_dir=context.speech_cache_dir)
                self._runs[context.key] = _PreparedRun(plan, speech)
                waiting.set_result(self._runs[context.key])
                gc.freeze()  # the prepared run is long-lived: keep it out of collections
            except asyncio.CancelledError:
                waiting.cancel()
                raise
            except Exception as error:
                waiting.set_exception(error)
                waiting.exception()  # retrieved: the trials waiting on it each report it
                raise
            finally:
                del self._preparing[context.key]
        return await asyncio.shield(waiting)

    async def _run(self, given: RunContext | bytes, job: TrialJob) -> TrialOutcome:
        context: RunContext = pickle.loads(given) if isinstance(given, bytes) else given
        records: list[tuple[int, str, str]] = []
        _trial_logs.set(records)
        outcome = TrialOutcome(job.index, logs=records, worker=self.name)
        task = asyncio.current_task()
        assert task is not None
        if context.key in self._cancelled:
            outcome.not_started = True
            return outcome
        self._tasks.setdefault(context.key, set()).add(task)
        from ._run import _tuning

        # the process settings an in-process run uses, while trials run here (a Dask worker
        # may be the caller's own process: they are restored when its last trial ends)
        _tuning.__enter__()
        try:
            await self._trial(context, job, outcome)
        finally:
            _tuning.__exit__()
            tasks = self._tasks.get(context.key)
            if tasks is not None:
                tasks.discard(task)
                if not tasks:
                    del self._tasks[context.key]
            outcome.worker_peak_rss_kib = peak_rss_kib()
        return outcome

    async def _trial(self, context: RunContext, job: TrialJob, outcome: TrialOutcome) -> None:
        from ._run import _start_slot

        try:
            prepared = await self._prepare(context)
            await _start_slot()
        except asyncio.CancelledError:
            outcome.not_started = True
            return
        except Exception as error:  # noqa: BLE001 - reported as the trial's failed execution
            logger.exception("trial-%03d: the run could not be prepared in worker %s",
                             job.index, self.name)
            outcome.lost = context.loaded.scrubber.scrub_text(
                f"the run could not be prepared in worker {self.name}: "
                f"{type(error).__name__}: {error}")
            outcome.lost_code = "worker_setup_failed"
            return
        plan = prepared.plan
        trial = TrialPlan(loaded=plan.loaded, index=job.index, seed=job.seed,
                          attempt=job.attempt,
                          trial_dir=context.bundle / f"trial-{job.index:03d}",
                          environment=plan.environment, adapter_cls=plan.adapter_cls,
                          persona_cls=plan.persona_cls, speech=prepared.speech,
                          probe_factory=plan.probe_factory,
                          speech_metrics=plan.loaded.run.speech_metrics, run_id=context.run_id,
                          script_audio=plan.script_audio, turn_taking=plan.turn_taking,
                          run_product_settings=context.run_product_settings,
                          run_product_failure=context.run_product_failure)
        started_wall = time.time()
        try:
            result = await run_trial(trial)
        except _TrialCancelled as cancelled:
            result = cancelled.result
        except asyncio.CancelledError:
            outcome.not_started = True
            return
        except Exception as error:  # noqa: BLE001 - one broken trial must not stop the run
            logger.exception("trial-%03d failed outside the conversation", job.index)
            result = await asyncio.to_thread(crashed_trial, trial, error,
                                             started_wall=started_wall)
        outcome.report = result.report
        outcome.turn_metrics = result.turn_metrics
        outcome.probes = result.probes
        outcome.loop_lag = result.loop_lag
        outcome.cancelled = result.cancelled


#: Modules a trial imports on first use (evidence and metrics, after the first conversation).
#: Imported before the first trial of a worker: importing scipy.ndimage there held the loop
#: ~1 s and delayed the arrival stamps of every other trial of the worker by as much.
WARM_IMPORTS = ("scipy.ndimage", "scipy.signal", "scipy.stats", "soundfile")


def _prepare_plan(loaded: LoadedRun) -> Any:
    from .._validate import validate_run

    plan = validate_run(loaded)
    for module in WARM_IMPORTS:
        importlib.import_module(module)
    return plan


_service: TrialService | None = None
_service_lock = threading.Lock()


def trial_service() -> TrialService:
    """This process's trial service, started on first use."""
    global _service
    with _service_lock:
        if _service is None:
            _service = TrialService()
        return _service


def existing_trial_service() -> TrialService | None:
    return _service
