"""The conversation documents of a bundle, as pure functions of a recording: the transcript,
the tool calls and the raw endpoint events."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ..artifacts import SCHEMA_VERSION, ToolCallRecord, ToolCalls, Transcript, TranscriptTurn
from ._attributes import ToolCall, ToolResult, UserTurnStarted
from ._events import ENDPOINT_KINDS, Event, EventType
from ._recording import Recording
from ._responses import ProductTurns

#: A transcript's ``text_source`` when the product's own transcript (from its wire) gave it.
WIRE = "wire"
#: Raw JSON audio payload fields are replaced by a size note: the audio itself is in the streams.
_AUDIO_FIELDS = ("delta", "audio", "payload")


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


@dataclass
class _UserTurn:
    said: UserTurnStarted
    started_ns: int
    ended_ns: int | None = None


def build_transcript(recording: Recording) -> Transcript:
    """User turns (what the persona said, what the product heard) and product responses, in the
    order they started."""
    users: dict[str, _UserTurn] = {}
    responses = ProductTurns()
    for event in recording.events:
        kind, turn = event.type, event.turn_id
        if turn is None:
            continue
        if kind is EventType.USER_TURN_STARTED:
            users[turn] = _UserTurn(UserTurnStarted.of(event), event.offset_ns)
        elif kind is EventType.USER_TURN_COMMITTED and turn in users:
            users[turn].ended_ns = event.offset_ns
        responses.follow(event)
    entries: list[tuple[int, TranscriptTurn]] = []
    for turn, user in users.items():
        heard = responses.by_turn[turn].heard if turn in responses.by_turn else []
        entries.append((user.started_ns, TranscriptTurn(
            turn_id=turn, index=0, role="user", text=user.said.text or "",
            source=user.said.source_kind or "script", started_offset_ms=_ms(user.started_ns),
            ended_offset_ms=_ms(user.ended_ns), heard_as=" ".join(heard) if heard else None)))
    for response in responses.responses:
        first = response.first_audio_ns if response.first_audio_ns is not None \
            else response.opened_ns
        assert first is not None  # a response has events
        text = " ".join(p for p in response.transcript_parts if p).strip()
        entries.append((first, TranscriptTurn(
            turn_id=response.turn_id, index=0, role="assistant", text=text, source="product",
            text_source=WIRE if text else None, status=response.status or "incomplete",
            interrupted=response.barged_in_by is not None, started_offset_ms=_ms(first),
            ended_offset_ms=_ms(response.done_ns))))
    entries.sort(key=lambda item: item[0])
    turns = []
    for index, (_, turn_entry) in enumerate(entries):
        turn_entry.index = index
        turns.append(turn_entry)
    return Transcript(session_id=recording.session_id, turns=turns)


def transcript_markdown(transcript: Transcript, *, title: str) -> str:
    lines = [f"# {title}", "", f"Session `{transcript.session_id}`", ""]
    for turn in transcript.turns:
        speaker = "**User**" if turn.role == "user" else "**Assistant**"
        when = f"{turn.started_offset_ms / 1000:7.2f} s" if turn.started_offset_ms is not None \
            else "      ? "
        notes = []
        if turn.interrupted:
            notes.append("interrupted")
        if turn.status and turn.status not in ("completed",) and turn.role == "assistant":
            notes.append(turn.status)
        if turn.source and turn.role == "user" and turn.source != "script":
            notes.append(turn.source)
        if turn.role == "assistant" and turn.text_source not in (None, WIRE):
            notes.append(f"recognized from its audio: {turn.text_source}")
        suffix = f" _({', '.join(notes)})_" if notes else ""
        lines.append(f"- `{when}` {speaker} [{turn.turn_id}]: {turn.text or '_(no transcript)_'}"
                     f"{suffix}")
        if turn.heard_as is not None:
            lines.append(f"  - heard by the product as: {turn.heard_as}")
    return "\n".join(lines) + "\n"


def build_tool_calls(recording: Recording) -> ToolCalls:
    calls: list[tuple[Event, ToolCall]] = []
    results: dict[Hashable, tuple[Event, ToolResult]] = {}
    for event in recording.events:
        if event.type is EventType.PRODUCT_TOOL_CALL:
            calls.append((event, ToolCall.of(event)))
        elif event.type is EventType.PRODUCT_TOOL_RESULT:
            result = ToolResult.of(event)
            if result.call_id is not None:
                results[_key(result.call_id)] = (event, result)
    records = []
    for event, call in calls:
        found = results.get(_key(call.call_id))
        records.append(ToolCallRecord(
            call_id=call.call_id, name=str(call.name or "unknown"), arguments=call.arguments,
            arguments_json=call.arguments_json,
            result=found[1].output if found else None, has_result=found is not None,
            turn_id=event.turn_id, offset_ms=_ms(event.offset_ns),
            result_offset_ms=_ms(found[0].offset_ns) if found else None))
    matched = {_key(call.call_id) for _, call in calls}
    for key, (event, result) in results.items():
        if key not in matched:
            records.append(ToolCallRecord(call_id=result.call_id, name="(unmatched result)",
                                          result=result.output, has_result=True,
                                          turn_id=event.turn_id,
                                          result_offset_ms=_ms(event.offset_ns)))
    return ToolCalls(tool_calls=records)


def _key(call_id: object) -> Hashable:
    """A call id as a dictionary key (a product may send a list or an object as its id)."""
    return call_id if isinstance(call_id, Hashable) else repr(call_id)


def _elide_audio(raw: object) -> object:
    if isinstance(raw, dict):
        cleaned: dict[object, object] = {}
        for key, value in raw.items():
            if key in _AUDIO_FIELDS and isinstance(value, str) and len(value) > 64:
                cleaned[key] = f"<base64 audio elided: {len(value) * 3 // 4} bytes>"
            else:
                cleaned[key] = _elide_audio(value)
        return cleaned
    if isinstance(raw, list):
        return [_elide_audio(item) for item in raw]
    if isinstance(raw, bytes | bytearray):
        return {"binary": True, "byte_count": len(raw)}
    return raw


def build_raw_events(recording: Recording, adapter: str) -> dict[str, Any]:
    """raw-endpoint-events.json (schema: :class:`~voicelab.artifacts.RawEndpointEvents`) as
    plain data: every product message as received, once (a message that yields several
    normalized events is kept with the first). Adapters scrub secrets as they decode; audio
    payloads left in a message are elided here."""
    events = []
    seen: set[int] = set()
    for event in recording.events:
        if event.source != "product":
            continue
        kind = ENDPOINT_KINDS.get(event.type)
        if kind is None:
            continue
        raw = event.raw
        if type(raw) is dict and raw.get("binary") is True:
            pass  # a binary frame's note: one event per frame, the note shared by frames of a size
        elif raw is not None and not isinstance(raw, str | bytes | int | float | bool):
            if id(raw) in seen:
                continue
            seen.add(id(raw))
            raw = _elide_audio(raw)
        events.append({"sequence": event.sequence, "received_offset_ns": event.offset_ns,
                       "type": kind, "raw": raw})
    return {"schema_version": SCHEMA_VERSION, "adapter": adapter, "events": events}
