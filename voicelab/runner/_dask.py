"""The Dask executor: trials submitted to a ``dask.distributed`` cluster.

voicelab needs only the scheduler's address (``--scheduler tcp://host:8786``); how the cluster
is started (``dask scheduler``/``dask worker``, dask-jobqueue, Kubernetes, Coiled) is the user's
choice. Without an address a ``LocalCluster`` of ``workers`` processes is started for the run.

Each trial is one task: an ``async`` function that hands the trial to the worker process's own
trial loop (:mod:`._worker`), so the Dask worker's event loop (heartbeats, transfers) is not the
one stamping audio arrivals. A Dask worker runs as many trials at once as it has threads
(``dask worker --nthreads``): the threads only wait. Workers read the suite files and write the
bundle at the same paths as the caller (a shared file system).

A worker that dies mid-trial must not run the trial twice (the scheduler reschedules the tasks
of a lost worker): each submission leaves a marker in the bundle while it runs, and a second
execution of the same submission returns the trial as lost instead of running it again.
"""

from __future__ import annotations

import asyncio
import math
import pickle
import uuid
from typing import Any

from ..errors import ConfigError, MissingDependencyError
from ._executors import WorkerLost
from ._worker import RunContext, TrialJob, TrialOutcome, existing_trial_service, trial_service

#: Connecting to a scheduler gives up after this long (a wrong address is a configuration error).
CONNECT_TIMEOUT_SECONDS = 20.0


def require_distributed() -> Any:
    """The ``distributed`` module, or the configuration error saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise MissingDependencyError("distributed", extra="dask",
                                     purpose="the dask executor (--executor dask)",
                                     key="executor") from None
    return distributed


async def dask_trial(blob: bytes, job: TrialJob, attempt: str) -> TrialOutcome:
    """The task run on a Dask worker: one trial, on the worker process's trial loop."""
    context: RunContext = pickle.loads(blob)
    marker = context.bundle / f".trial-{job.index:03d}.{attempt}.running"
    if marker.exists():  # a rescheduled task: the worker that started it died
        return TrialOutcome(job.index, lost="the Dask worker running it was lost (the "
                            "scheduler rescheduled it; a trial is never run twice)")
    marker.touch()
    try:
        return await asyncio.wrap_future(trial_service().submit(context, job))
    finally:
        marker.unlink(missing_ok=True)


def _cancel_on_worker(key: str) -> None:
    service = existing_trial_service()
    if service is not None:
        service.cancel_run(key)


def _release_on_worker(key: str) -> None:
    service = existing_trial_service()
    if service is not None:
        service.release_run(key)


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

    async def start(self) -> None:
        if self._client is not None:
            return
        distributed = require_distributed()
        address = self.scheduler
        if self._given is not None:
            address = self._given.scheduler.address
        if address is None:
            workers = self.workers or 1
            # a trial's task only waits on the worker's trial loop: one thread per trial
            self._cluster = await distributed.LocalCluster(
                n_workers=workers, threads_per_worker=max(1, math.ceil(self.parallel / workers)),
                processes=True, asynchronous=True, dashboard_address=None)
            address = self._cluster.scheduler_address
        try:
            self._client = await asyncio.wait_for(
                distributed.Client(address, asynchronous=True, timeout=CONNECT_TIMEOUT_SECONDS),
                CONNECT_TIMEOUT_SECONDS + 5)
        except (OSError, TimeoutError, ValueError) as error:
            if self._cluster is not None:
                await self._cluster.close()
            reason = " ".join(str(error).split()) or type(error).__name__
            raise ConfigError(f"cannot connect to the Dask scheduler at {address}: {reason}",
                              key="scheduler") from None
        self.description = f"dask, scheduler {address}"

    def submit(self, context: RunContext, blob: bytes, job: TrialJob
               ) -> asyncio.Future[TrialOutcome]:
        attempt = uuid.uuid4().hex[:12]
        task = self._client.submit(dask_trial, blob, job, attempt, pure=False, retries=0,
                                   key=f"voicelab-{context.key}-trial-{job.index:03d}-{attempt}")
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

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._cluster is not None:
            await self._cluster.close()
            self._cluster = None
