"""A bundle's life, lived one way by every command that writes one (run, a resumed run, sweep,
replay, ingest, rescore).

A :class:`RunFolder` is created new (:meth:`RunFolder.create`: the folder with the bundle's
mode, a write checked before any work) or reopened (:meth:`RunFolder.reopen`: ``latest``
resolved, the tree checked by the one bounded walk, its report read once); either way its lock
(:class:`~._lock.BundleLock`) is held from then on, so a second writer is refused naming the
first. While it is in use it keeps ``evaluator.log`` (:meth:`RunFolder.start_log`), writes
members never through a link (:func:`~._members.write_member`) and its report atomically
(:meth:`RunFolder.write_report`: a full disk leaves the last report whole and is returned as a
problem, never raised). :meth:`RunFolder.finish` writes the final report and only then moves
``latest`` to the folder (a reader following ``latest`` always finds a report); leaving the
``with`` block (:meth:`RunFolder.close`) closes the log and releases the lock, whatever ended
the work.

Signals are the caller's: the command line turns SIGINT and SIGTERM into a cancellation of its
one task (a library call leaves the process's handlers alone), and the command's work turns
that cancellation into an ``interrupted`` report written through its folder, as for any other
end.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel

from .._location import as_local_path
from ..config import BundleAccess, parse_settings
from ..errors import ConfigError, os_reason
from ._bundle import write_json
from ._lock import BundleLock
from ._members import check_tree, write_member
from ._names import EVALUATOR_LOG, LATEST, MATRIX_REPORT, RUN_REPORT
from ._privacy import Redacts, filter_model, make_private_folder
from ._reader import read_json
from ._report_models import MatrixReport, RunReport
from ._run_log import RunLog
from ._store import resolve_local_latest

__all__ = ["RunFolder", "point_latest"]

ReportT = TypeVar("ReportT", RunReport, MatrixReport)

#: The member each kind of report is written to.
_REPORT_NAMES: dict[type[BaseModel], str] = {RunReport: RUN_REPORT, MatrixReport: MATRIX_REPORT}

#: Created and removed at once in a new folder: an unwritable artifacts folder is refused
#: before any work.
_WRITE_CHECK = ".voicelab-write-check"


def point_latest(root: Path, bundle: Path) -> None:
    """Point ``root/latest`` at ``bundle`` (a sibling folder), replacing the link at once (a
    reader sees the old run or the new, never none); only a link is ever replaced there."""
    latest = root / LATEST
    if latest.exists() and not latest.is_symlink():
        return  # someone's own file or folder: not ours to replace
    staged = root / f".{LATEST}.{bundle.name}.tmp"
    try:
        staged.unlink(missing_ok=True)
        staged.symlink_to(bundle.name)
        os.replace(staged, latest)
    except OSError:
        staged.unlink(missing_ok=True)  # a convenience only (some filesystems have no links)


def _made(root: Path, name: str, *, access: BundleAccess, source: str | Path | None,
          key: str) -> Path:
    """``root/name`` created with the mode ``access`` gives (owner-only by default: a bundle
    holds people's voices and words) and written to once; an unusable artifacts folder is a
    configuration error naming it."""
    bundle = (root / name).resolve()
    try:
        make_private_folder(bundle, access=access)
        probe = bundle / _WRITE_CHECK
        write_member(probe)
        probe.unlink()
    except (OSError, ValueError) as error:
        reason = os_reason(error) or str(error) or type(error).__name__
        raise ConfigError(f"cannot create the bundle folder {bundle}: {reason}", source=source,
                          key=key) from None
    return bundle


def _local(path: str | Path) -> Path:
    """A local bundle path as a command names it (``latest`` followed once), absolute."""
    return resolve_local_latest(as_local_path(path)).expanduser().resolve()


class RunFolder(Generic[ReportT]):
    """One bundle from its opening to its end, locked meanwhile (see the module docstring).

    ``previous`` is the report a reopened folder held (read once, validated); None for a new
    folder. Use as ``with RunFolder.create(...) as folder:`` (or call :meth:`close`)."""

    def __init__(self, path: Path, *, report: type[ReportT], lock: BundleLock,
                 created: bool, previous: ReportT | None = None):
        self.path = path
        self.root = path.parent
        self.report_name = _REPORT_NAMES[report]
        self.created = created
        self.previous: ReportT | None = previous
        self.lock = lock
        self.log: RunLog | None = None
        #: what :meth:`close` ends, last opened first: the log (once started), then the lock
        self._open = contextlib.ExitStack()
        self._open.callback(lock.release)

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    def create(cls, root: str | os.PathLike[str], name: str, *, command: str, report: type[ReportT],
               access: BundleAccess = "owner", source: str | Path | None = None,
               key: str = "artifacts_dir") -> RunFolder[ReportT]:
        """A new folder ``root/name``, locked for ``command``; :class:`ConfigError` (naming
        ``source`` and ``key``) when it cannot be created or written."""
        path = _made(as_local_path(root), name, access=access, source=source, key=key)
        lock = BundleLock(path, command=command).acquire()
        return cls(path, report=report, lock=lock, created=True)

    @classmethod
    def reopen(cls, path: str | Path, *, command: str, report: type[ReportT]
               ) -> RunFolder[ReportT]:
        """An existing local bundle (``latest`` followed), locked for ``command`` first (one
        writer at a time, also while it is read), its tree checked and its report read once;
        :class:`ConfigError` when it is no such bundle or another process writes it."""
        folder = _local(path)
        lock = BundleLock(folder, command=command).acquire()
        try:
            previous = read_report(folder, report)
        except BaseException:
            lock.release()
            raise
        return cls(folder, report=report, lock=lock, created=False, previous=previous)

    @classmethod
    def existing(cls, path: Path, *, command: str, report: type[ReportT]) -> RunFolder[ReportT]:
        """A local folder rewritten in place (``rescore``: a trial, run or sweep folder, its
        tree already checked), locked for ``command``; nothing of it is read here."""
        return cls(path, report=report, lock=BundleLock(path, command=command).acquire(),
                   created=False)

    @staticmethod
    def read(path: str | Path, report: type[ReportT]) -> ReportT:
        """The report of a local bundle (``latest`` followed), read as :meth:`reopen` reads it
        but without taking the lock: for a look before anything is written."""
        return read_report(_local(path), report)

    # --- in use --------------------------------------------------------------------------------

    def start_log(self, *, run_id: str, words: Redacts) -> RunLog:
        """Open and start ``evaluator.log`` (appended to: a resumed run continues it); it
        records what the run's context logs until :meth:`close`. Raises OSError or
        :class:`ConfigError` (a link in its place) when it cannot be opened."""
        self.log = self._open.enter_context(
            RunLog(self.path / EVALUATOR_LOG, run_id=run_id, words=words))
        return self.log

    def write_member(self, name: str, data: bytes) -> str | None:
        """Write the member ``name`` (never through a link); what went wrong, or None."""
        try:
            write_member(self.path / name, data)
        except OSError as error:
            return f"could not write {name}: {error.strerror or type(error).__name__}"
        except ConfigError as error:
            return f"could not write {name}: {error.message}"
        return None

    def write_report(self, report: ReportT, *, words: Redacts | None = None) -> str | None:
        """Write the report atomically, through ``words`` when given: a report that cannot be
        written (a full disk) leaves the last one whole, and what went wrong is returned."""
        return write_report_file(self.path / self.report_name, report, words=words)

    def link_latest(self) -> None:
        """Point the root's ``latest`` at this folder (a new one only: a reopened folder was
        already a run of its own when it was made)."""
        if self.created:
            point_latest(self.root, self.path)

    def finish(self, final: ReportT, *, link_latest: bool) -> list[str]:
        """Write the final report, then (only when it is on disk) move ``latest`` to this
        folder; the problems met, the log's included (a full disk)."""
        problems: list[str] = []
        error = self.write_report(final)
        if error:
            problems.append(error)
        elif link_latest:
            self.link_latest()  # last: latest names a folder with its report
        if self.log is not None and self.log.failed:
            problems.append(f"could not write {EVALUATOR_LOG}: {self.log.failed}")
        return problems

    # --- the end -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the log and release the lock (idempotent)."""
        self._open.close()

    def __enter__(self) -> RunFolder[ReportT]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_report(folder: Path, report: type[ReportT]) -> ReportT:
    """The report of the local bundle ``folder``, read with the bounded reader after its tree
    is checked (regular files and folders only); a folder without one is not a bundle of that
    kind."""
    name = _REPORT_NAMES[report]
    path = folder / name
    check_tree(folder)
    if not path.is_file():
        what = "run bundle" if report is RunReport else "sweep folder"
        raise ConfigError(f"not a {what} (no {name})", source=folder)
    parsed: ReportT = parse_settings(report, read_json(path), key=None, source=path)
    return parsed


def write_report_file(path: Path, report: BaseModel, *, words: Redacts | None = None
                      ) -> str | None:
    """Write a run (or matrix) report atomically, through ``words`` when given; what went wrong
    (a full disk: the last report stays whole), never raised."""
    if words is not None:
        report = filter_model(report, words)
    try:
        write_json(path, report)
        return None
    except OSError as error:
        return f"could not write {path.name}: {error.strerror or type(error).__name__}"
    except ConfigError as error:  # a link or a device where the report goes
        return f"could not write {path.name}: {error.message}"
