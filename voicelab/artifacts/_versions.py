"""The schema version every artifact carries, and the one check readers make of it: a document
of a newer major version than this voicelab reads is refused in one line."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ._models import READABLE_MAJORS, SCHEMA_VERSION

SUPPORTED_MAJOR = max(READABLE_MAJORS)


class ArtifactVersionError(ConfigError):
    """An artifact written by a newer voicelab than this one can read."""


def check_version(document: object, *, source: Path | None,
                  field: str = "schema_version") -> int:
    """The major version of ``document`` (its ``field``); :class:`ArtifactVersionError` when it
    has none or one newer than this voicelab reads."""
    version = document.get(field) if isinstance(document, dict) else None
    if version is None:
        raise ArtifactVersionError("no schema version: not a voicelab artifact", source=source,
                                   key=field)
    try:
        major = int(str(version).split(".")[0])
    except ValueError:
        raise ArtifactVersionError(f"unreadable schema version {str(version)[:40]!r}",
                                   source=source, key=field) from None
    if major > SUPPORTED_MAJOR:
        raise ArtifactVersionError(
            f"schema version {str(version)[:40]} is newer than this voicelab reads "
            f"({SCHEMA_VERSION}); upgrade voicelab", source=source, key=field)
    return major
