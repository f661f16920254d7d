"""Replacing a file atomically: a reader sees the old content or the new, never a part."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import ConfigError


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


_FILE_MODE = 0o666 & ~_umask()


def atomic_write(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``.

    ``durable`` also flushes the data to disk before the rename (a cache that must survive a
    power cut; bundle documents do not pay for it). Only a regular file (or nothing) is
    replaced: a link, device, FIFO, socket or folder at ``path`` is a :class:`ConfigError`
    (renaming over a device node would replace it)."""
    _check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        os.chmod(temporary, _FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _check_replaceable(path: Path) -> None:
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{file_kind(mode)} is there: only a regular file (or a new path) is "
                          f"replaced", source=path)


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a regular file", "a symbolic link", "a device")."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "no regular file"
