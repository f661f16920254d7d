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


def current_umask() -> int:
    return _umask()


def make_folder(path: Path) -> Path:
    """Create the folder ``path`` (and its missing parents), each with the permission bits of
    the folder it is made in: a trial folder in a private run folder is private too. An
    existing folder is left as it is."""
    if path.is_dir():
        return path
    parent = path.parent
    if parent != path and not parent.exists():
        make_folder(parent)
    try:
        bits = stat.S_IMODE(os.stat(parent).st_mode) & 0o777
    except OSError:
        bits = 0o700
    try:
        path.mkdir(mode=bits)
    except FileExistsError:
        if not path.is_dir():
            raise
    return path


def file_mode_in(folder: str | os.PathLike[str]) -> int:
    """The mode of a file created in ``folder``: the folder's read and write bits, less what
    the umask takes (a private bundle folder's files are private; a folder the umask made gives
    the umask's files). Bundle members and outputs alike are created so."""
    try:
        bits = stat.S_IMODE(os.stat(folder).st_mode) & 0o666
    except OSError:
        bits = 0o600
    return bits & ~_umask()


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
        os.chmod(temporary, file_mode_in(path.parent))
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
