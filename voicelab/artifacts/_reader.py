"""Reading bundles back (for re-scoring, notebooks and frames), refusing newer schema versions.

Every member is read through :mod:`._members` (regular files only, never through a link, within
its size limit, JSON within its depth and number limits): a bundle is hostile input.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._location import is_url
from ..errors import ConfigError
from ._members import json_lines, read_json_member, read_member
from ._models import READABLE_MAJORS, SCHEMA_VERSION
from ._names import TRIAL_REPORT, USER_SENT_WAV, VOICE_EVENTS

SUPPORTED_MAJOR = max(READABLE_MAJORS)


class ArtifactVersionError(ConfigError):
    """An artifact written by a newer voicelab than this one can read."""


def check_version(document: Any, *, source: Path | None,
                  field: str = "schema_version") -> None:
    version = document.get(field) if isinstance(document, dict) else None
    if version is None:
        raise ArtifactVersionError("no schema version: not a voicelab artifact", source=source,
                                   key=field)
    try:
        major = int(str(version).split(".")[0])
    except ValueError:
        raise ArtifactVersionError(f"unreadable schema version {version!r}", source=source,
                                   key=field) from None
    if major > SUPPORTED_MAJOR:
        raise ArtifactVersionError(
            f"schema version {version} is newer than this voicelab reads ({SCHEMA_VERSION}); "
            f"upgrade voicelab", source=source, key=field)


def read_json(path: Path | str) -> dict[str, Any]:
    """A JSON artifact (a path or a store URL), its schema version checked."""
    if is_url(path):
        from ._store import open_remote, read_remote_json

        location = open_remote(path)
        assert location is not None
        return read_remote_json(location)
    try:
        document = read_json_member(path)
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}", source=path) from None
    check_version(document, source=Path(path))
    return document


def read_voice_events(path: Path) -> list[dict[str, Any]]:
    records = []
    try:
        for number, record in json_lines(path):
            if not isinstance(record, dict):
                raise ConfigError(f"line {number}: expected a JSON object", source=path)
            check_version(record, source=Path(path), field="contract_version")
            records.append(record)
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}", source=path) from None
    return records


#: The fields of a trial report readers key and count on, with the types they must have
#: (a bundle is hostile input: a seed of text must be refused naming it, not crash a join).
_REPORT_TYPES: dict[str, tuple[type, ...]] = {
    "seed": (int,), "trial": (int,), "passed": (bool,), "trial_id": (str,),
    "scenario_id": (str,), "persona": (str,), "environment": (str,),
    "execution_status": (str,), "exit_reason": (str,), "verdicts": (list,),
    "failures": (list,), "judges": (list,), "metrics_summary": (dict,), "outcome": (dict,),
    "duration_seconds": (int, float)}


def read_trial_report_json(path: Path) -> dict[str, Any]:
    """A trial-report.json as a document, the fields readers key and count on type-checked."""
    report = read_json(path)
    for key, types in _REPORT_TYPES.items():
        value = report.get(key)
        if value is None:
            continue
        wrong = not isinstance(value, types) or (bool not in types and isinstance(value, bool))
        if wrong or (isinstance(value, list) and not all(isinstance(i, dict) for i in value)):
            expected = "a list of objects" if list in types else " or ".join(
                {int: "a whole number", float: "a number", bool: "true or false",
                 str: "text", dict: "an object"}[t] for t in types)
            raise ConfigError(f"must be {expected}, got {type(value).__name__}", source=path,
                              key=key)
    return report


def find_trial_dirs(path: Path) -> list[Path]:
    """Trial folders under ``path`` (a trial folder, a run folder or a folder of runs)."""
    path = Path(path)
    if (path / TRIAL_REPORT).is_file():
        return [path]
    found = []
    for root, folders, files in os.walk(path):  # links (``latest``) are never followed
        folders.sort()
        if TRIAL_REPORT in files:
            found.append(Path(root))
    return sorted(found)


def read_trial(trial_dir: Path | str) -> dict[str, Any]:
    """Every JSON document of a trial bundle (a folder or a store URL), keyed by file name
    (voice events as a list)."""
    if is_url(trial_dir):
        from ._store import local_folder

        with local_folder(trial_dir, suffixes=(".json", ".jsonl")) as local:
            return read_trial(local)
    trial_dir = Path(trial_dir)
    documents: dict[str, Any] = {TRIAL_REPORT: read_json(trial_dir / TRIAL_REPORT)}
    for path in sorted(trial_dir.glob("*.json")):
        if path.name not in documents:
            documents[path.name] = read_json(path)
    events = trial_dir / VOICE_EVENTS
    if events.is_file():
        documents[VOICE_EVENTS] = read_voice_events(events)
    return documents


def read_audio_stream(path: Path) -> bytes:
    """A bundle's arrival-ordered audio stream (16-bit mono 24 kHz WAV) as PCM bytes."""
    from ..audio import CANONICAL_SAMPLE_RATE_HZ, read_wav_pcm
    from ..errors import AudioFileError

    try:
        samples, _ = read_wav_pcm(read_member(path), sample_rate_hz=CANONICAL_SAMPLE_RATE_HZ)
    except AudioFileError as error:
        raise AudioFileError(error.message, source=path) from None
    return samples.astype("<i2", copy=False).tobytes()


def audio_not_retained(report: Mapping[str, object]) -> str | None:
    """Why a trial keeps no audio, when its run's ``retention:`` left it out: ``"audio not
    retained (retention: failed)"``; None when it kept it (or the report does not say).
    ``report``: its trial-report.json as a document (from outside: only known values are
    quoted)."""
    retention = report.get("retention")
    if not isinstance(retention, Mapping) or retention.get("audio") != "dropped":
        return None
    policy = retention.get("audio_policy")
    return f"audio not retained (retention: {policy if policy in ('failed', 'none') else '?'})"


def require_retained_audio(trial_dir: Path, *, purpose: str) -> None:
    """Raise :class:`ConfigError` naming ``trial_dir`` when its run's retention left out its
    audio (``purpose``: what needs it, ``"re-scored"``, ``"replayed"``)."""
    trial_dir = Path(trial_dir)
    if (trial_dir / USER_SENT_WAV).is_file() or not (trial_dir / TRIAL_REPORT).is_file():
        return
    note = audio_not_retained(read_json(trial_dir / TRIAL_REPORT))
    if note is not None:
        raise ConfigError(f"the trial cannot be {purpose}: {note}", source=trial_dir)
