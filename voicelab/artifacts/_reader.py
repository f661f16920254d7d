"""Reading bundles back (for re-scoring, notebooks and frames), refusing newer schema versions.

Every member is read through :mod:`._members` (regular files only, never through a link, within
its size limit, JSON within its depth and number limits): a bundle is hostile input.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._location import is_url
from ..config import parse_settings
from ..errors import ConfigError
from ._event_records import check_event_records
from ._fetch import local_folder
from ._members import (
    BundleMemberError,
    check_tree,
    decode_json,
    json_lines,
    read_json_member,
    read_member,
)
from ._names import (
    MATRIX_REPORT,
    RUN_REPORT,
    TRIAL_REPORT,
    USER_SENT_WAV,
    VOICE_EVENTS,
    VOICE_METRICS,
)
from ._report_models import MatrixReport, RunReport
from ._store import open_remote, read_remote_json
from ._versions import check_version
from ._voice_models import VoiceMetrics


def read_json(path: Path | str, *, model: type[BaseModel] | None = None) -> dict[str, Any]:
    """A JSON artifact (a path or a store URL), its schema version checked; with ``model``
    (``RunReport``, ``VoiceMetrics``...) validated against it too, a wrong field refused naming
    its key (``voice-metrics.json: turns[0].response_latency_ms: ...``). The document is
    returned as read."""
    if is_url(path):
        location = open_remote(path)
        assert location is not None
        document = read_remote_json(location)
    else:
        try:
            document = read_json_member(path)
        except FileNotFoundError:
            raise ConfigError(f"file not found: {path}", source=path) from None
        check_version(document, source=Path(path))
    if model is not None:
        parse_settings(model, document, key=None, source=path)
    return document


def read_voice_events(path: Path) -> list[dict[str, Any]]:
    """The records of a voice-events.jsonl, each checked (:func:`check_event_records`, which
    names the line of the first wrong one); an empty file is refused (a finished trial recorded
    at least its start). The file is decoded in one ``json.loads`` (its lines joined into an
    array); one with blank lines or a line that is no single JSON value is decoded again line
    by line, so the error names the line."""
    path = Path(path)
    try:
        data = read_member(path)  # never through a link, within the size limit
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}", source=path) from None
    body = data.strip()
    if not body:
        raise BundleMemberError("no events: a trial's recording starts with trial.started",
                                source=path)
    if not data[:1].isspace():  # no blank line before the first: line numbers are positions
        try:
            records = decode_json(b"[" + body.replace(b"\n", b",") + b"]", source=path)
        except BundleMemberError:
            pass  # blank lines, or a precise error with the line number below
        else:  # one record per line (``{..},{..}`` on one line is read again, and refused)
            if len(records) == body.count(b"\n") + 1:
                check_event_records(records, source=path)
                return records
    numbered = list(json_lines(path))
    records = [record for _, record in numbered]
    check_event_records(records, source=path, lines=[number for number, _ in numbered])
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


def check_bundle(path: Path) -> None:
    """Refuse the bundle at ``path`` (a trial folder, a run, a sweep or a folder of them) unless
    everything a reader keys on reads and checks: its tree (:func:`check_tree`), then every
    run and matrix report, and in each trial folder every JSON member (bounded, its version
    readable), the trial report's typed fields, voice-metrics.json and every voice event.
    A command that renders a bundle calls it at the door, before any heavy work: what would
    otherwise fail deep inside a notebook is one line naming the member."""
    path = Path(path)
    check_tree(path)
    if not path.is_dir():
        return  # missing or a file: the caller reports it in its own words
    for root, folders, files in os.walk(path):  # links (``latest``) are never followed
        folders.sort()
        here = Path(root)
        if RUN_REPORT in files:
            read_json(here / RUN_REPORT, model=RunReport)
        if MATRIX_REPORT in files:
            read_json(here / MATRIX_REPORT, model=MatrixReport)
        if TRIAL_REPORT in files:
            read_trial(here)
            read_trial_report_json(here / TRIAL_REPORT)
            if VOICE_METRICS in files:
                read_json(here / VOICE_METRICS, model=VoiceMetrics)


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
