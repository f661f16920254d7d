"""The records of voice-events.jsonl as every reader takes them: each one checked before use.

A bundle is hostile input, and a record is read by several readers (the frames, a recording
rebuilt for ``rescore``, a replay, ``report``) that key on its fields. So every record is
checked once, where it is read (:func:`check_event_records`), against what the contract
(docs/artifacts.md, "voice-events.jsonl") says and the readers rely on:

* it is a JSON object with its ``contract_version`` (not newer than this voicelab reads);
* ``sequence`` and ``monotonic_offset_ns`` are whole numbers, ``listener_offset_ns`` too in
  every record or in none (1.0 bundles lack it); offsets and a virtual advance's
  ``advance_ns`` lie within :data:`MAX_TIMELINE_SECONDS` of the trial's start, because a
  bundle's stamps decide how much audio a reader places on its timeline;
* ``timestamp_utc`` is an ISO 8601 time; ``source``, ``direction`` and ``event_type`` are
  text; ``turn_id``,
  ``speaker_role``, ``session_id`` and ``event_id`` text or null; ``pcm``, ``trace`` and
  ``attributes`` objects or null;
* an audio event's ``pcm.byte_count`` is a whole number and ``pcm.duration_ms`` a number; the
  audio events of one type tile one stream, so their byte counts add up to at most what a
  stream member may hold (:data:`~._members.MAX_AUDIO_BYTES`).

A wrong record is refused as a :class:`~._members.BundleMemberError` naming the member, its
line and the key. The check runs column by column over a file's decoded records (a set of the
types each field holds), which costs little beside the decoding; only a file that fails it is
walked record by record to name the first wrong line.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import partial
from operator import is_not, itemgetter, methodcaller
from pathlib import Path
from typing import Any

from ..config import MAX_TRIAL_SECONDS
from ._members import MAX_AUDIO_BYTES, BundleMemberError
from ._versions import ArtifactVersionError, check_version

__all__ = ["MAX_TIMELINE_NS", "MAX_TIMELINE_SECONDS", "check_event_records"]

#: The longest timeline a recording read back may span (event offsets, listener offsets,
#: virtual advances): a bundle's stamps decide how much audio placement renders, so stamps
#: shifted by hours would allocate gigabytes. Scenarios' ``max_time_seconds`` stays within it.
#: The longest a trial may last (it ends there on the listener's clock, with or without
#: ``max_time_seconds``): a bundle's stamps decide how much audio placement renders, so stamps
#: shifted by hours would allocate gigabytes.
MAX_TIMELINE_SECONDS = MAX_TRIAL_SECONDS
MAX_TIMELINE_NS = MAX_TIMELINE_SECONDS * 1_000_000_000

_VIRTUAL_ADVANCE = "timeline.virtual_advance"
_NONE: type = type(None)
_WHOLE: frozenset[type] = frozenset({int})
_NUMBER: frozenset[type] = frozenset({int, float})
_TEXT: frozenset[type] = frozenset({str})
_OPTIONAL_TEXT: frozenset[type] = frozenset({str, _NONE})
_OPTIONAL_OBJECT: frozenset[type] = frozenset({dict, _NONE})

#: fields every record has, and the types their values may have (``bool`` is no number here:
#: the sets hold exact types)
_REQUIRED: dict[str, frozenset[type]] = {
    "contract_version": _TEXT, "sequence": _WHOLE, "timestamp_utc": _TEXT,
    "monotonic_offset_ns": _WHOLE, "source": _TEXT, "direction": _TEXT, "event_type": _TEXT}
#: fields a record may leave out (or set to null)
_OPTIONAL: dict[str, frozenset[type]] = {
    "event_id": _OPTIONAL_TEXT, "session_id": _OPTIONAL_TEXT, "turn_id": _OPTIONAL_TEXT,
    "speaker_role": _OPTIONAL_TEXT, "offset_ms": _NUMBER | {_NONE}, "pcm": _OPTIONAL_OBJECT,
    "trace": _OPTIONAL_OBJECT, "attributes": _OPTIONAL_OBJECT,
    "listener_offset_ns": _WHOLE | {_NONE}}
_WHAT = {_WHOLE: "a whole number", _TEXT: "text", _OPTIONAL_TEXT: "text or null",
         _OPTIONAL_OBJECT: "an object or null", _NUMBER | {_NONE}: "a number or null",
         _WHOLE | {_NONE}: "a whole number or null", _NUMBER: "a number"}
_ALLOWED = {**_REQUIRED, **_OPTIONAL}
_FIELDS = tuple(_ALLOWED)
_every_field = itemgetter(*_FIELDS)
_required_fields = itemgetter(*_REQUIRED)
_not_none = partial(is_not, None)
_get_byte_count = methodcaller("get", "byte_count")
_get_duration = methodcaller("get", "duration_ms")
_OFFSETS = ("monotonic_offset_ns", "listener_offset_ns")
#: a sequence number is a 64-bit integer in every reader (the frames' columns)
_MAX_SEQUENCE = 2 ** 63 - 1


def check_event_records(records: Sequence[object], *, source: Path | str,
                        lines: Sequence[int] | None = None) -> None:
    """Refuse ``records`` (one voice-events.jsonl file's, decoded) unless every one fits the
    contract (see the module docstring). ``lines`` are the records' line numbers in the file
    (default: one record per line from line 1)."""
    if _conform(records):
        return
    numbers: Iterable[int] = lines if lines is not None else range(1, len(records) + 1)
    totals: dict[str, int] = {}
    listener: bool | None = None
    for number, record in zip(numbers, records, strict=True):
        listener = _check_record(record, source=source, line=number, listener=listener)
        assert isinstance(record, dict)  # checked
        pcm = record.get("pcm")
        if pcm is not None:
            kind = record["event_type"]
            totals[kind] = totals.get(kind, 0) + pcm["byte_count"]
            if totals[kind] > MAX_AUDIO_BYTES:
                raise BundleMemberError(
                    f"line {number}: pcm.byte_count: the {kind} events add up to "
                    f"{totals[kind]:,} bytes, more than a bundle's stream holds "
                    f"({MAX_AUDIO_BYTES:,})", source=source)


# --- the whole file at once -------------------------------------------------------------------

def _types(values: Iterable[object]) -> set[type]:
    return set(map(type, values))


def _transposed(names: tuple[str, ...], rows: Iterable[tuple[object, ...]]
                ) -> dict[str, tuple[Any, ...]]:
    """Rows of field values as one column per name (every row has a value per name)."""
    return dict(zip(names, zip(*rows, strict=True), strict=True))


def _conform(records: Sequence[Any]) -> bool:
    """Whether every record fits, decided column by column; False sends the file to the
    record-by-record check, which names the first wrong line (so False may be conservative)."""
    if not records:
        return True
    if not _types(records) <= {dict}:
        return False
    try:  # every field of every record, as voicelab writes them: one C-level transpose
        columns = _transposed(_FIELDS, map(_every_field, records))
    except KeyError:  # some leave an optional field out
        try:
            columns = _transposed(tuple(_REQUIRED), map(_required_fields, records))
        except KeyError:
            return False
        columns.update({name: tuple(map(methodcaller("get", name), records))
                        for name in _OPTIONAL})
    types = {name: _types(values) for name, values in columns.items()}
    if any(not types[name] <= allowed for name, allowed in _ALLOWED.items()):
        return False
    listener = columns["listener_offset_ns"]
    if _NONE in types["listener_offset_ns"]:
        if types["listener_offset_ns"] != {_NONE}:
            return False  # in some records but not all
        listener = ()
    for values in (columns["monotonic_offset_ns"], listener):
        if values and not (-MAX_TIMELINE_NS <= min(values) and max(values) <= MAX_TIMELINE_NS):
            return False
    if min(columns["sequence"]) < 0 or max(columns["sequence"]) > _MAX_SEQUENCE:
        return False
    for version in set(columns["contract_version"]):
        try:
            check_version({"contract_version": version}, source=None, field="contract_version")
        except ArtifactVersionError:
            return False
    try:
        deque(map(datetime.fromisoformat, columns["timestamp_utc"]), maxlen=0)
    except ValueError:
        return False
    if _VIRTUAL_ADVANCE in set(columns["event_type"]):
        advances = [value for kind, attributes
                    in zip(columns["event_type"], columns["attributes"], strict=True)
                    if kind == _VIRTUAL_ADVANCE and attributes
                    and (value := attributes.get("advance_ns")) is not None]
        if advances and (not _types(advances) <= _WHOLE or min(advances) < -MAX_TIMELINE_NS
                         or max(advances) > MAX_TIMELINE_NS):
            return False
    pcm = columns["pcm"]
    if dict in types["pcm"]:
        pcm = tuple(filter(_not_none, pcm)) if _NONE in types["pcm"] else pcm  # {} kept
        counts = tuple(map(_get_byte_count, pcm))
        if not _types(counts) <= _WHOLE or \
                not _types(map(_get_duration, pcm)) <= _NUMBER:
            return False
        if min(counts) < 0 or sum(counts) > MAX_AUDIO_BYTES:  # any type's total within it
            return False
    return True


# --- one record, naming what is wrong -------------------------------------------------------------

def _check_record(record: object, *, source: Path | str, line: int, listener: bool | None
                  ) -> bool:
    """Refuse one record naming its line and key; returns whether it carries
    ``listener_offset_ns`` (every record of a file must agree with the first)."""
    def refuse(key: str, problem: str) -> BundleMemberError:
        return BundleMemberError(f"line {line}: {key}: {problem}", source=source)

    if not isinstance(record, dict):
        raise BundleMemberError(f"line {line}: expected a JSON object, got "
                                f"{type(record).__name__}", source=source)
    for name, allowed in _ALLOWED.items():
        if name not in record:
            if name in _REQUIRED:
                raise refuse(name, "missing")
            continue
        if type(record[name]) not in allowed:
            raise refuse(name, f"must be {_WHAT[allowed]}, got {type(record[name]).__name__}")
    try:
        check_version(record, source=None, field="contract_version")
    except ArtifactVersionError as error:  # a newer bundle: its own error type, with the line
        raise ArtifactVersionError(f"line {line}: {error.message}", source=source,
                                   key="contract_version") from None
    if not 0 <= record["sequence"] <= _MAX_SEQUENCE:
        raise refuse("sequence", f"{_shown(record['sequence'])} is outside [0, 2**63)")
    has_listener = record.get("listener_offset_ns") is not None
    if listener is not None and has_listener != listener:
        raise refuse("listener_offset_ns", "in some records but not in others (every record "
                      "of a 2.0 bundle has one, none of a 1.0 bundle)")
    for name in _OFFSETS:
        _within_timeline(record.get(name), name=name, refuse=refuse)
    try:
        datetime.fromisoformat(record["timestamp_utc"])
    except ValueError:
        raise refuse("timestamp_utc", f"{record['timestamp_utc'][:40]!r} is no ISO 8601 "
                     f"time") from None
    if record["event_type"] == _VIRTUAL_ADVANCE:
        advance = (record.get("attributes") or {}).get("advance_ns")
        if advance is not None and type(advance) is not int:
            raise refuse("attributes.advance_ns", f"must be a whole number, got "
                         f"{type(advance).__name__}")
        _within_timeline(advance, name="attributes.advance_ns", refuse=refuse)
    pcm = record.get("pcm")
    if pcm is not None:
        count, duration = pcm.get("byte_count"), pcm.get("duration_ms")
        if type(count) is not int:
            raise refuse("pcm.byte_count", f"must be a whole number, got {type(count).__name__}")
        if not 0 <= count <= MAX_AUDIO_BYTES:
            raise refuse("pcm.byte_count", f"{_shown(count)} is outside [0, {MAX_AUDIO_BYTES:,}] "
                         f"(the most a bundle's stream holds)")
        if type(duration) not in _NUMBER:
            raise refuse("pcm.duration_ms", f"must be a number, got {type(duration).__name__}")
    return has_listener


def _within_timeline(value: float | None, *, name: str, refuse: Callable[[str, str], Exception]) -> None:
    if value is not None and not -MAX_TIMELINE_NS <= value <= MAX_TIMELINE_NS:
        raise refuse(name, f"{_shown(value)} is outside [{-MAX_TIMELINE_NS:,}, {MAX_TIMELINE_NS:,}] "
                     f"(a recording spans at most {MAX_TIMELINE_SECONDS:,} s)")


def _shown(value: float) -> str:
    """A whole number in an error line: ``1.8e+13``; one too large for a float by its digits."""
    try:
        return f"{value:.3g}"
    except OverflowError:
        return f"a number of {len(str(abs(value))):,} digits"
