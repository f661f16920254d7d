"""Text events on the data channel: pipecat's RTVI messages -> normalized events.

An RTVI message is a JSON object ``{"label": "rtvi-ai", "type": ..., "data": {...}}``
(pipecat's ``processors/frameworks/rtvi``). Mapped:

* ``bot-transcription`` -> ``transcript_final`` (the bot's words, ``data.text``);
* ``user-transcription`` with ``data.final`` true -> ``input_transcript`` (what the bot heard);
* pipecat's own ``{"type": "signalling", "message": {"type": "renegotiate"}}`` (the bot asks
  the client to offer again) -> ``error{renegotiation_refused}``: voicelab does not renegotiate
  a call in progress, and a call whose media the product wants changed cannot be measured as
  offered, so the call ends (exit 4) naming it;
* everything else (speaking states, ``bot-ready``, ``server-message``, interim transcriptions,
  messages that are not RTVI or not JSON) -> ``raw``, its RTVI type in ``data.rtvi``.

Pure: text in, events out, never an exception. The adapter bounds each message's size and
their rate before this sees them.
"""

from __future__ import annotations

import json
import uuid

from pydantic import JsonValue

from .._protocol import EndpointEvent

RTVI_LABEL = "rtvi-ai"
RTVI_VERSION = "1.0.0"


def client_ready() -> str:
    """The message an RTVI client sends once its transport is up (pipecat bots wait for it)."""
    return json.dumps({"label": RTVI_LABEL, "type": "client-ready", "id": uuid.uuid4().hex[:8],
                       "data": {"version": RTVI_VERSION,
                                "about": {"library": "voicelab", "platform": "python"}}})


def decode_message(received_ns: int, message: str | bytes) -> list[EndpointEvent]:
    """The events of one data-channel message."""
    try:
        parsed: JsonValue = json.loads(message)
    except ValueError:
        kept = message if isinstance(message, str) else f"<{len(message)} bytes>"
        return [EndpointEvent("raw", received_ns, raw=kept, data={"rtvi": None})]
    if isinstance(parsed, dict) and _renegotiation(parsed):
        message = ("the product asked to renegotiate the call (pipecat's signalling "
                   "'renegotiate'); voicelab does not renegotiate a call in progress")
        return [EndpointEvent("error", received_ns, text=message, raw=parsed, data={
            "code": "renegotiation_refused", "message": message, "origin": "adapter"})]
    if not isinstance(parsed, dict) or parsed.get("label") != RTVI_LABEL:
        return [EndpointEvent("raw", received_ns, raw=parsed, data={"rtvi": None})]
    kind = parsed.get("type")
    data = parsed.get("data")
    fields = data if isinstance(data, dict) else {}
    text = fields.get("text")
    if kind == "bot-transcription" and isinstance(text, str):
        return [EndpointEvent("transcript_final", received_ns, text=text, raw=parsed)]
    if kind == "user-transcription" and isinstance(text, str) and fields.get("final") is True:
        return [EndpointEvent("input_transcript", received_ns, text=text, raw=parsed)]
    return [EndpointEvent("raw", received_ns, raw=parsed,
                          data={"rtvi": kind if isinstance(kind, str) else None})]


def _renegotiation(parsed: dict[str, JsonValue]) -> bool:
    if parsed.get("type") != "signalling":
        return False
    inner = parsed.get("message")
    kind = inner.get("type") if isinstance(inner, dict) else inner
    return kind == "renegotiate"
