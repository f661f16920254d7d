"""What the Realtime service's events mean for the evaluator: each server event (GA or beta /
Voice Live spelling, see :mod:`.wire`) becomes normalized endpoint events, and drives
the bookkeeping of the session's responses: the response in progress and its usage, requests
created or rejected, an interruption reported once, tool calls answered with ``tool_outputs``
and the product's turn continued after them.

``_ServerEvents`` is the part of ``RealtimeEndpoint`` that does this; the state it reads is set
by ``RealtimeEndpoint.__init__``. It is its own module because it is the protocol's meaning,
where the endpoint keeps the connection, what is sent and the receive loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import JsonValue

from ...audio import CANONICAL_FORMAT
from ...config import SecretScrubber
from ...cost import realtime_usage
from .. import EndpointContext, EndpointEvent, field_mapping, parse_arguments
from .._fields import JsonObject
from . import wire
from ._settings import RealtimeSettings

logger = logging.getLogger(__name__)

CANCEL_NOT_ACTIVE = "response_cancel_not_active"


class _ServerEvents:
    """The decoding half of ``RealtimeEndpoint`` (and the response state it keeps)."""

    _settings: RealtimeSettings
    _context: EndpointContext
    _target: wire.RealtimeTarget
    _scrubber: SecretScrubber
    _state: str
    _pending_requests: int
    _active_response: str | None
    _interrupted: set[str]
    _continue_after: set[str]
    _tool_names: dict[str, str]
    _cancel_sent: bool
    _response_audio_bytes: int
    _response_text: list[str]

    if TYPE_CHECKING:
        async def _send_quietly(self, event: Mapping[str, object]) -> bool: ...

    def _raw(self, message: Mapping[str, JsonValue]) -> JsonObject:
        return self._scrubber.scrub(wire.elide_audio(message))

    def _error(self, received_ns: int, code: str, text: str, raw: JsonValue = None, *,
               origin: str = "adapter", **data: object) -> EndpointEvent:
        text = self._scrubber.scrub_text(text)
        return EndpointEvent("error", received_ns, text=text, raw=raw, data={
            "code": code, "message": text, "origin": origin, **data})

    async def _decode(self, received_ns: int, message: JsonObject) -> list[EndpointEvent]:
        kind = wire.kind_of(message)
        raw = self._raw(message)
        response_id = message.get("response_id")
        if kind == "audio_delta":
            try:
                audio = wire.decode_audio(message)
            except ValueError as error:
                return [self._error(received_ns, "invalid_audio",
                                    f"product sent an unusable audio delta: {error}", raw)]
            self._response_audio_bytes += len(audio)
            return [EndpointEvent("audio_delta", received_ns, audio=audio, raw=raw,
                                  data={"response_id": response_id})]
        if kind in ("transcript_done", "text_done"):
            text = raw.get("transcript") if kind == "transcript_done" else raw.get("text")
            self._response_text.append(_text(text))
            return [EndpointEvent("transcript_final", received_ns, text=_text(text), raw=raw,
                                  data={"response_id": response_id, "item_id": raw.get("item_id"),
                                        "modality": "audio" if kind == "transcript_done"
                                        else "text"})]
        if kind == "input_transcript":
            return [EndpointEvent("input_transcript", received_ns, text=_text(raw.get("transcript")),
                                  raw=raw, data={"item_id": raw.get("item_id")})]
        if kind == "function_call_done":
            return await self._tool_call(received_ns, raw)
        if kind == "output_item_added":
            item = field_mapping(raw, "item")
            if item.get("type") == "function_call" and item.get("call_id"):
                self._tool_names[str(item["call_id"])] = str(item.get("name") or "")
        elif kind == "response_created":
            response = field_mapping(raw, "response")
            self._active_response = str(response.get("id") or "response")
            self._pending_requests = max(0, self._pending_requests - 1)
            self._response_audio_bytes, self._response_text = 0, []
        elif kind == "response_done":
            return await self._response_done(received_ns, raw)
        elif kind == "audio_buffer_cleared":
            return self._interruption(received_ns, response_id or self._active_response, raw)
        elif kind == "error":
            return self._product_error(received_ns, raw)
        elif kind == "malformed":
            return [self._error(received_ns, "malformed_message",
                                f"product sent {raw.get('detail')}", raw)]
        else:
            logger.debug("realtime event %r kept as a raw event", message.get("type"))
        return [EndpointEvent("raw", received_ns, raw=raw)]

    async def _tool_call(self, received_ns: int, raw: JsonObject) -> list[EndpointEvent]:
        call_id = str(raw.get("call_id") or "")
        name = str(raw.get("name") or self._tool_names.get(call_id, ""))
        arguments, arguments_json = parse_arguments(raw.get("arguments"))
        data: dict[str, object] = {"call_id": call_id, "name": name, "arguments": arguments,
                                "response_id": raw.get("response_id")}
        if arguments_json is not None:
            data["arguments_json"] = arguments_json
        events = [EndpointEvent("tool_call", received_ns, data=data, raw=raw)]
        outputs = self._settings.tool_outputs
        if name in outputs and self._state == "open":
            output = outputs[name]
            if not await self._send_quietly(wire.function_call_output(call_id, output)):
                return events
            self._continue_after.add(str(raw.get("response_id") or self._active_response))
            # Stamped like its tool_call so the stream stays in arrival order; sent_ns is when
            # the output actually left.
            events.append(EndpointEvent("tool_result", received_ns, data={
                "call_id": call_id, "name": name, "output": self._scrubber.scrub(output),
                "origin": "evaluator", "sent_ns": self._context.clock_ns()}))
        return events

    def _interruption(self, received_ns: int, response_id: object,
                      raw: JsonObject) -> list[EndpointEvent]:
        key = str(response_id)
        if key in self._interrupted:
            return [EndpointEvent("raw", received_ns, raw=raw)]
        self._interrupted.add(key)
        return [EndpointEvent("interruption", received_ns, raw=raw,
                              data={"response_id": response_id})]

    async def _response_done(self, received_ns: int, raw: JsonObject) -> list[EndpointEvent]:
        response = field_mapping(raw, "response")
        response_id = response.get("id")
        status = str(response.get("status") or "completed")
        usage = response.get("usage")
        self._context.record_usage(realtime_usage(
            usage if isinstance(usage, Mapping) else None, component="product", provider=self._target.dialect,
            model=self._target.model, output_text=" ".join(self._response_text),
            output_audio_seconds=CANONICAL_FORMAT.seconds_for_bytes(self._response_audio_bytes),
            purpose=f"response {response_id}" if response_id else None))
        self._response_audio_bytes, self._response_text = 0, []
        key = str(response_id or self._active_response)
        self._active_response = None
        if key in self._continue_after and self._state == "open":
            # The evaluator answered this response's tool calls: the product's turn goes on.
            self._continue_after.discard(key)
            if status == "completed" and await self._send_quietly(wire.response_create()):
                self._pending_requests += 1
                return [EndpointEvent("raw", received_ns, raw=raw,
                                      data={"status": status, "continued_after_tools": True})]
        events: list[EndpointEvent] = []
        if status == "cancelled":
            events += [e for e in self._interruption(received_ns, response_id, raw)
                       if e.type == "interruption"]
        details = response.get("status_details")
        if status == "failed":
            error = details.get("error") if isinstance(details, dict) else None
            code, text = wire.error_detail({"error": error or {}})
            events.append(self._error(received_ns, code if error else "response_failed",
                                      f"product response failed: {text}", raw, origin="product"))
        data: dict[str, object] = {"status": status, "response_id": response_id}
        if details:
            data["status_details"] = details
        events.append(EndpointEvent("turn_complete", received_ns, data=data, raw=raw))
        return events

    def _product_error(self, received_ns: int, raw: JsonObject) -> list[EndpointEvent]:
        code, text = wire.error_detail(raw)
        if code == CANCEL_NOT_ACTIVE and self._cancel_sent:
            logger.debug("response.cancel arrived after the response ended; ignored")
            return [EndpointEvent("raw", received_ns, raw=raw)]
        if self._pending_requests and self._active_response is None:
            self._pending_requests -= 1  # the request this error answers will get no response
        detail = field_mapping(raw, "error")
        return [self._error(received_ns, code, text, raw, origin="product",
                            error_type=detail.get("type"), param=detail.get("param"))]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))
