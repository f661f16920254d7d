"""Telling a store URL (``s3://bucket/runs``) from a local path, without importing fsspec."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: ``scheme://``: two characters at least, so a Windows drive (``C:\\``) stays a path.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")


def url_scheme(location: object) -> str | None:
    """The scheme of a URL (``s3``), or None for a local path (``file://`` included: it is one)."""
    if isinstance(location, Path) or not isinstance(location, str):
        return None
    found = _URL.match(location)
    if found is None or found.group(1).lower() == "file":
        return None
    return found.group(1).lower()


def is_url(location: object) -> bool:
    """True for a remote store URL (``s3://``, ``gs://``, ``memory://``...), False for a path."""
    return url_scheme(location) is not None


def as_local_path(location: str | os.PathLike[str]) -> Path:
    """A local path; ``file:///x`` is the path ``/x``."""
    text = os.fspath(location)
    if text.lower().startswith("file://"):
        text = text[len("file://"):]
    return Path(os.path.expanduser(text))
