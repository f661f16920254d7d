"""Publishing a staged bundle to a store, with the local bundle's guarantee.

A run bound for a store writes its folders locally exactly as a local run does (the same code:
every file of a trial, then ``trial-report.json`` renamed into place last). The publisher copies
what is finished to the store: each trial folder once its report exists, every other object
first and the trial report last, so on the store too a trial folder with a report is complete.
An object store writes each object whole (a reader sees the old object or the new, never a part):
that is the atomic rename of the local bundle. A folder published again (a resumed trial that
runs anew) first loses its old report, then its stale objects, so it never reads as complete
with a mix of two attempts. Run-level documents (``run-report.json``, ``matrix-report.json``,
the logs) follow their trials; a sweep's matrix report comes last.

A published trial folder is removed from the staging folder (a long run holds one trial's
files at a time on the local disk, not the whole run); what could not be published stays there
and the run says where.

A Dask worker that may not share the caller's disk publishes its own trials
(:func:`publish_trial`): the same order, from a scratch folder of its own.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ._names import MATRIX_REPORT, RUN_REPORT, TRIAL_REPORT, is_trial_folder
from ._store import RemoteLocation, point_latest

#: Objects of a batch uploaded at once.
_PARALLEL_UPLOADS = 8

logger = logging.getLogger(__name__)

#: Published after everything else of their folder (the deepest folders first).
_RUN_DOCUMENTS = (RUN_REPORT, MATRIX_REPORT)

Signature = tuple[int, int]


def _signature(path: Path) -> Signature | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _visible_files(folder: Path) -> list[Path]:
    """Regular files (no symlinks, no hidden temporary files of an atomic write)."""
    with os.scandir(folder) as entries:
        return sorted(Path(e.path) for e in entries
                      if e.is_file(follow_symlinks=False) and not e.name.startswith("."))


class Publisher:
    """Copies a staging folder's finished evidence to ``target`` (the store folder that
    ``staging`` stands for). :meth:`sync` is called from a worker thread every second while
    the run goes on, and once more, ``final``, when it has ended."""

    def __init__(self, staging: Path, target: RemoteLocation, *, fresh: bool = False,
                 latest: str | None = None):
        self.staging = staging
        self.target = target
        #: the run folder the store's LATEST object is to name, once it is in the store
        self.latest = latest
        #: nothing of the run is in the store yet (a new run folder): a trial folder is not
        #: listed for objects to replace before it is published (one request less per trial)
        self.fresh = fresh
        self._published: dict[Path, Signature] = {}
        self._lock = threading.Lock()
        self.objects_put = 0

    def mark_present(self) -> None:
        """Count what the staging folder holds now as published (a resumed bundle's copy)."""
        for root, dirs, files in os.walk(self.staging):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                path = Path(root) / name
                signature = _signature(path)
                if signature is not None:
                    self._published[path] = signature

    def _changed(self, path: Path) -> bool:
        signature = _signature(path)
        return signature is not None and self._published.get(path) != signature

    def _remote(self, path: Path) -> RemoteLocation:
        return self.target.child(*path.relative_to(self.staging).parts)

    def sync(self, *, final: bool = False) -> None:
        """Publish every trial folder that is finished (``final``: also those cut short, with
        what they hold) and the run-level documents that changed (``final``: the logs too).
        Raises the store's error; what was not published is tried again next time."""
        with self._lock:
            trials: list[Path] = []
            documents: list[Path] = []
            for root, dirs, files in os.walk(self.staging):
                here = Path(root)
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                if is_trial_folder(here.name):  # (the staging folder too: one trial)
                    dirs.clear()
                    report = here / TRIAL_REPORT
                    if (report.is_file() and self._changed(report)) or (
                            final and any(self._changed(p) for p in _visible_files(here))):
                        trials.append(here)
                    continue
                for name in files:
                    path = here / name
                    if name.startswith(".") or path.is_symlink():
                        continue
                    if (final or not name.endswith(".log")) and self._changed(path):
                        documents.append(path)
            finished = [f for f in trials if (f / TRIAL_REPORT).is_file()]
            if self.fresh and len(finished) > 1:
                self._publish_new_trials(finished)
                trials = [f for f in trials if f not in finished]
            for folder in trials:
                self._publish_trial(folder)
            documents.sort(key=lambda p: (-len(p.relative_to(self.staging).parts),
                                          p.name in _RUN_DOCUMENTS, str(p)))
            for path in documents:
                self._put([path])
            if self.latest is not None and (self.staging / self.latest).is_dir() and any(
                    self.staging / self.latest in path.parents for path in documents):
                point_latest(self.target, self.latest)  # never names a folder not there yet
                self.latest = None

    def _put(self, paths: list[Path]) -> None:
        signatures = [_signature(p) for p in paths]
        fs = self.target.fs
        if len(paths) == 1:
            fs.put_file(str(paths[0]), self._remote(paths[0]).path)
        else:
            # side by side, and every upload over before this returns or raises: a batch that
            # stops at its first failure leaves the others running on the store's own loop,
            # writing objects after the run has ended (and said it could not publish them)
            with ThreadPoolExecutor(max_workers=min(_PARALLEL_UPLOADS, len(paths)),
                                    thread_name_prefix="voicelab-upload") as pool:
                uploads = [pool.submit(fs.put_file, str(p), self._remote(p).path)
                           for p in paths]
            failed = next((u.exception() for u in uploads if u.exception() is not None), None)
            if failed is not None:
                raise failed
        self.objects_put += len(paths)
        for path, signature in zip(paths, signatures, strict=True):
            if signature is not None:
                self._published[path] = signature

    def _publish_new_trials(self, folders: list[Path]) -> None:
        """Finished trials of a new run, side by side: every trial's other files in one batch,
        then their reports (each still after all of its own files)."""
        files = [p for folder in folders for p in _visible_files(folder)
                 if p.name != TRIAL_REPORT]
        if files:
            self._put(files)
        self._put([folder / TRIAL_REPORT for folder in folders])
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)

    def _publish_trial(self, folder: Path) -> None:
        remote = self._remote(folder)
        fs = remote.fs
        files = [p for p in _visible_files(folder) if p.name != TRIAL_REPORT]
        report = folder / TRIAL_REPORT
        existing: dict[str, str] = {}
        if not self.fresh:
            fs.invalidate_cache(remote.path)
            existing = {path.rpartition("/")[2]: path for path in fs.find(remote.path)}
        if TRIAL_REPORT in existing:  # replaced: the folder reads as unfinished meanwhile
            fs.rm_file(existing.pop(TRIAL_REPORT))
        if files:
            self._put(files)
        stale = [path for name, path in existing.items() if name not in {p.name for p in files}]
        if stale:
            fs.rm(stale)
        if report.is_file():
            self._put([report])  # last: its presence on the store means the folder is complete
            shutil.rmtree(folder, ignore_errors=True)
            logger.debug("published %s", remote.url)


def publish_trial(folder: Path, run: RemoteLocation) -> None:
    """Publish one trial folder written outside any staging folder (a Dask worker's scratch
    folder) into the store folder ``run`` of its run, in a staged run's order: an old report
    first removed, every other file, stale objects removed, the report last. The folder is
    removed once its report is in the store; one without a report (a trial cut short) is
    published as it is and kept. Raises the store's error."""
    Publisher(folder.parent, run)._publish_trial(folder)
