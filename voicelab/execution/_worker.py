"""The worker side of the executors: a process's own event loop that runs trials of many runs.

A worker process (a local one, or a Dask worker's trial process) runs :func:`serve`: jobs come
in on its channel, outcomes go back as trials finish. Its :class:`TrialService` (one per
process) is one thread with its own event loop, on which every trial the process is given
runs. What a run shares (the validated plan, the speech provider) is prepared once per process
and run, on the first trial, and released when the run ends. A trial writes its own folder of the bundle (the
parent never sees its audio) and hands back only its report and per-response metrics.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import gc
import importlib
import logging
import os
import pickle
import resource
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from .._validate import RunPlan, validate_run
from ..config import LoadedRun
from ..runner import TrialCancelled, crashed_trial, open_speech, run_trial
from ._child import Channel, RecordCollector, collect_in_this_context
from ._event_loop import use_chosen_event_loop
from ._protocol import RunContext, TrialJob, TrialOutcome, trial_plan
from ._start_spacing import start_slot
from ._tuning import PROCESS_TUNING

logger = logging.getLogger(__name__)


@dataclass
class _PreparedRun:
    plan: RunPlan
    speech: Any


#: ``/proc/self/status`` is a few KiB; more is not the file this reads.
MAX_STATUS_BYTES = 64 * 1024


def peak_rss_kib() -> int:
    """This process's own peak resident set size in KiB.

    Linux's ``ru_maxrss`` keeps, across exec, the peak of the process that forked this one (a
    parent holding 500 MB gives its worker 512 MB whatever the worker does); ``VmHWM`` in
    ``/proc/self/status`` is this process's high-water mark since exec. Where there is no
    ``/proc``, ``ru_maxrss`` (KiB; bytes on macOS)."""
    own = _own_peak_kib()
    if own is not None:
        return own
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak // 1024) if sys.platform == "darwin" else int(peak)


def _own_peak_kib() -> int | None:
    """``VmHWM`` of ``/proc/self/status`` in KiB (``None``: not there, or not readable)."""
    try:
        with open("/proc/self/status", "rb") as status:
            text = status.read(MAX_STATUS_BYTES)
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(b":")
        fields = value.split()
        if name == b"VmHWM" and fields and fields[0].isdigit():
            return int(fields[0])
    return None


class TrialService:
    """A worker process's trial loop (one per process: :func:`trial_service`)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._runs: dict[str, _PreparedRun] = {}
        self._preparing: dict[str, asyncio.Future[_PreparedRun]] = {}
        self._tasks: dict[str, set[asyncio.Task[Any]]] = {}
        self._cancelled: set[str] = set()
        self.name = f"{os.uname().nodename}:{os.getpid()}"
        logging.getLogger("voicelab").addHandler(RecordCollector(logging.INFO))
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
        records = collect_in_this_context()
        outcome = TrialOutcome(job.index, logs=records, worker=self.name)
        task = asyncio.current_task()
        assert task is not None
        if context.key in self._cancelled:
            outcome.not_started = True
            return outcome
        self._tasks.setdefault(context.key, set()).add(task)
        try:
            # the process settings of a tuned run while trials run here (a worker process
            # opts in; restored when its last trial ends)
            with PROCESS_TUNING.during_run():
                await self._trial(context, job, outcome)
        finally:
            tasks = self._tasks.get(context.key)
            if tasks is not None:
                tasks.discard(task)
                if not tasks:
                    del self._tasks[context.key]
            outcome.worker_peak_rss_kib = peak_rss_kib()
        return outcome

    async def _trial(self, context: RunContext, job: TrialJob, outcome: TrialOutcome) -> None:
        try:
            prepared = await self._prepare(context)
            await start_slot()
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
        trial = trial_plan(prepared.plan, context, job, speech=prepared.speech)
        started_wall = time.time()
        try:
            result = await run_trial(trial)
        except TrialCancelled as cancelled:
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
#: Imported before the first trial of a worker: an import during a trial holds the loop and
#: delays the arrival stamps of every other trial of the worker by as much.
WARM_IMPORTS = ("scipy.ndimage", "scipy.signal", "scipy.stats", "soundfile")


def _prepare_plan(loaded: LoadedRun) -> RunPlan:
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


def serve(fd: int) -> None:
    """A worker process (a local one, a Dask worker's trial process): jobs in on the channel,
    outcomes out as trials finish. It ends with its parent, and its trials in flight with it."""
    # the parent owns the signals: it cancels the run and the trials write their evidence
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    package = logging.getLogger("voicelab")
    package.addHandler(logging.NullHandler())  # the parent logs the records
    package.setLevel(logging.INFO)  # evaluator.log keeps INFO records
    PROCESS_TUNING.opt_in()  # a process of voicelab's own
    use_chosen_event_loop()  # ... so its loop is voicelab's choice (before the service's loop)
    channel = Channel.of_fd(fd)
    service = trial_service()
    contexts: dict[str, RunContext] = {}

    def reply(job_id: int, index: int, done: concurrent.futures.Future[TrialOutcome]) -> None:
        try:
            outcome = done.result()
        except BaseException as error:  # noqa: BLE001 - the parent must hear of every job
            outcome = TrialOutcome(index, lost=f"{type(error).__name__}: {error}",
                                   worker=service.name)
        try:
            channel.send(("done", job_id, outcome))
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            channel.send(("done", job_id, TrialOutcome(
                index, worker=service.name,
                lost=f"the trial's outcome could not be sent back: {error}")))
        except OSError:
            pass  # the parent is gone

    while True:
        try:
            message = channel.receive()
        except (EOFError, OSError):
            break  # the parent is gone: so are we
        kind = message[0]
        if kind == "run":
            _, job_id, key, blob, job = message
            if blob is not None:
                contexts[key] = pickle.loads(blob)
            done = service.submit(contexts[key], job)
            done.add_done_callback(functools.partial(reply, job_id, job.index))
        elif kind == "cancel":
            service.cancel_run(message[1])
        elif kind == "release":
            contexts.pop(message[1], None)
            service.release_run(message[1])
        elif kind == "stop":
            break
    # without waiting for the threads of the trials in flight (they end with the process)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
