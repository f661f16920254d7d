"""One client connection to the local realtime server: the reader that answers each client event
(``session.update``, the input audio buffer, conversation items, ``response.create`` and
``response.cancel``) and a task per response that streams tone speech or a function call, then
bills its usage. Its own module because it is the whole event protocol, which the server
(:mod:`._server`) starts once per connection and reaches only through :class:`SessionServer`,
what a session uses of it."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import math
from typing import Protocol

from pydantic import JsonValue
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ...audio import CANONICAL_FORMAT, tone_speech
from ._config import RealtimeConnectionRecord, RealtimeServerConfig, RealtimeUsageCounts
from ._shapes import JsonObject, RealtimeUsage, ServerEvent, ToolCall

MIN_COMMIT_BYTES = CANONICAL_FORMAT.bytes_for_ms(100)  # the service rejects shorter commits

_NAMES = {
    "ga": {"audio_delta": "response.output_audio.delta", "audio_done": "response.output_audio.done",
           "transcript_delta": "response.output_audio_transcript.delta",
           "transcript_done": "response.output_audio_transcript.done",
           "item_created": "conversation.item.added", "audio_part": "output_audio"},
    "beta": {"audio_delta": "response.audio.delta", "audio_done": "response.audio.done",
             "transcript_delta": "response.audio_transcript.delta",
             "transcript_done": "response.audio_transcript.done",
             "item_created": "conversation.item.created", "audio_part": "audio"},
}

#: The double's audio tokens per second (as OpenAI's Realtime API counts them).
AUDIO_IN_TOKENS_PER_SECOND = 10
AUDIO_OUT_TOKENS_PER_SECOND = 20


class SessionServer(Protocol):
    """What a session uses of the server it belongs to (:class:`._server.RealtimeServer`)."""

    config: RealtimeServerConfig
    usage: RealtimeUsageCounts

    def new_id(self, prefix: str) -> str: ...


def _error(code: str, message: str, *, error_type: str = "invalid_request_error",
           event_id: JsonValue = None) -> ServerEvent:
    return {"type": "error", "error": {"type": error_type, "code": code, "message": message,
                                       "param": None, "event_id": event_id}}


def _objects(value: JsonValue) -> list[JsonObject]:
    """The JSON objects in ``value`` when it is a list (a message's content parts, say)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _object(value: JsonValue) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one (a field left out or null)."""
    return value if isinstance(value, dict) else {}


def _requested_text(params: JsonObject) -> str | None:
    """Text a client asked to be spoken verbatim (pre-generated message or out-of-band input)."""
    message = params.get("pre_generated_assistant_message")
    if isinstance(message, dict):
        return " ".join(str(part.get("text", "")) for part in _objects(message.get("content")))
    if params.get("conversation") == "none" and isinstance(params.get("input"), list):
        texts = [str(part.get("text", "")) for item in _objects(params["input"])
                 for part in _objects(item.get("content")) if part.get("type") == "input_text"]
        return " ".join(texts) if texts else None
    return None


class _Session:
    """One client connection: a reader that handles client events, a task per response."""

    def __init__(self, server: SessionServer, ws: ServerConnection,
                 record: RealtimeConnectionRecord):
        self.server, self.ws, self.record = server, ws, record
        self.config = server.config
        self.names = _NAMES[self.config.spelling]
        self.buffer = bytearray()
        self.responses = 0
        self.lines_spoken = 0
        self.active: asyncio.Task[None] | None = None
        # the conversation the model reads for each response: its audio and text tokens so
        # far (read again from the cache) and what was added since the last response
        self.audio_read = self.text_read = 0
        self.audio_added = self.text_added = 0
        self.spoken_bytes = 0
        self.spoken_words = 0
        record.session = self._default_session(record.query.get("model")
                                               or record.query.get("deployment"))

    def _default_session(self, model: str | None) -> JsonObject:
        vad: JsonObject = {"type": "server_vad", "threshold": 0.5, "silence_duration_ms": 500}
        session: JsonObject = {"id": self.server.new_id("sess"), "object": "realtime.session",
                                   "model": model, "instructions": ""}
        if self.config.spelling == "ga":
            pcm: JsonObject = {"type": "audio/pcm", "rate": 24000}
            session.update(type="realtime", output_modalities=["audio"], audio={
                "input": {"format": pcm, "turn_detection": vad},
                "output": {"format": pcm, "voice": "alloy"}})
        else:
            session.update(modalities=["text", "audio"], voice="alloy", turn_detection=vad,
                           input_audio_format="pcm16", output_audio_format="pcm16")
        return session

    async def send(self, event: ServerEvent) -> None:
        event.setdefault("event_id", self.server.new_id("event"))
        await self.ws.send(json.dumps(event))

    async def run(self) -> None:
        try:
            await self.send({"type": "session.created", "session": dict(self.record.session)})
            if self.config.hostile == "event_storm":
                self.active = asyncio.create_task(self._storm())
            async for frame in self.ws:
                await self._handle(frame)
        except ConnectionClosed:
            pass
        finally:
            if self.active is not None and not self.active.done():
                self.active.cancel()

    async def _storm(self) -> None:
        number = 0
        while True:
            number += 1
            await self.ws.send(json.dumps({"type": "telemetry.unknown", "n": number,
                                           "filler": "x" * 1000}))

    def _remember(self, event: JsonObject) -> None:
        kept = dict(event)
        audio = kept.get("audio")
        if isinstance(audio, str):
            kept["audio"] = {"byte_count": len(base64.b64decode(audio))}
        self.record.client_events.append(kept)

    async def _handle(self, frame: str | bytes) -> None:
        try:
            event: JsonValue = json.loads(frame)
        except ValueError:
            await self.send(_error("invalid_json", "The message is not valid JSON."))
            return
        if not isinstance(event, dict):
            await self.send(_error("invalid_event", "The event must be a JSON object."))
            return
        self._remember(event)
        kind, event_id = event.get("type"), event.get("event_id")
        if kind == "session.update":
            _merge(self.record.session, _object(event.get("session")))
            self.text_added += len(str(self.record.session.get("instructions") or "").split())
            if not self.config.ignore_session_update:
                await self.send({"type": "session.updated", "session": dict(self.record.session)})
        elif kind == "input_audio_buffer.append":
            try:
                self.buffer.extend(base64.b64decode(_text(event.get("audio")), validate=True))
            except (binascii.Error, ValueError):
                await self.send(_error("invalid_value", "audio is not valid base64",
                                       event_id=event_id))
        elif kind == "input_audio_buffer.commit":
            await self._commit(event_id)
        elif kind == "input_audio_buffer.clear":
            self.buffer.clear()
            await self.send({"type": "input_audio_buffer.cleared"})
        elif kind == "conversation.item.create":
            item = dict(_object(event.get("item")))
            self.text_added += sum(len(str(part.get("text", "")).split())
                                   for part in _objects(item.get("content")))
            item.setdefault("id", self.server.new_id("item"))
            await self.send({"type": self.names["item_created"], "previous_item_id": None,
                             "item": item})
        elif kind == "response.create":
            await self._response_create(_object(event.get("response")), event_id)
        elif kind == "response.cancel":
            if self.active is None or self.active.done():
                await self.send(_error("response_cancel_not_active",
                                       "Cancellation failed: no active response found",
                                       event_id=event_id))
            else:
                self.active.cancel()
                await asyncio.gather(self.active, return_exceptions=True)
        else:
            await self.send(_error("invalid_value", f"Invalid value: {kind!r}", event_id=event_id))

    async def _commit(self, event_id: JsonValue) -> None:
        if len(self.buffer) < MIN_COMMIT_BYTES:
            duration_ms = CANONICAL_FORMAT.seconds_for_bytes(len(self.buffer)) * 1000
            await self.send(_error(
                "input_audio_buffer_commit_empty",
                f"Error committing input audio buffer: buffer too small. Expected at least "
                f"100ms of audio, but buffer only has {duration_ms:.2f}ms of audio.",
                event_id=event_id))
            return
        item_id = self.server.new_id("item")
        self.record.committed_audio.append(bytes(self.buffer))
        self.audio_added += math.ceil(CANONICAL_FORMAT.seconds_for_bytes(len(self.buffer))
                                      * AUDIO_IN_TOKENS_PER_SECOND)
        self.buffer.clear()
        await self.send({"type": "input_audio_buffer.committed", "previous_item_id": None,
                         "item_id": item_id})
        await self.send({"type": self.names["item_created"], "previous_item_id": None, "item": {
            "id": item_id, "type": "message", "role": "user", "status": "completed",
            "content": [{"type": "input_audio", "transcript": None}]}})
        if self.config.input_transcript is not None:
            await self.send({"type": "conversation.item.input_audio_transcription.completed",
                             "item_id": item_id, "content_index": 0,
                             "transcript": self.config.input_transcript})

    async def _response_create(self, params: JsonObject, event_id: JsonValue) -> None:
        if self.active is not None and not self.active.done():
            await self.send(_error("conversation_already_has_active_response",
                                   "Conversation already has an active response",
                                   event_id=event_id))
            return
        self.responses += 1
        number, config = self.responses, self.config
        if config.error_on_response == number:
            await self.send(_error("server_error", "The server had an error while processing "
                                   "your request.", error_type="server_error", event_id=event_id))
            return
        if config.silent_from_response is not None and number >= config.silent_from_response:
            return
        self.active = asyncio.create_task(self._respond(number, params))

    def _plan(self, number: int, params: JsonObject) -> tuple[str | None, ToolCall | None]:
        """(text to speak, function call) for response ``number``."""
        requested = _requested_text(params)
        if requested is not None:
            return (self.config.speak_instead if self.config.speak_instead is not None
                    else requested), None
        if number in self.config.tool_calls:
            return None, self.config.tool_calls[number]
        lines = self.config.lines or [""]
        index = min(self.lines_spoken, len(lines) - 1)
        self.lines_spoken += 1
        call: ToolCall | None = None
        if self.config.end_call_on_last_line and index == len(lines) - 1:
            call = {"name": self.config.end_function, "arguments": {"reason": "goals met"}}
        return lines[index], call

    async def _respond(self, number: int, params: JsonObject) -> None:
        response_id = self.server.new_id("resp")
        output: list[ServerEvent] = []
        status, details = "completed", None
        with contextlib.suppress(ConnectionClosed):
            await self.send({"type": "response.created", "response": {
                "object": "realtime.response", "id": response_id, "status": "in_progress",
                "output": []}})
            text, call = self._plan(number, params)
            try:
                if text:
                    await self._speak(response_id, text, output)
                if call is not None:
                    await self._function_call(response_id, call, output)
            except asyncio.CancelledError:
                status, details = "cancelled", {"type": "cancelled", "reason": "client_cancelled"}
            response: ServerEvent = {
                "object": "realtime.response", "id": response_id, "status": status,
                "status_details": details, "output": output}
            usage = self._bill()
            if self.config.report_usage:
                response["usage"] = usage
            await self.send({"type": "response.done", "response": response})

    def _bill(self) -> RealtimeUsage:
        """The response's usage: the conversation read (what earlier responses read comes
        from the cache), the audio and words it spoke; counted by the server too."""
        text_in = self.text_read + self.text_added
        audio_in = self.audio_read + self.audio_added
        text_out = self.spoken_words
        audio_out = math.ceil(CANONICAL_FORMAT.seconds_for_bytes(self.spoken_bytes)
                              * AUDIO_OUT_TOKENS_PER_SECOND)
        usage: RealtimeUsage = {"total_tokens": text_in + audio_in + text_out + audio_out,
                 "input_tokens": text_in + audio_in, "output_tokens": text_out + audio_out,
                 "input_token_details": {
                     "text_tokens": text_in, "audio_tokens": audio_in,
                     "cached_tokens": self.text_read + self.audio_read,
                     "cached_tokens_details": {"text_tokens": self.text_read,
                                               "audio_tokens": self.audio_read}},
                 "output_token_details": {"text_tokens": text_out, "audio_tokens": audio_out}}
        self.server.usage.add(usage)
        # what was read and said is the conversation the next response reads
        self.text_read, self.audio_read = text_in + text_out, audio_in + audio_out
        self.text_added = self.audio_added = self.spoken_bytes = self.spoken_words = 0
        return usage

    async def _speak(self, response_id: str, text: str, output: list[ServerEvent]) -> None:
        item_id = self.server.new_id("item")
        index = len(output)
        item: ServerEvent = {"id": item_id, "type": "message", "role": "assistant",
                                "status": "in_progress",
                "content": []}
        output.append(item)
        where = {"response_id": response_id, "item_id": item_id, "output_index": index,
                 "content_index": 0}
        await self.send({"type": "response.output_item.added", "response_id": response_id,
                         "output_index": index, "item": dict(item)})
        pcm = tone_speech(text, seed=self.config.seed).to_bytes()
        step = CANONICAL_FORMAT.bytes_for_ms(self.config.chunk_ms)
        spoken_words: list[str] = []
        words = text.split()
        chunks = [pcm[i:i + step] for i in range(0, len(pcm), step)]
        try:
            for position, chunk in enumerate(chunks):
                share = round(len(words) * (position + 1) / len(chunks))
                if share > len(spoken_words):
                    delta = " ".join(words[len(spoken_words):share])
                    spoken_words = words[:share]
                    await self.send({"type": self.names["transcript_delta"], **where,
                                     "delta": delta + " "})
                await self.send({"type": self.names["audio_delta"], **where,
                                 "delta": base64.b64encode(chunk).decode("ascii")})
                self.spoken_bytes += len(chunk)
                if self.config.drop_on_response == self.responses:
                    self.ws.transport.abort()  # no close frame: the client sees 1006
                    return
                await asyncio.sleep(self.config.delta_delay_seconds)
        finally:
            # Also on cancel: the transcript covers what was spoken, as the service reports.
            transcript = " ".join(spoken_words)
            self.spoken_words += len(spoken_words)
            item["status"] = "completed" if transcript == text.strip() else "incomplete"
            item["content"] = [{"type": self.names["audio_part"], "transcript": transcript}]
            with contextlib.suppress(ConnectionClosed):
                await self.send({"type": self.names["audio_done"], **where})
                await self.send({"type": self.names["transcript_done"], **where,
                                 "transcript": transcript})
                await self.send({"type": "response.output_item.done", "response_id": response_id,
                                 "output_index": index, "item": dict(item)})

    async def _function_call(self, response_id: str, call: ToolCall,
                             output: list[ServerEvent]) -> None:
        item_id, call_id = self.server.new_id("item"), self.server.new_id("call")
        arguments = json.dumps(call.get("arguments") or {})
        index = len(output)
        item: ServerEvent = {"id": item_id, "type": "function_call", "status": "in_progress",
                "name": call["name"], "call_id": call_id, "arguments": ""}
        output.append(item)
        await self.send({"type": "response.output_item.added", "response_id": response_id,
                         "output_index": index, "item": dict(item)})
        done: ServerEvent = {"type": "response.function_call_arguments.done", "response_id": response_id,
                "item_id": item_id, "output_index": index, "call_id": call_id,
                "arguments": arguments}
        if self.config.spelling == "ga":  # the beta event does not name the function
            done["name"] = call["name"]
        await self.send(done)
        item.update(status="completed", arguments=arguments)
        await self.send({"type": "response.output_item.done", "response_id": response_id,
                         "output_index": index, "item": dict(item)})


def _text(value: JsonValue) -> str:
    """A string field (the empty string when it was left out, null or empty)."""
    if not value:
        return ""
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def _merge(base: JsonObject, overlay: JsonObject) -> None:
    for key, value in overlay.items():
        below = base.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            _merge(below, value)
        else:
            base[key] = value
