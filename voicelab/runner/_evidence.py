"""Turning what a conversation recorded into the bundle's evidence documents (after the call)."""

from __future__ import annotations

from typing import Any

from ..artifacts import (
    SCHEMA_VERSION,
    ToolCallRecord,
    ToolCalls,
    Transcript,
    TranscriptTurn,
)
from ..audio import PcmAudio
from ._conversation import Conversation

#: Raw JSON audio payload fields are replaced by a size note: the audio itself is in product.wav.
_AUDIO_FIELDS = ("delta", "audio")


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def build_transcript(conversation: Conversation, session_id: str) -> Transcript:
    intake = conversation.intake
    start_ns = conversation.timeline.start_ns
    entries: list[tuple[int, TranscriptTurn]] = []
    for user in conversation.user_turns:
        heard = intake.input_transcripts.get(user.turn_id)
        entries.append((user.started_offset_ns, TranscriptTurn(
            turn_id=user.turn_id, index=0, role="user", text=user.text, source=user.source,
            started_offset_ms=_ms(user.started_offset_ns),
            ended_offset_ms=_ms(user.committed_offset_ns),
            heard_as=" ".join(heard) if heard else None)))
    for response in intake.responses:
        first = response.chunks[0][0] - start_ns if response.chunks else response.opened_ns - start_ns
        ended = response.completed_ns - start_ns if response.completed_ns is not None else None
        entries.append((first, TranscriptTurn(
            turn_id=response.turn_id, index=0, role="assistant", text=response.transcript,
            source="product", status=response.status or "incomplete",
            interrupted=response.barged_in, started_offset_ms=_ms(first),
            ended_offset_ms=_ms(ended))))
    entries.sort(key=lambda item: item[0])
    turns = []
    for index, (_, turn) in enumerate(entries):
        turn.index = index
        turns.append(turn)
    return Transcript(session_id=session_id, turns=turns)


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
        suffix = f" _({', '.join(notes)})_" if notes else ""
        lines.append(f"- `{when}` {speaker} [{turn.turn_id}]: {turn.text or '_(no transcript)_'}"
                     f"{suffix}")
        if turn.heard_as is not None:
            lines.append(f"  - heard by the product as: {turn.heard_as}")
    return "\n".join(lines) + "\n"


def build_tool_calls(conversation: Conversation) -> ToolCalls:
    intake = conversation.intake
    results = {r.get("call_id"): r for r in intake.tool_results if r.get("call_id") is not None}
    records = []
    for call in intake.tool_calls:
        result = results.get(call.get("call_id"))
        records.append(ToolCallRecord(
            call_id=call.get("call_id"), name=str(call.get("name") or "unknown"),
            arguments=call.get("arguments"), arguments_json=call.get("arguments_json"),
            result=result.get("output") if result else None, has_result=result is not None,
            turn_id=call.get("turn_id"), offset_ms=_ms(call.get("offset_ns")),
            result_offset_ms=_ms(result.get("offset_ns")) if result else None))
    matched = {c.get("call_id") for c in intake.tool_calls}
    for call_id, result in results.items():
        if call_id not in matched:
            records.append(ToolCallRecord(call_id=call_id, name="(unmatched result)",
                                          result=result.get("output"), has_result=True,
                                          turn_id=result.get("turn_id"),
                                          result_offset_ms=_ms(result.get("offset_ns"))))
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


_SCALARS = (bool, int, float, type(None))


def _has_text(value: Any) -> bool:
    """Whether ``value`` holds text or bytes anywhere (what eliding and scrubbing act on)."""
    if isinstance(value, _SCALARS):
        return False
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _AUDIO_FIELDS or not isinstance(item, _SCALARS) and _has_text(item):
                return True
        return False
    if isinstance(value, list | tuple):
        return any(_has_text(v) for v in value)
    return True  # str, bytes and anything unknown


def build_raw_events(conversation: Conversation, adapter: str) -> dict[str, Any]:
    """raw-endpoint-events.json (schema: :class:`RawEndpointEvents`), as plain data."""
    scrub = conversation.scrubber.scrub if conversation.scrubber is not None else (lambda x: x)
    events = []
    seen: set[int] = set()
    for sequence, offset, kind, raw in conversation.intake.raw_events:
        # one product message may yield several normalized events sharing its raw object
        if raw is not None and not isinstance(raw, str | bytes | int | float | bool):
            if id(raw) in seen:
                continue
            seen.add(id(raw))
        if _has_text(raw):  # a binary-frame summary holds no text to elide or scrub
            raw = scrub(_elide_audio(raw))
        events.append({"sequence": sequence, "received_offset_ns": offset, "type": kind,
                       "raw": raw})
    return {"schema_version": SCHEMA_VERSION, "adapter": adapter, "events": events}


def response_audio(conversation: Conversation) -> dict[str, PcmAudio]:
    audio = {}
    for response in conversation.intake.responses:
        data = b"".join(c[2] for c in response.chunks)
        audio[response.turn_id] = PcmAudio.from_bytes(data[: len(data) - len(data) % 2])
    return audio
