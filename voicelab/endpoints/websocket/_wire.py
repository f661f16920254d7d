"""Protocol v1 on the wire: the messages the evaluator sends and the decoder for product messages.

This module is pure (no sockets): bytes/JSON in, normalized :class:`EndpointEvent` objects out,
so the wire format is unit-testable and the WebSocket transport stays a thin shell around it.
See ``docs/protocol.md`` for the worked exchange.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ...audio import BYTES_PER_SAMPLE
from ...config import SecretScrubber
from .._fields import field_mapping, parse_arguments
from .._protocol import EndpointEvent

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1

# Evaluator -> product
INIT = "evaluator.init"
COMMIT = "input_audio_buffer.commit"
RESPONSE_CREATE = "response.create"
RESPONSE_CANCEL = "response.cancel"
CLIENT_MESSAGE_TYPES = (INIT, COMMIT, RESPONSE_CREATE, RESPONSE_CANCEL)
BINARY_AUDIO = "binary_audio"  # how a binary client frame is named in recorded message orders

# Product -> evaluator
AUDIO_DELTA = "response.output_audio.delta"
TRANSCRIPT_DONE = "response.output_audio_transcript.done"
INPUT_TRANSCRIPT = "conversation.item.input_audio_transcription.completed"
FUNCTION_CALL_DONE = "response.function_call_arguments.done"
TOOL_RESULT = "tool.result"
RESPONSE_DONE = "response.done"
CONVERSATION_COMPLETED = "conversation.completed"
ERROR = "error"

RAW_TEXT_LIMIT = 2000  # characters of an unparseable text message kept as its raw record


def init_message(request: Mapping[str, Any]) -> str:
    """``evaluator.init`` carrying the opaque run data exactly (non-JSON scalars become strings)."""
    return json.dumps({"type": INIT, "request": dict(request)}, default=str)


def control_message(message_type: str) -> str:
    return json.dumps({"type": message_type})


def client_message_name(message: str | bytes) -> str:
    """The name a recorded protocol order uses for one client message."""
    if isinstance(message, bytes | bytearray | memoryview):
        return BINARY_AUDIO
    try:
        parsed = json.loads(message)
    except ValueError:
        return "malformed_json"
    if isinstance(parsed, dict) and isinstance(parsed.get("type"), str):
        return parsed["type"]
    return "malformed_message"


def _error(received_ns: int, code: str, message: str, raw: Any, *,
           origin: str = "adapter") -> EndpointEvent:
    return EndpointEvent("error", received_ns, text=message,
                         data={"code": code, "message": message, "origin": origin}, raw=raw)


class WireV1Decoder:
    """Turns one product message (text or binary frame) into normalized events.

    ``raw`` is the parsed message scrubbed of every configured secret; base64 audio inside a
    JSON message is replaced by its byte count (the PCM itself travels in ``audio``). Several
    events decoded from one message share its raw record and receive time.
    """

    def __init__(self, scrubber: SecretScrubber):
        self._scrubber = scrubber

    def decode(self, received_ns: int, message: str | bytes) -> list[EndpointEvent]:
        if isinstance(message, bytes | bytearray | memoryview):
            return [self._binary_audio(received_ns, bytes(message))]
        try:
            parsed = json.loads(message)
        except ValueError as error:
            raw = {"malformed_text": self._scrubber.scrub_text(message[:RAW_TEXT_LIMIT])}
            return [_error(received_ns, "malformed_json",
                           f"product sent malformed JSON: {error}", raw)]
        if not isinstance(parsed, dict):
            raw = self._scrubber.scrub(parsed)
            return [_error(received_ns, "malformed_message",
                           f"product sent a JSON {type(parsed).__name__}, not an object", raw)]
        return self.decode_object(received_ns, parsed)

    def decode_object(self, received_ns: int, message: dict[str, Any]) -> list[EndpointEvent]:
        kind = message.get("type")
        if kind == AUDIO_DELTA:
            return [self._base64_audio(received_ns, message)]
        raw = self._scrubber.scrub(message)
        if kind == TRANSCRIPT_DONE:
            return [EndpointEvent("transcript_final", received_ns,
                                  text=_text(raw.get("transcript")), raw=raw)]
        if kind == INPUT_TRANSCRIPT:
            return [EndpointEvent("input_transcript", received_ns,
                                  text=_text(raw.get("transcript")), raw=raw)]
        if kind == FUNCTION_CALL_DONE:
            arguments, arguments_json = parse_arguments(raw.get("arguments"))
            data = {"call_id": raw.get("call_id"), "name": raw.get("name"), "arguments": arguments}
            if arguments_json is not None:
                data["arguments_json"] = arguments_json
            return [EndpointEvent("tool_call", received_ns, data=data, raw=raw)]
        if kind == TOOL_RESULT:
            data = {"call_id": raw.get("call_id"), "output": raw.get("output")}
            return [EndpointEvent("tool_result", received_ns, data=data, raw=raw)]
        if kind == RESPONSE_DONE:
            return self._response_done(received_ns, raw)
        if kind == CONVERSATION_COMPLETED:
            return [EndpointEvent("conversation_complete", received_ns, raw=raw)]
        if kind == ERROR:
            detail = field_mapping(raw, "error")
            code = str(detail.get("code") or "product_error")
            text = str(detail.get("message") or code)
            return [_error(received_ns, code, text, raw, origin="product")]
        logger.debug("unnormalized product message type %r kept as a raw event", raw.get("type"))
        return [EndpointEvent("raw", received_ns, raw=raw)]

    def _binary_audio(self, received_ns: int, frame: bytes) -> EndpointEvent:
        raw = binary_note(len(frame))
        if len(frame) % BYTES_PER_SAMPLE:
            return _error(received_ns, "invalid_audio",
                          f"product sent an odd-length audio frame ({len(frame)} bytes); "
                          f"pcm_s16le needs whole samples, frame dropped", raw)
        return EndpointEvent("audio_delta", received_ns, audio=frame, raw=raw)

    def _base64_audio(self, received_ns: int, message: dict[str, Any]) -> EndpointEvent:
        encoded = message.get("delta")
        rest = self._scrubber.scrub({k: v for k, v in message.items() if k != "delta"})
        try:
            audio = base64.b64decode(encoded or "", validate=True)
        except (binascii.Error, TypeError, ValueError):
            rest["delta"] = {"omitted": "base64 pcm", "invalid": True}
            return _error(received_ns, "invalid_audio",
                          "product sent an audio delta that is not valid base64; dropped", rest)
        rest["delta"] = {"omitted": "base64 pcm", "byte_count": len(audio)}
        if len(audio) % BYTES_PER_SAMPLE:
            return _error(received_ns, "invalid_audio",
                          f"product sent an odd-length audio delta ({len(audio)} bytes); "
                          f"pcm_s16le needs whole samples, delta dropped", rest)
        return EndpointEvent("audio_delta", received_ns, audio=audio, raw=rest)

    def _response_done(self, received_ns: int, raw: dict[str, Any]) -> list[EndpointEvent]:
        response = field_mapping(raw, "response")
        status = str(response.get("status") or "completed")
        data: dict[str, Any] = {"status": status}
        if response.get("id") is not None:
            data["response_id"] = response["id"]
        events = []
        if status == "cancelled":
            events.append(EndpointEvent("interruption", received_ns, data=dict(data), raw=raw))
        events.append(EndpointEvent("turn_complete", received_ns, data=data, raw=raw))
        return events


@lru_cache(maxsize=256)
def binary_note(byte_count: int) -> dict[str, Any]:
    """The raw record of a binary frame of ``byte_count`` bytes, shared by every frame of that
    size (hundreds a response: one dict to allocate, pickle and collect, not one each; nobody
    changes a raw record)."""
    return {"binary": True, "byte_count": byte_count}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))

