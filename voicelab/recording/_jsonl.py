"""voice-events.jsonl: a recording's events as JSON lines, and a recording read back from them.

Audio events carry their PCM metadata (``pcm.byte_count``); the samples themselves are in the
bundle's arrival-ordered streams (``user-sent.wav``, ``product-received.wav``, and
``user-clean.wav`` when speech metrics were on). An event's position in its stream is implied by
the order: the audio events of one direction, in sequence order, tile the stream exactly.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from json.encoder import encode_basestring  # what json.dumps uses with ensure_ascii=False
from typing import Any

from ..artifacts import MAX_TIMELINE_NS, MAX_TIMELINE_SECONDS, SCHEMA_VERSION, VOICE_EVENTS
from ..audio import BYTES_PER_SAMPLE, CANONICAL_SAMPLE_RATE_HZ
from ..errors import ConfigError
from ._attributes import ATTRIBUTES, VirtualAdvance
from ._events import AUDIO_STREAMS, Event, EventType
from ._recording import CLEAN_SPEECH, USER_CLEAN, USER_HEARD, Recording
from ._store import PcmStream

#: The version written in every line's ``contract_version``: the bundle's schema version.
CONTRACT_VERSION = SCHEMA_VERSION

#: The keys of a voice-events.jsonl record, in file order.
RECORD_FIELDS = ["contract_version", "event_id", "sequence", "session_id", "turn_id",
                 "timestamp_utc", "monotonic_offset_ns", "listener_offset_ns", "offset_ms",
                 "source", "direction", "event_type", "speaker_role", "pcm", "trace",
                 "attributes"]


@lru_cache(maxsize=64)
def _utc_second(epoch_second: int) -> str:
    return datetime.fromtimestamp(epoch_second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


@lru_cache(maxsize=1024)
def pcm_metadata(byte_count: int, *,
                 sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> dict[str, Any]:
    """PCM metadata of an audio chunk (memoized; the shared dict must not be mutated)."""
    return {"encoding": "pcm_s16le", "sample_rate_hz": sample_rate_hz, "channels": 1,
            "byte_count": byte_count,
            "duration_ms": round(byte_count / 2 / sample_rate_hz * 1000.0, 3)}


def utc_iso(recording: Recording, offset_ns: int) -> str:
    """UTC time of ``offset_ns`` as ISO 8601 with microseconds and a ``Z``."""
    micros = (recording.start_utc_ns + offset_ns) // 1000
    second, fraction = divmod(micros, 1_000_000)
    return f"{_utc_second(second)}.{fraction:06d}Z"


def to_records(recording: Recording, start: int = 0, stop: int | None = None
               ) -> list[dict[str, object]]:
    """JSON-ready voice events ``events[start:stop]``, ordered by sequence."""
    # event ids: the trace id with the sequence in its last 12 hex digits (a valid, stable
    # UUID string per trial, made without hashing each event)
    prefix = str(uuid.UUID(recording.trace_id))[:24]
    root = recording.root_span_id
    records = []
    for event in recording.events[start:stop]:
        records.append({
            "contract_version": CONTRACT_VERSION,
            "event_id": f"{prefix}{event.sequence:012x}",
            "sequence": event.sequence,
            "session_id": recording.session_id,
            "turn_id": event.turn_id,
            "timestamp_utc": utc_iso(recording, event.offset_ns),
            "monotonic_offset_ns": event.offset_ns,
            "listener_offset_ns": event.listener_ns,
            "offset_ms": round(event.offset_ns / 1e6, 3),
            "source": event.source,
            "direction": event.direction,
            "event_type": event.type.value,
            "speaker_role": event.speaker_role,
            "pcm": pcm_metadata(event.audio_samples * BYTES_PER_SAMPLE)
            if event.audio_start >= 0 else None,
            "trace": {"trace_id": recording.trace_id, "span_id": event.span_id,
                      "parent_span_id": root} if event.span_id else None,
            "attributes": event.attributes,
        })
    return records


def _compact_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def voice_events_jsonl(records: Sequence[Mapping[str, object]]) -> bytes:
    """voice-events.jsonl for ``records`` (dicts as :func:`to_records` makes them): compact
    ``json.dumps`` of each, one per line."""
    lines = [_compact_json(record) for record in records]
    return ("\n".join(lines) + ("\n" if lines else "")).encode()


def encode_voice_events(recording: Recording, start: int = 0, stop: int | None = None) -> bytes:
    """voice-events.jsonl of ``events[start:stop]`` straight from the events: the same bytes as
    :func:`voice_events_jsonl` of :func:`to_records` (tested), without building a dict per event.
    Audio chunks are most of a trial's events and differ only in numbers and times: the text
    around the numbers is encoded once per (turn, source, direction, type, role, span)."""
    encoded: dict[str | None, str] = {}

    def text(value: str | None) -> str:
        found = encoded.get(value)
        if found is None:
            found = encoded[value] = (encode_basestring(value) if type(value) is str
                                      else _compact_json(value))
        return found

    pcm_text: dict[int, str] = {}
    # the text between the numbers of one kind of event: before the timestamp, and between
    # the offset and the PCM metadata, then between it and the attributes
    around: dict[tuple[object, ...], tuple[str, str, str]] = {}
    prefix = str(uuid.UUID(recording.trace_id))[:24]
    head = f'{{"contract_version":{text(CONTRACT_VERSION)},"event_id":"{prefix}'
    session = f',"session_id":{text(recording.session_id)},"turn_id":'
    trace_head = f',"trace":{{"trace_id":{text(recording.trace_id)},"span_id":'
    trace_tail = f',"parent_span_id":{text(recording.root_span_id)}}},"attributes":'
    start_utc = recording.start_utc_ns
    lines = []
    for event in recording.events[start:stop]:
        kind = (event.turn_id, event.source, event.direction, event.type, event.speaker_role,
                event.span_id)
        parts = around.get(kind)
        if parts is None:
            parts = around[kind] = (
                f'{session}{text(event.turn_id)},"timestamp_utc":"',
                f',"source":{text(event.source)},"direction":{text(event.direction)},'
                f'"event_type":{text(event.type.value)},'
                f'"speaker_role":{text(event.speaker_role)},"pcm":',
                f"{trace_head}{text(event.span_id)}{trace_tail}" if event.span_id
                else ',"trace":null,"attributes":')
        if event.audio_start >= 0:
            pcm = pcm_text.get(event.audio_samples)
            if pcm is None:
                pcm = pcm_text[event.audio_samples] = _compact_json(
                    pcm_metadata(event.audio_samples * BYTES_PER_SAMPLE))
        else:
            pcm = "null"
        offset = event.offset_ns
        second, fraction = divmod((start_utc + offset) // 1000, 1_000_000)
        attributes = event.attributes
        lines.append(
            f'{head}{event.sequence:012x}","sequence":{event.sequence}{parts[0]}'
            f'{_utc_second(second)}.{fraction:06d}Z","monotonic_offset_ns":{offset},'
            f'"listener_offset_ns":{event.listener_ns},"offset_ms":{round(offset / 1e6, 3)!r}'
            f'{parts[1]}{pcm}{parts[2]}{_compact_json(attributes) if attributes else "{}"}}}')
    return ("\n".join(lines) + ("\n" if lines else "")).encode()


# --- reading back -------------------------------------------------------------------------------

class RecordingError(ConfigError):
    """A bundle whose events and audio streams do not fit together."""


def _whole(value: object, *, name: str, line: int, where: str, low: int, high: int) -> int:
    """A whole number of a record within [low, high] (a bool, float or text is refused)."""
    if type(value) is not int:
        raise RecordingError(f"line {line}: {name} must be a whole number, got "
                             f"{type(value).__name__}", source=where)
    if not low <= value <= high:
        raise RecordingError(f"line {line}: {name} {value:.3g} is outside [{low:,}, {high:,}] "
                             f"(a recording spans at most {MAX_TIMELINE_SECONDS:,} s)",
                             source=where)
    return value


def _offset(value: object, *, name: str, line: int, where: str) -> int:
    return _whole(value, name=name, line=line, where=where, low=-MAX_TIMELINE_NS,
                  high=MAX_TIMELINE_NS)


def _mapping(value: object, *, name: str, line: int, where: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RecordingError(f"line {line}: {name} must be an object, got "
                             f"{type(value).__name__}", source=where)
    return value


def _text(value: object, *, name: str, line: int, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise RecordingError(f"line {line}: {name} must be text, got {type(value).__name__}",
                             source=where)
    return value


def _start_utc_ns(record: Mapping[str, object], offset_ns: int, *, where: str) -> int:
    text = record.get("timestamp_utc")
    try:
        started = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        return int(started.timestamp()) * 1_000_000_000 + started.microsecond * 1000 - offset_ns
    except (ValueError, OverflowError, OSError):
        raise RecordingError(f"line 1: timestamp_utc {str(text)[:40]!r} is no ISO 8601 time",
                             source=where) from None


def _event_type(name: object, *, where: str) -> EventType:
    if isinstance(name, str):
        try:
            return EventType(name)
        except ValueError:
            pass
    raise RecordingError(f"unknown event type {name!r}", source=where)


def recording_from_records(records: Iterable[Mapping[str, object]], *,
                           streams: Mapping[str, bytes | bytearray | memoryview],
                           where: str = VOICE_EVENTS) -> Recording:
    """A :class:`Recording` rebuilt from voice-event records and the arrival-ordered streams.

    The listener follows the events again (the same code as during the call), so placement,
    metrics and verdicts computed from the result equal those of the live recording. Records
    without ``listener_offset_ns`` (schema 1.0) get it from the virtual advances before them.
    """
    records = list(records)
    if not records:  # an empty recording is a malformed bundle, not a call that failed
        raise RecordingError("no events: a trial's recording starts with trial.started",
                             source=where)
    first = records[0]
    trace = next((found for r in records if isinstance(found := r.get("trace"), Mapping)),
                 None) or {}
    recording = Recording(session_id=str(first.get("session_id", "")),
                          trace_id=str(trace.get("trace_id") or uuid.UUID(int=0).hex),
                          root_span_id=str(trace.get("parent_span_id") or ""),
                          clock_ns=lambda: 0, start_ns=0, start_utc_ns=0)
    if first:
        recording.start_utc_ns = _start_utc_ns(first, _offset(
            first.get("monotonic_offset_ns"), name="monotonic_offset_ns", line=1, where=where),
            where=where)
    sources = {name: PcmStream(streams.get(name, b"")) for name in recording.streams}
    cursors = dict.fromkeys(sources, 0)
    if USER_HEARD in streams:  # no event references it: the heard line, kept whole
        sources[USER_HEARD] = PcmStream(streams[USER_HEARD])
    shift = 0
    for position, record in enumerate(records):
        if record.get("sequence") != position:
            raise RecordingError(f"line {position + 1}: sequence {record.get('sequence')!r}, "
                                 f"expected {position}", source=where)
        kind = _event_type(record.get("event_type"), where=where)
        line = position + 1
        offset = _offset(record.get("monotonic_offset_ns"), name="monotonic_offset_ns",
                         line=line, where=where)
        listener = record.get("listener_offset_ns")
        listener = _offset(listener if listener is not None else offset + shift,
                           name="listener_offset_ns", line=line, where=where)
        trace_info = _mapping(record.get("trace"), name="trace", line=line, where=where)
        attributes = _mapping(record.get("attributes"), name="attributes", line=line, where=where)
        problem = ATTRIBUTES[kind].check(attributes)
        if problem is not None:
            raise RecordingError(f"line {line}: {kind.value} attributes.{problem}", source=where)
        event = Event(position, offset, listener, kind, str(record.get("source")),
                      str(record.get("direction")),
                      _text(record.get("speaker_role"), name="speaker_role", line=line,
                            where=where),
                      _text(record.get("turn_id"), name="turn_id", line=line, where=where),
                      _text(trace_info.get("span_id"), name="trace.span_id", line=line,
                            where=where), dict(attributes))
        if kind is EventType.VIRTUAL_ADVANCE:
            shift += _offset(VirtualAdvance.of(event).advance_ns, name="advance_ns",
                             line=line, where=where)
        pcm = _mapping(record.get("pcm"), name="pcm", line=line, where=where)
        stream_name = USER_CLEAN if kind is CLEAN_SPEECH else AUDIO_STREAMS.get(kind)
        # a stream the bundle did not keep (clean speech without speech metrics): no reference
        if pcm and stream_name is not None and stream_name in streams:
            available = sources[stream_name].num_samples * BYTES_PER_SAMPLE
            count = _whole(pcm.get("byte_count"), name="pcm.byte_count", line=line, where=where,
                           low=0, high=available) // BYTES_PER_SAMPLE
            event.audio_start, event.audio_samples = cursors[stream_name], count
            cursors[stream_name] += count
        recording.events.append(event)
        recording._follow(event)
    for name, used in cursors.items():
        available = sources[name].num_samples
        if used and used > available:
            raise RecordingError(f"the events reference {used} samples of the {name} stream, "
                                 f"which holds {available}", source=where)
    recording.streams = sources
    return recording
