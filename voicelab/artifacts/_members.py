"""A bundle's members as hostile input: bounded reading and writing that never follows a link.

Bundles travel between people and machines (stores, CI artifacts, bug reports), so every command
that reads one treats it as ``run`` treats a product. Reading:

* a bundle's tree is walked once at the door (:func:`check_tree`): every member must be a regular
  file or a folder; a symbolic link, device, FIFO or socket is refused naming it (the one
  exception is a ``latest`` link to a sibling folder, which voicelab itself writes and which is
  never followed), as are a name that is not UTF-8 (every report lists its trial's member
  names, and a name must be printable in an error line), more than :data:`MAX_TREE_ENTRIES`
  members and folders nested deeper than :data:`MAX_TREE_DEPTH`;
* each member is opened without following a link and without blocking (``O_NOFOLLOW``,
  ``O_NONBLOCK``), must be a regular file, and is read only up to its kind's size limit
  (:func:`member_limit`), checked against the declared size first;
* JSON is decoded with its nesting bounded (:data:`MAX_JSON_DEPTH`, counted on the bytes before
  decoding) and numbers of more digits than Python converts refused, so neither reaches a
  recursion or an internal error.

Writing (:func:`write_member`) removes whatever is at the name (a link is removed, never
followed) and creates the file exclusively (``O_EXCL | O_NOFOLLOW``), so a bundle can never
redirect a write outside itself. Output targets a user names (``--junit``, ``--output``,
``--html``) must be a regular file or a new path (:func:`check_output_target`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import file_kind, file_mode_in, make_folder
from ..errors import ConfigError, os_reason
from ._names import LATEST

__all__ = [
    "MAX_AUDIO_BYTES", "MAX_DOCUMENT_BYTES", "MAX_EVENTS_BYTES", "MAX_JSON_DEPTH",
    "MAX_TEXT_BYTES", "MAX_TREE_DEPTH", "MAX_TREE_ENTRIES", "BundleMemberError",
    "check_output_target", "check_tree", "decode_json", "member_limit", "open_member_append",
    "read_json_member", "read_member", "write_member",
]

#: A JSON document of a bundle (reports, metrics, transcripts, raw endpoint events).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: ``voice-events.jsonl`` (an hour-long call records about 150 MB of events).
MAX_EVENTS_BYTES = 256 * 1024 * 1024
#: A WAV file (an hour of 24 kHz 16-bit mono is 173 MB).
MAX_AUDIO_BYTES = 256 * 1024 * 1024
#: Any other member read as text (transcript.md, logs, pointers).
MAX_TEXT_BYTES = 16 * 1024 * 1024
#: Deepest nesting of arrays and objects in a JSON member.
MAX_JSON_DEPTH = 64
#: Most members (files and folders) under a folder a command is given.
MAX_TREE_ENTRIES = 500_000
#: Deepest folder nesting under it (a folder of sweeps of runs of trials is 4).
MAX_TREE_DEPTH = 12

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
_KEPT_BYTES = b'[]{}"'
_DROPPED_BYTES = bytes(byte for byte in range(256) if byte not in _KEPT_BYTES)


class BundleMemberError(ConfigError):
    """A bundle member that is not a regular file, too large, or not bounded JSON."""


def _mebibytes(size: int) -> str:
    return f"{size / (1024 * 1024):,.1f} MiB"


def describe_mode(mode: int) -> str | None:
    """What a file of ``mode`` (from ``lstat``) is when it is no regular file or folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return file_kind(mode)


def _refused(path: str | Path, what: str) -> BundleMemberError:
    return BundleMemberError(f"{what}, not a regular file: bundle members are read as regular "
                             f"files only", source=path)


def member_limit(name: str) -> int:
    """The size limit of a member, by its name."""
    if name.endswith(".wav"):
        return MAX_AUDIO_BYTES
    if name.endswith(".jsonl"):
        return MAX_EVENTS_BYTES
    if name.endswith(".json"):
        return MAX_DOCUMENT_BYTES
    return MAX_TEXT_BYTES


# --- the tree ---------------------------------------------------------------------------------

def _is_latest_link(entry: os.DirEntry[str]) -> bool:
    if entry.name != LATEST:  # the link beside runs, never followed
        return False
    try:
        target = os.readlink(entry.path)
    except OSError:
        return False
    return "/" not in target and target not in ("", ".", "..")


def _is_utf8(name: str) -> bool:
    """Whether a name listed by the OS decodes as UTF-8 (Python keeps undecodable bytes as lone
    surrogates, which no report, log line or store key can hold)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def escaped_path(path: str | Path) -> str:
    """``path`` printable whatever its bytes: a byte that is not UTF-8 shown as ``\\xff``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def check_tree(root: str | Path) -> None:
    """Refuse a folder holding anything but regular files and folders (see the module
    docstring); ``root`` itself may be a link the user named (it is resolved by the caller)."""
    root = Path(root)
    try:
        mode = os.stat(root).st_mode
    except (OSError, ValueError):
        return  # missing: the caller reports it in its own words
    if not stat.S_ISDIR(mode):
        what = describe_mode(mode)
        if what is not None:
            raise _refused(root, what)
        return
    entries = 0
    stack: list[tuple[str, int]] = [(os.fspath(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            scanner = os.scandir(folder)
        except OSError as error:
            raise BundleMemberError(f"cannot list the folder: {error.strerror}",
                                    source=folder) from None
        with scanner:
            for entry in scanner:
                entries += 1
                if entries > MAX_TREE_ENTRIES:
                    raise BundleMemberError(f"more than {MAX_TREE_ENTRIES:,} files and folders "
                                            f"(the limit of a bundle)", source=root)
                if not _is_utf8(entry.name):
                    raise BundleMemberError("a name that is not UTF-8 (shown escaped): bundle "
                                            "members are named in UTF-8",
                                            source=escaped_path(entry.path))
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 > MAX_TREE_DEPTH:
                        raise BundleMemberError(f"folders nested deeper than {MAX_TREE_DEPTH} "
                                                f"(the limit of a bundle)", source=entry.path)
                    stack.append((entry.path, depth + 1))
                elif not entry.is_file(follow_symlinks=False):
                    if entry.is_symlink() and _is_latest_link(entry):
                        continue
                    what = describe_mode(entry.stat(follow_symlinks=False).st_mode)
                    raise _refused(entry.path, what or "no regular file")


# --- reading ----------------------------------------------------------------------------------

def read_member(path: str | Path, *, limit: int | None = None) -> bytes:
    """The bytes of one member: opened without following a link or blocking, a regular file,
    at most ``limit`` bytes (default: :func:`member_limit` of its name). Raises
    :class:`BundleMemberError` (a :class:`FileNotFoundError` for a missing member)."""
    path = Path(path)
    limit = member_limit(path.name) if limit is None else limit
    try:
        handle = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _refused(path, "a symbolic link") from None
        if error.errno == errno.ENXIO:  # a FIFO without a writer, a socket
            raise _refused(path, "a named pipe (FIFO) or socket") from None
        raise BundleMemberError(f"cannot read: {error.strerror}", source=path) from None
    except ValueError as error:  # NUL in the path
        raise BundleMemberError(f"cannot read: {error}", source=path) from None
    with os.fdopen(handle, "rb") as stream:
        status = os.fstat(handle)
        what = describe_mode(status.st_mode)
        if what is not None or stat.S_ISDIR(status.st_mode):
            raise _refused(path, what or "a folder")
        if status.st_size > limit:
            raise _too_large(path, status.st_size, limit)
        data = stream.read(limit + 1)
    if len(data) > limit:  # grew while being read
        raise _too_large(path, len(data), limit)
    return data


def _too_large(path: Path, size: int, limit: int) -> BundleMemberError:
    return BundleMemberError(f"file too large ({_mebibytes(size)}; a bundle's {path.suffix or 'text'} "
                             f"members are limited to {_mebibytes(limit)})", source=path)


def json_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON text, counted on its bytes (escaped
    quotes and backslashes dropped, then brackets outside strings counted)."""
    if data.count(b"[") + data.count(b"{") <= MAX_JSON_DEPTH:
        return 0  # cannot be deeper than the limit: the common case costs two counts
    structural = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _DROPPED_BYTES)
    marks = np.frombuffer(structural, dtype=np.uint8)
    if not marks.size:
        return 0
    outside = (np.cumsum(marks == ord('"'), dtype=np.int64) & 1) == 0
    steps = ((marks == ord("[")) | (marks == ord("{"))).astype(np.int32) \
        - ((marks == ord("]")) | (marks == ord("}"))).astype(np.int32)
    return int(np.cumsum(steps * outside).max())


def decode_json(data: bytes | str, *, source: str | Path, line: int | None = None) -> Any:
    """JSON text decoded within :data:`MAX_JSON_DEPTH` and Python's integer digit limit;
    :class:`BundleMemberError` names ``source`` (and ``line``) otherwise."""
    where = f"line {line}: " if line is not None else ""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise BundleMemberError(f"{where}JSON nested {depth:,} deep (the limit is "
                                f"{MAX_JSON_DEPTH})", source=source)
    try:
        return json.loads(data)
    except json.JSONDecodeError as error:
        at = f"line {error.lineno}" if line is None else f"line {line}"
        raise BundleMemberError(f"invalid JSON at {at}: {error.msg}", source=source) from None
    except UnicodeDecodeError as error:
        raise BundleMemberError(f"{where}not UTF-8 text ({error.reason})", source=source) from None
    except RecursionError:
        raise BundleMemberError(f"{where}JSON nested too deep", source=source) from None
    except ValueError as error:  # an integer of more digits than int() converts
        raise BundleMemberError(f"{where}unreadable JSON number ({' '.join(str(error).split())})",
                                source=source) from None


def read_json_member(path: str | Path, *, limit: int | None = None) -> Any:
    """One JSON member, bounded (see :func:`read_member` and :func:`decode_json`)."""
    return decode_json(read_member(path, limit=limit), source=path)


def json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, record) of each non-blank line of a JSON-lines member, bounded."""
    data = read_member(path)
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise BundleMemberError(f"JSON nested {depth:,} deep (the limit is {MAX_JSON_DEPTH})",
                                source=path)
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line.strip():
            yield number, decode_json(line, source=path, line=number)


# --- writing ----------------------------------------------------------------------------------

def write_member(path: str | Path, *parts: bytes | memoryview) -> None:
    """Write a bundle member: whatever is at ``path`` is removed (a link itself, never its
    target), then the file is created exclusively without following a link."""
    path = Path(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise BundleMemberError("a folder where a file is written", source=path) from None
    handle = os.open(path, _WRITE_FLAGS, file_mode_in(path.parent))
    with os.fdopen(handle, "wb") as stream:
        for part in parts:
            stream.write(part)


def open_member_append(path: str | Path) -> Any:
    """A text stream appending to a member (a log), never through a link: a symbolic link,
    device or FIFO at ``path`` is refused, and a file with other names (a hard link to a file
    elsewhere) is first replaced by a copy of its own, so appending never writes outside the
    bundle."""
    path = Path(path)
    _unshare(path)
    try:
        handle = os.open(path, _APPEND_FLAGS | os.O_NONBLOCK, file_mode_in(path.parent))
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENXIO):
            raise _refused(path, "a symbolic link" if error.errno == errno.ELOOP
                           else "a named pipe (FIFO) or socket") from None
        raise
    status = os.fstat(handle)
    what = describe_mode(status.st_mode)
    if what is None and status.st_nlink > 1:
        what = "a file with another name (a hard link) appeared meanwhile"
    if what is not None:
        os.close(handle)
        raise _refused(path, what)
    os.set_blocking(handle, True)
    return os.fdopen(handle, "a", encoding="utf-8")


def _unshare(path: Path) -> None:
    """A regular file with more than one name becomes a file of its own, with the same bytes
    (written beside it, then renamed over it): what is appended then stays in the bundle."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(status.st_mode) or status.st_nlink <= 1:
        return
    staged = path.with_name(f".{path.name}.unshared")
    try:
        with os.fdopen(os.open(path, _READ_FLAGS), "rb") as reading:
            write_member(staged, *iter(lambda: reading.read(1 << 20), b""))
        os.replace(staged, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)


def check_output_target(path: str | os.PathLike[str], *, key: str) -> Path:
    """An output file a user named: a regular file (replaced) or a new path, checked before any
    work so a run never ends failing to write it. A link, device, FIFO, socket or folder there
    is refused (exit 2), so writing never replaces a device node or writes through a link; a
    missing folder is created (as ``pytest --junitxml`` does), and a folder that cannot be
    created or written in is refused."""
    path = Path(path).expanduser()
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except (OSError, ValueError) as error:
        reason = os_reason(error) or str(error)
        raise ConfigError(f"cannot write {path}: {reason}", source="CLI", key=key) from None
    if mode is not None and not stat.S_ISREG(mode):
        raise ConfigError(f"{path} is {file_kind(mode)}: an output must be a regular file or a "
                          f"new path", source="CLI", key=key)
    parent = path.parent if str(path.parent) else Path(".")
    if mode is None and parent.exists() and not parent.is_dir():
        raise ConfigError(f"{parent} is not a folder", source="CLI", key=key)
    if not parent.exists():
        try:
            make_folder(parent)
        except (OSError, ValueError) as error:
            reason = os_reason(error) or str(error)
            raise ConfigError(f"cannot create the folder {parent}: {reason}", source="CLI",
                              key=key) from None
    if not os.access(parent, os.W_OK | os.X_OK) or (mode is not None
                                                    and not os.access(path, os.W_OK)):
        raise ConfigError(f"cannot write {path}: permission denied", source="CLI", key=key)
    return path
