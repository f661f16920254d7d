"""A trial's timeline as spans need it, read back from its bundle folder (voice-events.jsonl).

Spans are built after a trial, from what its recording became on disk: the same reading serves
a run in progress (the trial's folder is complete once it settled) and an old bundle exported
later. Only the events that open or close a span are decoded; the thousands of audio-chunk lines
are reduced to the first and last arrival per turn with two byte patterns each, so a long call
costs its export thread milliseconds, not a JSON decode per packet. The file is read with the
bundle's bounded reader (a bundle is untrusted input).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import JsonValue

from ..artifacts import VOICE_EVENTS, BundleMemberError, decode_json, read_member

#: An audio event's line (one per packet) is reduced to its direction, turn and arrival offset
#: by byte searches, never decoded: a long call has tens of thousands of them.
_AUDIO_MARK = b'.audio_chunk"'
_PRODUCT_AUDIO = b'"event_type":"product.audio_chunk"'
_USER_AUDIO = b'"event_type":"user.audio_chunk"'
_TURN = re.compile(rb'"turn_id":"([^"\\\n]{1,200})"')
_OFFSET = re.compile(rb'"monotonic_offset_ns":(\d{1,20})')


@dataclass
class TimelineEvent:
    """One decoded event: its type, turn, offset on the trial's monotonic clock (ns) and
    attributes."""

    type: str
    offset_ns: int
    turn_id: str | None
    attributes: dict[str, JsonValue]


@dataclass
class Timeline:
    """What a trial's spans are placed with: the UTC time of the trial clock's zero, the root
    span id the product was sent, the decoded events in order, and each direction's first and
    last audio arrival per turn."""

    start_utc_ns: int
    root_span_id: str | None
    events: list[TimelineEvent] = field(default_factory=list)
    #: direction ("user", "product") -> turn id -> (first, last) arrival offset in ns
    audio: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)

    def of_type(self, event_type: str) -> list[TimelineEvent]:
        return [event for event in self.events if event.type == event_type]

    def first(self, event_type: str, *, turn_id: str | None = None) -> TimelineEvent | None:
        return next((event for event in self.events if event.type == event_type
                     and (turn_id is None or event.turn_id == turn_id)), None)

    @property
    def end_ns(self) -> int:
        """The last offset any event or audio arrival reached."""
        ends = [event.offset_ns for event in self.events]
        ends += [last for turns in self.audio.values() for _, last in turns.values()]
        return max(ends, default=0)


def utc_ns(text: str) -> int:
    """``2026-12-04T17:43:46.619289Z`` as nanoseconds since the epoch (microsecond precision,
    as the bundle writes it)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    whole = int(moment.replace(microsecond=0).timestamp())
    return whole * 1_000_000_000 + moment.microsecond * 1_000


def read_timeline(trial_dir: str | Path) -> Timeline | None:
    """The trial's timeline, or None when its folder holds no readable voice events (a trial
    that crashed before its recording was written, a bundle kept elsewhere)."""
    path = Path(trial_dir) / VOICE_EVENTS
    try:
        data = read_member(path)
    except (FileNotFoundError, BundleMemberError):
        return None
    audio: dict[str, dict[str, tuple[int, int]]] = {"user": {}, "product": {}}
    timeline: Timeline | None = None
    events: list[TimelineEvent] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if _AUDIO_MARK in line:
            _audio_arrival(line, audio)
            continue
        if not line.strip():
            continue
        try:
            record = decode_json(line, source=path, line=number)
        except BundleMemberError:
            break  # a line cut short (or worse): the spans of what came before it
        if not isinstance(record, dict):
            continue
        event = _event(record)
        if event is None:
            continue
        if timeline is None:
            timeline = _started(record, event)
            if timeline is None:
                return None
        events.append(event)
    return None if timeline is None else _finished(timeline, events, audio)


def _audio_arrival(line: bytes, audio: dict[str, dict[str, tuple[int, int]]]) -> None:
    direction = "product" if _PRODUCT_AUDIO in line else "user" if _USER_AUDIO in line else None
    turn, offset = _TURN.search(line), _OFFSET.search(line)
    if direction is None or turn is None or offset is None:
        return
    turns = audio[direction]
    key, at = turn.group(1).decode("utf-8", "replace"), int(offset.group(1))
    first, last = turns.get(key, (at, at))
    turns[key] = (min(first, at), max(last, at))


def _event(record: dict[str, JsonValue]) -> TimelineEvent | None:
    event_type, offset = record.get("event_type"), record.get("monotonic_offset_ns")
    if not isinstance(event_type, str) or not isinstance(offset, int) or isinstance(offset, bool):
        return None
    turn = record.get("turn_id")
    attributes = record.get("attributes")
    return TimelineEvent(event_type, offset, turn if isinstance(turn, str) else None,
                         attributes if isinstance(attributes, dict) else {})


def _started(record: dict[str, JsonValue], event: TimelineEvent) -> Timeline | None:
    """The timeline from its first event: the clock's zero in UTC, the root span."""
    stamp = record.get("timestamp_utc")
    if not isinstance(stamp, str):
        return None
    try:
        start = utc_ns(stamp) - event.offset_ns
    except (ValueError, OverflowError):
        return None
    trace = record.get("trace")
    span = trace.get("span_id") if isinstance(trace, dict) else None
    return Timeline(start_utc_ns=start, root_span_id=span if isinstance(span, str) else None)


def _finished(timeline: Timeline, events: list[TimelineEvent],
              audio: dict[str, dict[str, tuple[int, int]]]) -> Timeline:
    timeline.events = events
    timeline.audio = audio
    return timeline
