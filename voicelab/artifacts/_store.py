"""Remote artifact stores: opening an fsspec URL, reading a bundle from it, the latest pointer.

``--artifacts-dir``, ``--resume``, ``report``, ``rescore``, ``compare`` and
:func:`voicelab.analysis.load_frames` take a store URL (``s3://bucket/runs``, ``gs://``,
``az://``, ``memory://``) wherever they take a folder; ``file://`` and plain paths are local
folders and keep the local code paths. Writing goes through a local staging folder and the
:class:`~voicelab.artifacts._publish.Publisher`; reading downloads the documents a reader needs
into a local copy (:mod:`._fetch`: the readers then run unchanged) that remembers where it came
from, so a file left out (a trial's audio) is fetched when it is first asked for.

The ``latest`` convenience: a local artifacts folder keeps its ``latest`` symlink; a store has
no symlinks, so its root holds a small ``LATEST`` object naming the newest run folder. Readers
given ``<root>/latest`` understand both.
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from .._location import as_local_path, url_scheme
from ..config import known_secrets_scrubber, mask_url, remember_secrets, url_secret_values
from ..errors import ConfigError, MissingDependencyError, os_reason
from ._members import MAX_DOCUMENT_BYTES, MAX_TEXT_BYTES, decode_json, read_member
from ._names import LATEST
from ._versions import check_version

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

T = TypeVar("T")

#: The object at a store's root that names its newest run folder (a store has no symlinks).
LATEST_POINTER = "LATEST"

#: Store schemes with a voicelab extra: scheme -> (package, extra).
_EXTRAS: dict[str, tuple[str, str]] = {
    "s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"),
    "az": ("adlfs", "azure-storage"), "abfs": ("adlfs", "azure-storage"),
    "abfss": ("adlfs", "azure-storage"), "adl": ("adlfs", "azure-storage"),
}


@dataclass(frozen=True)
class RemoteLocation:
    """A folder in a store: its URL as the user wrote it (no trailing slash), the fsspec file
    system and the file system's own path of it."""

    url: str
    fs: AbstractFileSystem
    path: str

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    def child(self, *parts: str) -> RemoteLocation:
        if not parts:
            return self
        suffix = "/".join(parts)
        return RemoteLocation(f"{self.url}/{suffix}", self.fs, f"{self.path}/{suffix}")

    @property
    def parent(self) -> RemoteLocation:
        url, _, _ = self.url.rpartition("/")
        path = str(PurePosixPath(self.path).parent)
        return RemoteLocation(url, self.fs, path)

    def __str__(self) -> str:
        return self.url


def _missing_package(scheme: str, error: ImportError, *, source: str | Path | None,
                     key: str | None) -> ConfigError:
    if scheme in _EXTRAS:
        package, extra = _EXTRAS[scheme]
        return MissingDependencyError(package, extra=extra,
                                      purpose=f"the {scheme}:// artifact store",
                                      source=None if source is None else str(source), key=key)
    # fsspec knows the scheme and names the package its implementation lives in
    return ConfigError(f"the {scheme}:// artifact store needs a package that is not "
                       f"installed: {error}", source=source, key=key)


#: the URLs this process opened with credentials, by their masked text (a location's ``url``)
_masked_urls: dict[str, str] = {}


def _unmasked(text: str) -> str:
    """The real URL of a masked one this process made (or of a folder below it)."""
    for shown, real in _masked_urls.items():
        if text == shown or text.startswith(shown + "/"):
            return real + text[len(shown):]
    return text


def open_location(location: str | os.PathLike[str], *, source: str | Path | None = None,
                  key: str | None = None) -> Path | RemoteLocation:
    """A local folder (a path or ``file://``) or a store folder; an unknown scheme or a store
    whose package is missing is a :class:`ConfigError` naming what to install."""
    scheme = url_scheme(location)
    if scheme is None:
        return as_local_path(location)
    text = os.fspath(location).rstrip("/")
    # credentials in the URL (user info, a signature in the query) are never shown: the
    # location carries the URL masked (which this process opens again as the real one), and
    # every message of this process masks them
    text = _unmasked(text)
    remember_secrets(url_secret_values(text))
    shown = mask_url(text)
    if shown != text:
        _masked_urls[shown] = text
    import fsspec
    from fsspec.registry import known_implementations, registry

    if scheme not in registry and scheme not in known_implementations:
        raise ConfigError(f"unknown storage scheme {scheme}:// (fsspec has no such file "
                          "system; a store is s3://, gs://, az://, memory://... or a local "
                          "path)", source=source, key=key)
    try:  # a store library may look for credentials on the network (gcsfs: ~16 s offline)
        fs, path = answered_within(lambda: fsspec.core.url_to_fs(text),
                                   seconds=STORE_ANSWER_SECONDS, source=source or shown, key=key)
    except ConfigError:
        raise
    except ImportError as error:
        raise _missing_package(scheme, error, source=source, key=key) from None
    except Exception as error:  # noqa: BLE001 - an implementation's own refusal of the URL
        raise ConfigError(f"cannot open {shown}: {store_error_reason(error)}", source=source,
                          key=key) from None
    return RemoteLocation(shown, fs, str(path).rstrip("/") or str(path))


def open_remote(location: str | os.PathLike[str], *, source: str | Path | None = None,
                key: str | None = None) -> RemoteLocation | None:
    """The store folder of a URL, None for a local path."""
    opened = open_location(location, source=source, key=key)
    return opened if isinstance(opened, RemoteLocation) else None


def store_error_reason(error: BaseException) -> str:
    """A store error in one line: its message's first line (and the service's error code)."""
    return known_secrets_scrubber().scrub_text(_first_line(error))


@runtime_checkable
class _ServiceError(Protocol):
    """An azure-core ``HttpResponseError``: the service's own error code beside the message."""

    error_code: object


def _first_line(error: BaseException) -> str:
    strerror = os_reason(error)
    if strerror:
        return strerror
    # azure-core's errors append "ErrorCode:..." and the whole XML reply on further lines
    first = next((line for line in str(error).splitlines() if line.strip()), "")
    text = " ".join(first.split()) or type(error).__name__
    code = error.error_code if isinstance(error, _ServiceError) else None
    if isinstance(code, enum.Enum):  # azure-storage-blob's StorageErrorCode is an enum
        code = code.value
    return f"{text} ({code})" if isinstance(code, str) and code and code not in text else text


def read_remote_bytes(location: RemoteLocation, *, limit: int = MAX_TEXT_BYTES) -> bytes:
    """A small object of a store (a report, a pointer), refused past ``limit`` bytes before
    it is downloaded."""

    def bounded() -> bytes:
        size = location.fs.size(location.path)
        if size is not None and size > limit:
            raise ConfigError(f"too large ({size / 2 ** 20:,.1f} MiB; a store's documents are "
                              f"read up to {limit / 2 ** 20:,.1f} MiB)", source=location.url)
        data: bytes = location.fs.cat_file(location.path)
        return data

    try:
        data = answered_within(bounded, seconds=STORE_ANSWER_SECONDS, source=location.url)
    except ConfigError:
        raise
    except FileNotFoundError:
        raise ConfigError("not found in the store", source=location.url) from None
    except Exception as error:  # noqa: BLE001 - every store raises its own types
        raise ConfigError(f"cannot read from the store: {store_error_reason(error)}",
                          source=location.url) from None
    return data


def read_remote_json(location: RemoteLocation) -> dict[str, Any]:
    """A JSON artifact in a store (its schema version checked, as :func:`read_json` does)."""
    document = decode_json(read_remote_bytes(location, limit=MAX_DOCUMENT_BYTES),
                           source=location.url)
    check_version(document, source=Path(location.url))
    return document


def remote_exists(location: RemoteLocation) -> bool:
    location.fs.invalidate_cache(location.path)
    return bool(location.fs.exists(location.path))


#: How long a store may take to answer a command's first contact (does this folder exist?):
#: an unreachable store's own retries (a DNS failure, a refused or silent endpoint) take up to
#: a minute, and are refused in one line after this instead.
STORE_ANSWER_SECONDS = 10.0


def answered_within(call: Callable[[], T], *, seconds: float, source: str | Path | None,
                    key: str | None = None) -> T:
    """``call()`` (blocking store I/O) within ``seconds``; a store that does not answer is a
    :class:`ConfigError` (the call is left to finish in a daemon thread)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True, name="voicelab-store-answer")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise ConfigError(f"the store did not answer within {seconds:g} s (unreachable?)",
                          source=source, key=key)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def probe_exists(location: RemoteLocation, *, key: str | None = None) -> bool:
    """:func:`remote_exists` for a command's first contact with a store: within
    :data:`STORE_ANSWER_SECONDS`, any failure a :class:`ConfigError` in one line."""
    try:
        return answered_within(lambda: remote_exists(location), seconds=STORE_ANSWER_SECONDS,
                               source=location.url, key=key)
    except ConfigError:
        raise
    except Exception as error:  # noqa: BLE001 - every store raises its own types
        raise ConfigError(f"cannot reach the store: {store_error_reason(error)}",
                          source=location.url, key=key) from None


def _pointer_target(text: str, *, source: str) -> str:
    name = text.strip()
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ConfigError(f"the {LATEST_POINTER} pointer names no run folder ({name!r})",
                          source=source)
    return name


def resolve_latest(location: RemoteLocation) -> RemoteLocation:
    """``<root>/latest`` in a store is the run folder the root's ``LATEST`` object names."""
    if location.name != LATEST:
        return location
    pointer = location.parent.child(LATEST_POINTER)
    if not probe_exists(pointer):
        return location
    text = read_remote_bytes(pointer, limit=4096).decode("utf-8", errors="replace")
    return location.parent.child(_pointer_target(text, source=pointer.url))


def resolve_local_latest(path: Path) -> Path:
    """A local ``<root>/latest``: the symlink when there is one, else the run folder a
    ``LATEST`` file names (a folder copied from a store)."""
    if path.name != LATEST or path.exists() or path.is_symlink():
        return path
    pointer = path.parent / LATEST_POINTER
    if not pointer.is_file():
        return path
    text = read_member(pointer, limit=4096).decode("utf-8", errors="replace")
    return path.parent / _pointer_target(text, source=str(pointer))


def point_latest(root: RemoteLocation, name: str) -> None:
    """Write the store's ``LATEST`` object (one small PUT: a reader sees the old or the new)."""
    root.fs.pipe_file(root.child(LATEST_POINTER).path, f"{name}\n".encode())


def check_writable(location: RemoteLocation, *, source: str | Path | None,
                   key: str | None) -> None:
    """Put and remove a probe object: no bucket, no credentials or no permission is a
    configuration error before any trial runs."""
    probe = location.child(".voicelab-write-check")

    def put_and_remove() -> None:
        location.fs.pipe_file(probe.path, b"")
        location.fs.rm_file(probe.path)

    try:
        answered_within(put_and_remove, seconds=STORE_ANSWER_SECONDS, source=location.url,
                        key=key)
    except ConfigError:
        raise
    except Exception as error:  # noqa: BLE001 - every store raises its own types
        reason = store_error_reason(error)
        if isinstance(error, FileNotFoundError) and not error.strerror:
            reason = f"no such bucket or container ({reason})"  # gcsfs says only the URL
        raise ConfigError(f"cannot write to the store folder {location.url}: {reason}",
                          source=source, key=key) from None


def put_file(local: Path, location: str) -> str:
    """Upload one file to a store URL (a report page); returns the URL."""
    target = open_remote(location, key="output")
    assert target is not None
    try:
        target.fs.put_file(str(local), target.path)
    except Exception as error:  # noqa: BLE001 - every store raises its own types
        raise ConfigError(f"cannot write to the store: {store_error_reason(error)}",
                          source=location, key="output") from None
    return target.url


# --- staging folders: where a run bound for a store is written first ----------------------------

_staged_lock = threading.Lock()
_staged: dict[Path, str] = {}


def register_staging(staging: Path, url: str) -> None:
    """Bundles written under ``staging`` are published to ``url`` (their reports say so)."""
    with _staged_lock:
        _staged[staging] = url


def unregister_staging(staging: Path) -> None:
    with _staged_lock:
        _staged.pop(staging, None)


def published_location(path: str | os.PathLike[str]) -> str:
    """Where a bundle lives for its readers: the store URL of a staged folder, else the path."""
    local = Path(path)
    with _staged_lock:
        staged = list(_staged.items())
    for staging, url in staged:
        if local == staging:
            return url
        if staging in local.parents:
            return f"{url}/{local.relative_to(staging).as_posix()}"
    return str(local)
