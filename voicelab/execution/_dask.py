"""The Dask executor: trials submitted to a ``dask.distributed`` cluster.

voicelab needs only the scheduler's address (``--scheduler tcp://host:8786``); how the cluster
is started (``dask scheduler``/``dask worker``, dask-jobqueue, Kubernetes, Coiled) is the user's
choice. Without an address a ``LocalCluster`` of ``workers`` processes is started for the run.

Each trial is one task: an ``async`` function that hands the trial to the worker's trial
process (:mod:`._trial_process`: a process of its own beside the worker, with its own trial loop,
as a local worker process has), so neither the Dask worker's event loop (heartbeats, transfers)
nor its GIL is in the way of the loop stamping audio arrivals. A Dask worker runs as many
trials at once as it has threads (``dask worker --nthreads``): the threads only wait.

Where a trial's folder is written: a run whose bundle is in a store (``--artifacts-dir
s3://...``) has each worker publish its own trials (:func:`_published_trial`): the trial is
written in a scratch folder of the worker, published to the store (every file, the report
last), and the scratch copy removed; only its outcome travels back. The worker opens the store
with its own environment (credentials, endpoint). A local bundle is written by the workers at
the caller's paths (a shared file system). Either way a worker reads the files the suite names
(audio assets, script audio, plugin modules, speech models) at the caller's paths.

A worker that dies mid-trial must not run the trial twice (the scheduler reschedules the tasks
of a lost worker): each submission leaves a marker in the bundle while it runs, and a second
execution of the same submission returns the trial as lost instead of running it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import os
import pickle
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ..artifacts import (
    TRIAL_REPORT,
    RemoteLocation,
    open_remote,
    publish_trial,
    remote_exists,
    running_marker,
    trial_folder,
)
from ..errors import ConfigError, MissingDependencyError, os_reason
from ._process_run import ProcessRun
from ._protocol import (
    Executor,
    ExecutorRun,
    RunContext,
    RunSpec,
    TrialJob,
    TrialOutcome,
    WorkerLost,
)
from ._registry import check_workers
from ._staging import attempt_marker, speech_cache_dir
from ._trial_process import existing_trial_process, trial_process

logger = logging.getLogger(__name__)

#: Connecting to a scheduler gives up after this long (a wrong address is a configuration error).
CONNECT_TIMEOUT_SECONDS = 20.0
#: The Dask configuration of the ``LocalCluster`` a run starts: no statistical profiler (it
#: samples only tasks running in threads, and a trial's task is a coroutine that waits) and a
#: slow health tick, so a worker's own loop wakes rarely and leaves the cores to the trial
#: processes (benchmarks/README.md has the figures).
#: Nor does its nanny set ``MALLOC_TRIM_THRESHOLD_`` (see :mod:`._trial_process`): it would set
#: it in the caller's own environment too, inherited by every process the caller starts after
#: (a product launched per run, local worker processes of a later run).
LOCAL_CLUSTER_CONFIG = {"distributed.worker.profile.enabled": False,
                        "distributed.admin.tick.interval": "500ms",
                        "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def require_distributed() -> Any:
    """The ``distributed`` module, or the configuration error saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise MissingDependencyError("distributed", extra="dask",
                                     purpose="the dask executor (--executor dask)",
                                     key="executor") from None
    return distributed


RESCHEDULED = ("the Dask worker running it was lost (the scheduler rescheduled it; a trial is "
               "never run twice)")
#: The failed execution of a trial its worker could not publish to the store.
PUBLISH_FAILED = "worker_publish_failed"


async def dask_trial(blob: bytes, job: TrialJob, attempt: str) -> TrialOutcome:
    """The task run on a Dask worker: one trial, in the worker's trial process."""
    context: RunContext = pickle.loads(blob)
    if context.store_url is not None:
        return await _published_trial(context, job, attempt)
    marker = context.bundle / running_marker(job.index, attempt)
    if marker.exists():  # a rescheduled task: the worker that started it died
        return TrialOutcome(job.index, lost=RESCHEDULED)
    marker.touch()
    try:
        return await _in_trial_process(context.key, blob, job)
    finally:
        marker.unlink(missing_ok=True)


async def _in_trial_process(key: str, blob: bytes, job: TrialJob) -> TrialOutcome:
    process = trial_process()
    try:
        return await asyncio.wrap_future(process.submit(key, blob, job))
    except WorkerLost as lost:
        return TrialOutcome(job.index, lost=str(lost), worker=process.name)


def _worker_name() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"


def _reason(error: BaseException) -> str:
    message = error.message if isinstance(error, ConfigError) else None
    return message or os_reason(error) or \
        " ".join(str(error).split()) or type(error).__name__


def _claim(store_url: str, index: int, attempt: str) -> tuple[RemoteLocation, bool]:
    """The run's store folder and whether this attempt is new (its marker now in the store)
    or a rescheduled one (the marker was there: the worker that started it died)."""
    run = open_remote(store_url, key="artifacts_dir")
    if run is None:
        raise ConfigError("is not a store URL", source=store_url, key="artifacts_dir")
    marker = attempt_marker(run, index, attempt)
    if remote_exists(marker):
        return run, False
    run.fs.pipe_file(marker.path, b"")  # also proves this worker can write to the store
    return run, True


def _publish(folder: Path, run: RemoteLocation, index: int, attempt: str) -> bool:
    """Publish the trial folder (True when its report is now in the store); the attempt's
    marker goes either way."""
    try:
        if not folder.is_dir():
            return False
        finished = (folder / TRIAL_REPORT).is_file()
        publish_trial(folder, run)
        return finished
    finally:
        marker = attempt_marker(run, index, attempt)
        try:
            run.fs.rm_file(marker.path)
        except Exception as error:  # noqa: BLE001 - a leftover hidden object, read by no one
            logger.debug("could not remove %s: %s", marker.url, _reason(error))


async def _published_trial(context: RunContext, job: TrialJob, attempt: str) -> TrialOutcome:
    """A trial of a run whose bundle is in a store, on a worker that may not see the caller's
    disk: written in a scratch folder of this worker, published from here (report last), the
    scratch copy removed. A trial that cannot be published is a failed execution that says
    why and where its evidence stayed."""
    worker = _worker_name()
    name = trial_folder(job.index)
    try:
        run, new = await asyncio.to_thread(_claim, str(context.store_url), job.index, attempt)
    except Exception as error:  # noqa: BLE001 - every store raises its own types
        return TrialOutcome(job.index, worker=worker, lost_code=PUBLISH_FAILED,
                            lost=f"the Dask worker {worker} cannot write to the store "
                                 f"{context.store_url}: {_reason(error)}")
    if not new:
        return TrialOutcome(job.index, lost=RESCHEDULED, worker=worker)
    scratch = Path(tempfile.mkdtemp(prefix="voicelab-trial-"))
    # the worker's own speech cache: the caller's folder may be on another machine
    here = dataclasses.replace(context, bundle=scratch, speech_cache_dir=speech_cache_dir())
    keep = False
    try:
        outcome = await _in_trial_process(here.key, pickle.dumps(here), job)
        try:
            if await asyncio.to_thread(_publish, scratch / name, run, job.index, attempt):
                outcome.logs.append(logging.makeLogRecord({
                    "name": __name__, "levelno": logging.INFO, "levelname": "INFO",
                    "msg": f"{name}: published to {run.child(name).url} by the worker"}))
        except Exception as error:  # noqa: BLE001 - every store raises its own types
            keep = True
            outcome.report = None
            outcome.lost_code = PUBLISH_FAILED
            outcome.lost = (f"the Dask worker {worker} could not publish the trial to "
                            f"{run.child(name).url}: {_reason(error)}; its evidence is kept "
                            f"on that worker in {scratch / name}")
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return outcome


def _cancel_on_worker(key: str) -> None:
    process = existing_trial_process()
    if process is not None:
        process.cancel_run(key)


def _release_on_worker(key: str) -> None:
    process = existing_trial_process()
    if process is not None:
        process.release_run(key)


def _connect_failure(error: BaseException) -> str:
    """Why connecting failed, in one line. Something other than a scheduler at the address
    (an HTTP server, a database) answers with bytes that Dask reads as a frame length of
    exabytes: that is not a memory problem of this machine but the wrong address."""
    if isinstance(error, MemoryError):
        return "what answers there is not a Dask scheduler (its reply is no Dask message)"
    return " ".join(str(error).split()) or type(error).__name__


class DaskExecutor:
    """Trials as tasks of a ``dask.distributed`` cluster: at ``scheduler``, of a given
    ``client``'s cluster, or of a ``LocalCluster`` of ``workers`` processes started here."""

    def __init__(self, scheduler: str | None = None, *, client: Any = None,
                 workers: int | None = None, parallel: int = 1):
        self.scheduler = scheduler
        self.workers = workers
        self.parallel = parallel
        self._given = client
        self._client: Any = None
        self._cluster: Any = None
        self.peak_rss_kib: dict[str, int] = {}
        self._cancelled: set[str] = set()
        self.description = "dask"

    #: the workers may run on other machines: a run bound for a store has them publish their
    #: own trials (see :func:`dask_trial`)
    shares_disk = False

    @classmethod
    def for_run(cls, *, workers: int | None, scheduler: str | None, parallel: int) -> Executor:
        """The cluster at ``scheduler``, else a ``LocalCluster`` of ``workers`` processes
        (default: one per core) started for the run."""
        return cls(scheduler=scheduler, workers=check_workers(workers), parallel=parallel)

    async def start(self) -> None:
        if self._client is not None:
            return
        distributed = require_distributed()
        address = self.scheduler
        if self._given is not None:
            address = self._given.scheduler.address
        if address is None:
            workers = self.workers or 1
            import dask

            # a trial's task only waits on the worker's trial process: one thread per trial
            with dask.config.set(LOCAL_CLUSTER_CONFIG):  # the nannies pass it to their workers
                self._cluster = await distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=max(1, math.ceil(self.parallel / workers)),
                    processes=True, asynchronous=True, dashboard_address=None)
            address = self._cluster.scheduler_address
        client = None
        try:
            client = distributed.Client(address, asynchronous=True,
                                        timeout=CONNECT_TIMEOUT_SECONDS)
            self._client = await asyncio.wait_for(client, CONNECT_TIMEOUT_SECONDS + 5)
        except Exception as error:  # noqa: BLE001 - a peer that is no scheduler says anything
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.close(), 5)
            if self._cluster is not None:
                await self._cluster.close()
            raise ConfigError(f"cannot connect to the Dask scheduler at {address}: "
                              f"{_connect_failure(error)}", key="scheduler") from None
        self.description = f"dask, scheduler {address}"

    async def open_run(self, run: RunSpec) -> ExecutorRun:
        return ProcessRun(self, run)

    def submit_job(self, context: RunContext, blob: bytes, job: TrialJob
                   ) -> asyncio.Future[TrialOutcome]:
        attempt = uuid.uuid4().hex[:12]
        task = self._client.submit(dask_trial, blob, job, attempt, pure=False, retries=0,
                                   key=f"voicelab-{context.key}-{trial_folder(job.index)}-{attempt}")
        return asyncio.ensure_future(self._outcome(task))

    async def _outcome(self, task: Any) -> TrialOutcome:
        try:
            outcome: TrialOutcome = await task
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - KilledWorker, a lost connection...
            raise WorkerLost(f"the Dask worker running it was lost ({type(error).__name__}: "
                             f"{' '.join(str(error).split())[:300]})") from None
        return outcome

    async def _run_everywhere(self, function: Any, key: str) -> None:
        try:
            await asyncio.wait_for(self._client.run(function, key), CONNECT_TIMEOUT_SECONDS)
        except Exception:  # noqa: BLE001 - a worker that is gone has nothing to cancel
            pass

    async def cancel_run(self, key: str) -> None:
        if key not in self._cancelled:  # every trial in flight asks; the workers hear it once
            self._cancelled.add(key)
            await self._run_everywhere(_cancel_on_worker, key)

    async def release_run(self, key: str) -> None:
        self._cancelled.discard(key)
        await self._run_everywhere(_release_on_worker, key)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._cluster is not None:
            await self._cluster.close()
            self._cluster = None
