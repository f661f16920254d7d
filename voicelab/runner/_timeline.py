"""The trial timeline: one monotonic clock, every voice event in order, serialized as voice-events.jsonl.

Recording is cheap on purpose (a dataclass appended to a list): the receive path of an endpoint
only timestamps, the runner records, and analysis happens after the conversation.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from json.encoder import encode_basestring  # what json.dumps uses with ensure_ascii=False
from typing import Any

from ..artifacts import SCHEMA_VERSION

#: The keys of a voice-events.jsonl record, in file order.
RECORD_FIELDS = ["contract_version", "event_id", "sequence", "session_id", "turn_id",
                 "timestamp_utc", "monotonic_offset_ns", "offset_ms", "source", "direction",
                 "event_type", "speaker_role", "pcm", "trace", "attributes"]


@dataclass(slots=True)
class TimelineEvent:
    sequence: int
    offset_ns: int
    event_type: str
    source: str
    direction: str
    speaker_role: str | None = None
    turn_id: str | None = None
    pcm: dict[str, Any] | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=64)
def _utc_second(epoch_second: int) -> str:
    return datetime.fromtimestamp(epoch_second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


@lru_cache(maxsize=1024)
def pcm_metadata(byte_count: int, *, sample_rate_hz: int = 24_000) -> dict[str, Any]:
    """PCM metadata of an audio chunk (memoized; the shared dict must not be mutated)."""
    return {"encoding": "pcm_s16le", "sample_rate_hz": sample_rate_hz, "channels": 1,
            "byte_count": byte_count,
            "duration_ms": round(byte_count / 2 / sample_rate_hz * 1000.0, 3)}


class Timeline:
    """Events of one trial, offsets from the trial's start on ``time.perf_counter_ns``."""

    def __init__(self, *, session_id: str, trace_id: str, root_span_id: str,
                 clock_ns: Any = time.perf_counter_ns):
        self.session_id = session_id
        self.trace_id = trace_id
        self.root_span_id = root_span_id
        self.clock_ns = clock_ns
        self.start_ns = clock_ns()
        self.start_utc_ns = time.time_ns()
        self.events: list[TimelineEvent] = []
        #: the listener timeline's lead over real time (the sum of recorded virtual advances)
        self.shift_ns = 0

    def now_offset_ns(self) -> int:
        return self.clock_ns() - self.start_ns

    def offset_of(self, monotonic_ns: int) -> int:
        return monotonic_ns - self.start_ns

    def record(self, event_type: str, *, source: str, direction: str,
               at_ns: int | None = None, speaker_role: str | None = None,
               turn_id: str | None = None, pcm: dict[str, Any] | None = None,
               span_id: str | None = None, **attributes: Any) -> TimelineEvent:
        """Append an event; ``at_ns`` is a monotonic timestamp (default: now)."""
        offset = (self.clock_ns() if at_ns is None else at_ns) - self.start_ns
        event = TimelineEvent(len(self.events), offset, event_type, source, direction,
                              speaker_role, turn_id, pcm, span_id,
                              self.root_span_id if span_id else None, attributes)
        self.events.append(event)
        return event

    def utc_iso(self, offset_ns: int) -> str:
        """UTC time of ``offset_ns`` as ISO 8601 with microseconds and a ``Z``."""
        micros = (self.start_utc_ns + offset_ns) // 1000
        second, fraction = divmod(micros, 1_000_000)
        return f"{_utc_second(second)}.{fraction:06d}Z"

    def to_records(self, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """JSON-ready voice events (schema 1.0) ``events[start:stop]``, ordered by sequence."""
        # event ids: the trace id with the sequence in its last 12 hex digits (a valid, stable
        # UUID string per trial; uuid5 per event cost more than the rest of the record)
        prefix = str(uuid.UUID(self.trace_id))[:24]
        records = []
        for event in self.events[start:stop]:
            record: dict[str, Any] = {
                "contract_version": SCHEMA_VERSION,
                "event_id": f"{prefix}{event.sequence:012x}",
                "sequence": event.sequence,
                "session_id": self.session_id,
                "turn_id": event.turn_id,
                "timestamp_utc": self.utc_iso(event.offset_ns),
                "monotonic_offset_ns": event.offset_ns,
                "offset_ms": round(event.offset_ns / 1e6, 3),
                "source": event.source,
                "direction": event.direction,
                "event_type": event.event_type,
                "speaker_role": event.speaker_role,
                "pcm": event.pcm,
                "trace": {"trace_id": self.trace_id, "span_id": event.span_id,
                          "parent_span_id": event.parent_span_id} if event.span_id else None,
                "attributes": event.attributes,
            }
            records.append(record)
        return records


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def voice_events_jsonl(records: list[dict[str, Any]]) -> bytes:
    """voice-events.jsonl for ``records``: the same bytes as compact ``json.dumps`` of each
    record, built from cached pieces (audio chunks are most of a trial's events and differ only
    in numbers, ids and times)."""
    def text(value: str | None) -> str:
        return encode_basestring(value) if type(value) is str else _compact_json(value)

    by_identity: dict[int, str] = {}

    def shared(value: Any) -> str:  # memoized metadata dicts (pcm) are shared between events
        key = id(value)
        encoded = by_identity.get(key)
        if encoded is None:
            encoded = by_identity[key] = _compact_json(value)
        return encoded

    lines = []
    for record in records:
        if list(record) != RECORD_FIELDS:
            lines.append(_compact_json(record))
            continue
        attributes = record["attributes"]
        trace = record["trace"]
        lines.append(
            f'{{"contract_version":{text(record["contract_version"])},'
            f'"event_id":{text(record["event_id"])},"sequence":{int(record["sequence"])},'
            f'"session_id":{text(record["session_id"])},"turn_id":{text(record["turn_id"])},'
            f'"timestamp_utc":{text(record["timestamp_utc"])},'
            f'"monotonic_offset_ns":{int(record["monotonic_offset_ns"])},'
            f'"offset_ms":{float(record["offset_ms"])!r},"source":{text(record["source"])},'
            f'"direction":{text(record["direction"])},"event_type":{text(record["event_type"])},'
            f'"speaker_role":{text(record["speaker_role"])},"pcm":{shared(record["pcm"])},'
            f'"trace":{_compact_json(trace) if trace else "null"},'
            f'"attributes":{_compact_json(attributes) if attributes else "{}"}}}')
    return ("\n".join(lines) + ("\n" if lines else "")).encode()
