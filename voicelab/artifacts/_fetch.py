"""Local copies of store folders: a reader's documents downloaded, the rest fetched later.

Readers work on local paths, so a bundle in a store (:mod:`._store` opens its URL) is read from
a copy: a temporary one removed after the reader (:func:`local_folder`), or a mirror kept until
the process exits for readers that hand paths on (:func:`mirror`: the frames' trial folders).
A copy remembers the URL it came from, so a file left out of it (a trial's audio) is fetched
when it is first asked for (:func:`fetch_missing`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Collection, Iterator
from pathlib import Path, PurePosixPath

from ..errors import ConfigError
from ._store import (
    RemoteLocation,
    open_location,
    open_remote,
    probe_exists,
    remote_exists,
    resolve_latest,
    resolve_local_latest,
    store_error_reason,
)

#: A local mirror's marker file: the URL it was downloaded from.
ORIGIN_MARKER = ".voicelab-origin"


def _relative(location: RemoteLocation, found: str) -> PurePosixPath | None:
    try:  # find() answers the file system's own paths, as location.path is
        relative = PurePosixPath(found).relative_to(PurePosixPath(location.path))
    except ValueError:
        return None
    if any(part.startswith(".") for part in relative.parts):
        return None  # probes, staging leftovers
    return relative


def fetch(location: RemoteLocation, into: Path, *, names: Collection[str] | None = None,
          suffixes: tuple[str, ...] | None = None) -> Path:
    """Download a store folder (a run, a sweep, a trial) into the local folder ``into``: every
    file, or only those whose name is in ``names`` or ends with one of ``suffixes``. ``into``
    remembers the URL, so a file left out can be fetched later (:func:`fetch_missing`)."""
    fs = location.fs
    if not probe_exists(location):  # an unreachable store answers in seconds, not a minute
        raise ConfigError("no such run directory or trial folder in the store",
                          source=location.url)
    try:
        found = fs.find(location.path)
    except Exception as error:  # noqa: BLE001 - every store raises its own types
        raise ConfigError(f"cannot list the store folder: {store_error_reason(error)}",
                          source=location.url) from None
    if not found:
        raise ConfigError("no such run directory or trial folder in the store",
                          source=location.url)
    remote: list[str] = []
    local: list[str] = []
    for path in found:
        relative = _relative(location, path)
        if relative is None:
            continue
        if (names is not None or suffixes is not None) and not (
                (names is not None and relative.name in names)
                or (suffixes is not None and relative.name.endswith(suffixes))):
            continue
        target = into.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        remote.append(path)
        local.append(str(target))
    into.mkdir(parents=True, exist_ok=True)
    if remote:
        try:
            fs.get(remote, local)
        except Exception as error:  # noqa: BLE001 - every store raises its own types
            raise ConfigError(f"cannot download from the store: {store_error_reason(error)}",
                              source=location.url) from None
    (into / ORIGIN_MARKER).write_text(location.url + "\n", encoding="utf-8")
    return into


def fetch_missing(path: Path) -> bool:
    """Fetch ``path`` from the store its mirror came from (True when it is now there)."""
    for folder in path.parents:
        marker = folder / ORIGIN_MARKER
        if marker.is_file():
            origin = open_remote(marker.read_text(encoding="utf-8").strip())
            if origin is None:
                return False
            source = origin.child(*path.relative_to(folder).parts)
            if not remote_exists(source):
                return False
            path.parent.mkdir(parents=True, exist_ok=True)
            source.fs.get_file(source.path, str(path))
            return True
    return False


@contextlib.contextmanager
def local_folder(location: str | os.PathLike[str], *, names: Collection[str] | None = None,
                 suffixes: tuple[str, ...] | None = None, source: str | Path | None = None,
                 key: str | None = None) -> Iterator[Path]:
    """A local folder for a reader: the folder itself (``latest`` resolved), or a temporary
    copy of a store folder (every file, or those :func:`fetch` selects) removed afterwards."""
    opened = open_location(location, source=source, key=key)
    if isinstance(opened, Path):
        yield resolve_local_latest(opened)
        return
    folder = resolve_latest(opened)
    with tempfile.TemporaryDirectory(prefix="voicelab-fetch-") as scratch:
        yield fetch(folder, Path(scratch) / (folder.name or "store"), names=names,
                    suffixes=suffixes)


_mirrors_lock = threading.Lock()
_mirrors_root: Path | None = None


def mirror(location: RemoteLocation, *, names: Collection[str] | None = None) -> Path:
    """A local copy of a store folder for readers that return paths (frames): kept until the
    process exits, one per call (a run in a store may have grown since)."""
    global _mirrors_root
    with _mirrors_lock:
        if _mirrors_root is None:
            _mirrors_root = Path(tempfile.mkdtemp(prefix="voicelab-mirror-"))
            atexit.register(shutil.rmtree, _mirrors_root, True)
        folder = Path(tempfile.mkdtemp(dir=_mirrors_root))
    return fetch(location, folder / (location.name or "store"), names=names)
