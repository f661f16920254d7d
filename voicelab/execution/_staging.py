"""Runs whose bundle lives in a store (``--artifacts-dir s3://bucket/runs``).

The run itself is the local one, pointed at a staging folder that stands for the store folder
(:func:`published`, wrapped around the run); a publisher copies each finished trial folder to
the store while the run goes on (report last, see :class:`voicelab.artifacts.Publisher`) and
everything else when it ends, Ctrl-C included. Resuming a bundle in a store first downloads what resuming reads (the reports and
each trial's voice-metrics.json), so the resumed run's report counts every trial.

With the Dask executor the workers may run on other machines, which cannot write into the
caller's staging folder: each worker then publishes its own trials (:func:`worker_store` names
the store folder in the run context, :mod:`._dask` writes each trial in a scratch folder of
the worker and publishes it); the staging folder holds only the run-level documents, and the
trials a worker could not hand back are read back from the store (:func:`published_trial`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .._location import url_scheme
from ..artifacts import (
    EVALUATOR_LOG,
    MATRIX_REPORT,
    RUN_REPORT,
    TRIAL_REPORT,
    VOICE_METRICS,
    Publisher,
    RemoteLocation,
    TrialReport,
    check_writable,
    fetch,
    open_remote,
    probe_exists,
    published_location,
    register_staging,
    remote_exists,
    resolve_latest,
    running_marker,
    store_error_reason,
    trial_folder,
    unregister_staging,
)
from ..errors import ConfigError
from ..runner import (
    MatrixInterrupted,
    MatrixOutcome,
    RunInterrupted,
    RunOutcome,
    TrialResult,
)
from ._resume import read_trial_result

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Stores whose objects live in one process (a worker elsewhere would publish into its own).
_PROCESS_LOCAL_SCHEMES = frozenset({"memory"})

#: How often finished trials are copied to the store while a run goes on.
PUBLISH_INTERVAL_SECONDS = 1.0
#: What resuming reads of a bundle (its audio and timelines stay in the store).
RESUME_FILES = frozenset({RUN_REPORT, MATRIX_REPORT, TRIAL_REPORT, VOICE_METRICS, EVALUATOR_LOG})


@dataclass
class Stage:
    """A local staging folder standing for ``target`` and the publisher that copies it."""

    staging: Path
    target: RemoteLocation
    publisher: Publisher
    #: the local copy of the bundle to resume
    resume: Path | None = None

    def local(self, location: RemoteLocation) -> Path:
        relative = location.path[len(self.target.path):].strip("/")
        return self.staging.joinpath(*[p for p in relative.split("/") if p])


def store_target(artifacts_dir: str | os.PathLike[str] | None, resume: Any, *,
                 source: str | Path | None) -> tuple[RemoteLocation, RemoteLocation | None] | None:
    """(store folder of the runs, bundle to resume in it) when the run's bundle lives in a
    store; None for a local run."""
    if resume is not None:
        bundle = open_remote(resume, key="resume")
        if bundle is None:
            return None
        bundle = resolve_latest(bundle)
        if not probe_exists(bundle, key="resume"):
            raise ConfigError("no such run folder in the store", source=bundle.url,
                              key="resume")
        return bundle.parent, bundle
    if artifacts_dir is None:
        return None
    root = open_remote(artifacts_dir, source=source, key="artifacts_dir")
    return None if root is None else (root, None)


def speech_cache_dir() -> Path:
    """Where a run bound for a store keeps synthesized speech between runs (a local run keeps
    it in ``<artifacts_dir>/.speech-cache``; a staging folder is removed after each run)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "voicelab" / "speech-cache"


def _link_speech_cache(staging: Path) -> None:
    try:
        cache = speech_cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        (staging / ".speech-cache").symlink_to(cache, target_is_directory=True)
    except OSError as error:  # a read-only home: the cache lasts for this run only
        logger.debug("no persistent speech cache for store runs: %s", error)


def open_stage(target: RemoteLocation, *, resume: RemoteLocation | None,
               latest: str | None, source: str | Path | None) -> Stage:
    """Check the store and make the staging folder (with the copy of a bundle to resume);
    ``LATEST`` will name ``latest`` once its first objects are published (blocking I/O: call
    it in a thread)."""
    if resume is None:
        check_writable(target, source=source, key="artifacts_dir")
    # resolved: the run resolves its bundle path, and reports name it by its store URL
    staging = Path(tempfile.mkdtemp(prefix="voicelab-staging-")).resolve()
    # a new run's folder is named by its new run id: nothing in the store to replace
    stage = Stage(staging, target, Publisher(staging, target, fresh=resume is None,
                                             latest=latest))
    _link_speech_cache(staging)
    try:
        if resume is not None:
            stage.resume = stage.local(resume)
            fetch(resume, stage.resume, names=RESUME_FILES)
        stage.publisher.mark_present()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    register_staging(staging, target.url)
    return stage


def worker_store(bundle: Path) -> str | None:
    """The store URL of a staged bundle, for workers that publish their own trials; None for
    a local bundle and for a store only this process sees (``memory://``: its workers write
    into the staging folder, so they must share this machine's disk)."""
    location = published_location(bundle)
    if location == str(bundle) or url_scheme(location) in _PROCESS_LOCAL_SCHEMES:
        return None
    return location


def attempt_marker(run: RemoteLocation, index: int, attempt: str) -> RemoteLocation:
    """The object a worker keeps in the run's store folder while it runs a trial (hidden:
    readers and downloads skip names that start with a dot)."""
    return run.child(running_marker(index, attempt))


def published_trial(store_url: str, index: int, seed: int) -> TrialResult | None:
    """A trial whose worker was lost: its result read back from the store when the worker
    had published it (no attempt's marker left, its report there for this trial and seed),
    else None. A marker left means the worker died before its publishing ended: a report in
    the store is then an earlier attempt's (a resumed run's), and the markers are removed
    (blocking I/O: call it in a thread)."""
    try:
        run = open_remote(store_url)
        if run is None:
            return None
        markers = run.fs.glob(attempt_marker(run, index, "*").path)
        if markers:
            run.fs.rm(markers)
            return None
        trial = run.child(trial_folder(index))
        if not remote_exists(trial.child(TRIAL_REPORT)):
            return None
        with tempfile.TemporaryDirectory(prefix="voicelab-lost-") as scratch:
            folder = fetch(trial, Path(scratch) / trial.name,
                           names={TRIAL_REPORT, VOICE_METRICS})
            report = TrialReport.model_validate_json((folder / TRIAL_REPORT).read_bytes())
            if report.trial != index or report.seed != seed:
                return None
            return read_trial_result(folder, report)
    except Exception as error:  # noqa: BLE001 - the trial is then reported lost
        logger.warning("trial-%03d: could not read what its worker published to %s: %s",
                       index, store_url, store_error_reason(error))
        return None


async def _publish_periodically(publisher: Publisher, stop: asyncio.Event) -> None:
    """Publish every PUBLISH_INTERVAL_SECONDS until ``stop`` is set. Stopped, never cancelled:
    a sync runs in a thread, which a cancellation would leave running beside the final one
    (and writing to the store after the run has ended)."""
    reported: set[str] = set()
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), PUBLISH_INTERVAL_SECONDS)
        if stop.is_set():
            return
        try:
            await asyncio.to_thread(publisher.sync)
        except Exception as error:  # noqa: BLE001 - tried again next time, and at the end
            message = store_error_reason(error)
            if message not in reported:
                reported.add(message)
                logger.warning("publishing to %s failed (trying again): %s",
                               publisher.target.url, message)


async def _to_the_end(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even when this task is cancelled meanwhile; the cancellation
    is raised afterwards (``CancelledError``, once ``work`` is done)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done() and task.cancelled():  # the work itself was cancelled
                raise
            cancelled = True
            if task.done():
                result = task.result()
                break
    if cancelled:
        raise asyncio.CancelledError
    return result


def _finish(stage: Stage, outcome: Any, problem: str | None) -> None:
    """Say where the bundle is; keep the staging folder only when something was not
    published (the run then reports it as a write failure: exit code 4)."""
    if outcome is not None:
        where = outcome.bundle_path if isinstance(outcome, RunOutcome) else \
            outcome.run_dir if isinstance(outcome, MatrixOutcome) else None
        if where is not None:
            outcome.location = published_location(where)
        if problem is not None:
            outcome.write_errors.append(problem)
    if problem is None:
        unregister_staging(stage.staging)
        shutil.rmtree(stage.staging, ignore_errors=True)


async def published(stage: Stage, work: Awaitable[T]) -> T:
    """Await ``work`` (a run or a sweep into ``stage``'s staging folder), publishing as it goes
    and at the end (also when it is interrupted: its partial outcome carries the publishing
    result)."""
    stop = asyncio.Event()
    periodic = asyncio.create_task(_publish_periodically(stage.publisher, stop))
    outcome: Any = None
    try:
        outcome = await work
        return outcome
    except BaseException as error:
        if isinstance(error, RunInterrupted | MatrixInterrupted):  # the partial outcome
            outcome = error.outcome
        raise
    finally:
        stop.set()
        problem = None
        interrupted = False
        try:
            # the sync in progress, if any, ends first (a Ctrl-C now waits for it too)
            await _to_the_end(periodic)
        except asyncio.CancelledError:
            interrupted = True
        try:
            # a Ctrl-C landing now must not cut the last publish short (the store would keep a
            # "running" report): it is finished, then the cancellation goes on
            await _to_the_end(asyncio.to_thread(stage.publisher.sync, final=True))
        except asyncio.CancelledError:
            interrupted = True
        except Exception as error:  # noqa: BLE001 - reported with the outcome
            reason = store_error_reason(error)
            problem = (f"could not publish to {stage.target.url}: {reason}; the evidence is "
                       f"kept in {stage.staging}")
            logger.error("%s", problem)
        _finish(stage, outcome, problem)
        if interrupted:
            raise asyncio.CancelledError
