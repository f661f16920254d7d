"""The conversation documents of a bundle, as pure functions of a recording: the transcript,
the tool calls and the raw endpoint events."""

from __future__ import annotations

from typing import Any

from ..artifacts._models import (
    SCHEMA_VERSION,
    ToolCallRecord,
    ToolCalls,
    Transcript,
    TranscriptTurn,
)
from ._events import ENDPOINT_KINDS, Event, EventType
from ._recording import Recording

#: A transcript's ``text_source`` when the product's own transcript (from its wire) gave it.
WIRE = "wire"
#: Raw JSON audio payload fields are replaced by a size note: the audio itself is in the streams.
_AUDIO_FIELDS = ("delta", "audio", "payload")


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def build_transcript(recording: Recording) -> Transcript:
    """User turns (what the persona said, what the product heard) and product responses, in the
    order they started."""
    users: dict[str, dict[str, Any]] = {}
    heard: dict[str, list[str]] = {}
    responses: dict[str, dict[str, Any]] = {}
    for event in recording.events:
        kind, turn = event.type, event.turn_id
        if turn is None:
            continue
        if kind is EventType.USER_TURN_STARTED:
            users[turn] = {"text": event.attributes.get("text", ""),
                           "source": event.attributes.get("source_kind", "script"),
                           "started": event.offset_ns, "ended": None}
        elif kind is EventType.USER_TURN_COMMITTED and turn in users:
            users[turn]["ended"] = event.offset_ns
        elif kind is EventType.PRODUCT_INPUT_TRANSCRIPT:
            heard.setdefault(turn, []).append(str(event.attributes.get("text") or ""))
        elif event.source == "product" and event.speaker_role == "assistant":
            response = responses.setdefault(turn, {"opened": event.offset_ns, "first": None,
                                                   "text": [], "status": None, "done": None})
            if kind is EventType.PRODUCT_AUDIO and response["first"] is None:
                response["first"] = event.offset_ns
            elif kind is EventType.PRODUCT_TRANSCRIPT:
                response["text"].append(str(event.attributes.get("text") or ""))
            elif kind is EventType.PRODUCT_RESPONSE_DONE and response["done"] is None:
                response["status"] = str(event.attributes.get("status", "completed"))
                response["done"] = event.offset_ns
        elif kind is EventType.USER_BARGE_IN:
            target = event.attributes.get("response_turn_id")
            if target in responses:
                responses[target]["interrupted"] = True
    entries: list[tuple[int, TranscriptTurn]] = []
    for turn, user in users.items():
        parts = heard.get(turn)
        entries.append((user["started"], TranscriptTurn(
            turn_id=turn, index=0, role="user", text=user["text"], source=user["source"],
            started_offset_ms=_ms(user["started"]), ended_offset_ms=_ms(user["ended"]),
            heard_as=" ".join(parts) if parts else None)))
    for turn, response in responses.items():
        first = response["first"] if response["first"] is not None else response["opened"]
        text = " ".join(p for p in response["text"] if p).strip()
        entries.append((first, TranscriptTurn(
            turn_id=turn, index=0, role="assistant", text=text, source="product",
            text_source=WIRE if text else None,
            status=response["status"] or "incomplete",
            interrupted=bool(response.get("interrupted")), started_offset_ms=_ms(first),
            ended_offset_ms=_ms(response["done"]))))
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
    calls: list[Event] = []
    results: dict[Any, Event] = {}
    for event in recording.events:
        if event.type is EventType.PRODUCT_TOOL_CALL:
            calls.append(event)
        elif event.type is EventType.PRODUCT_TOOL_RESULT:
            call_id = event.attributes.get("call_id")
            if call_id is not None:
                results[call_id] = event
    records = []
    for call in calls:
        data = call.attributes
        result = results.get(data.get("call_id"))
        records.append(ToolCallRecord(
            call_id=data.get("call_id"), name=str(data.get("name") or "unknown"),
            arguments=data.get("arguments"), arguments_json=data.get("arguments_json"),
            result=result.attributes.get("output") if result else None,
            has_result=result is not None, turn_id=call.turn_id, offset_ms=_ms(call.offset_ns),
            result_offset_ms=_ms(result.offset_ns) if result else None))
    matched = {c.attributes.get("call_id") for c in calls}
    for call_id, result in results.items():
        if call_id not in matched:
            records.append(ToolCallRecord(call_id=call_id, name="(unmatched result)",
                                          result=result.attributes.get("output"), has_result=True,
                                          turn_id=result.turn_id,
                                          result_offset_ms=_ms(result.offset_ns)))
    return ToolCalls(tool_calls=records)


def _elide_audio(raw: Any) -> Any:
    if isinstance(raw, dict):
        cleaned = {}
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
