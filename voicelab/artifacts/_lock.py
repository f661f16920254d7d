"""One writer per bundle: a lock file in the folder, held while a run, a resumed run, a sweep or
a re-scoring writes it.

The lock is ``flock`` on ``.voicelab.lock``, which also records who holds it (process id, host,
command, since when), so a second writer is refused naming the holder. The kernel releases the
lock when its process ends, however it ends: a lock file left by a process that died is simply
taken over. The holder removes the file when it is done.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._atomic import file_mode_in
from ..errors import ConfigError

__all__ = ["LOCK_FILE", "BundleLock"]

logger = logging.getLogger(__name__)

LOCK_FILE = ".voicelab.lock"
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MAX_HOLDER_BYTES = 4096


class BundleLock:
    """``with BundleLock(folder, command="run"):`` ... (or :meth:`acquire` / :meth:`release`).

    :meth:`acquire` raises :class:`ConfigError` naming the holder when another process holds
    the folder's lock. Not re-entrant: a process locks a folder once."""

    def __init__(self, folder: str | os.PathLike[str], *, command: str):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.command = command
        self._handle: int | None = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def acquire(self) -> BundleLock:
        if self._handle is not None:
            return self
        for _ in range(8):  # the holder may remove the file between our open and our lock
            handle = self._open()
            try:
                locked = self._lock(handle)
            except BaseException:
                os.close(handle)
                raise
            if not locked:
                holder = _describe(_read_holder(handle))
                os.close(handle)
                raise ConfigError(f"another voicelab process is writing this bundle ({holder}): "
                                  f"wait for it to end, or stop it", source=self.folder)
            if self._still_ours(handle):
                self._handle = handle
                self._write_holder(handle)
                return self
            os.close(handle)
        raise ConfigError("cannot take the bundle's lock (its lock file keeps changing)",
                          source=self.folder)

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            return
        try:
            if self._still_ours(handle):
                self.path.unlink(missing_ok=True)
        except OSError as error:  # a read-only or vanished folder: the lock goes with the process
            logger.debug("could not remove %s: %s", self.path, error)
        finally:
            os.close(handle)

    def __enter__(self) -> BundleLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    # --- steps ---

    def _open(self) -> int:
        for _ in range(2):
            try:
                handle = os.open(self.path, _FLAGS, file_mode_in(self.folder))
            except OSError as error:
                what = "a link or a pipe is in its place" if error.errno in (
                    errno.ELOOP, errno.ENXIO) else error.strerror
                raise ConfigError(f"cannot open the bundle's lock file {LOCK_FILE}: {what}",
                                  source=self.folder) from None
            status = os.fstat(handle)
            if not stat.S_ISREG(status.st_mode):
                os.close(handle)
                raise ConfigError(f"the bundle's lock file {LOCK_FILE} is not a regular file",
                                  source=self.folder)
            if status.st_nlink <= 1:
                return handle
            # a hard link to a file elsewhere: its holder note would be written there. The
            # name is ours to replace (a lock lives in its file's inode, this one is foreign).
            os.close(handle)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        raise ConfigError(f"the bundle's lock file {LOCK_FILE} keeps being linked elsewhere",
                          source=self.folder)

    def _lock(self, handle: int) -> bool:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        except OSError as error:  # no flock here (some network file systems): by the record
            logger.debug("flock on %s failed (%s): judging the lock by its holder's pid",
                         self.path, error.strerror)
            return not _holder_alive(_read_holder(handle))

    def _still_ours(self, handle: int) -> bool:
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        mine = os.fstat(handle)
        return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)

    def _write_holder(self, handle: int) -> None:
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                  "since": datetime.now(tz=UTC).isoformat(timespec="seconds")}
        data = (json.dumps(record) + "\n").encode()
        try:
            os.ftruncate(handle, 0)
            os.pwrite(handle, data, 0)
        except OSError as error:  # the lock holds without its note (a full disk)
            logger.debug("could not note the lock's holder: %s", error.strerror)


def _read_holder(handle: int) -> dict[str, Any]:
    try:
        data = os.pread(handle, _MAX_HOLDER_BYTES, 0)
        record = json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _describe(holder: dict[str, object]) -> str:
    pid, host = holder.get("pid"), holder.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return "its holder did not say who it is"
    where = f" on {str(host)[:64]}" if host else ""
    command = str(holder.get("command") or "")[:64]
    since = str(holder.get("since") or "")[:40]
    return (f"pid {pid}{where}" + (f", voice-evaluator {command}" if command else "")
            + (f", since {since}" if since else ""))


def _holder_alive(holder: dict[str, object]) -> bool:
    pid = holder.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if holder.get("host") not in (None, socket.gethostname()):
        return True  # another machine's process: it cannot be checked from here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
