"""A local server on 127.0.0.1 speaking the OpenAI Realtime / Azure Voice Live event protocol.

It stands in for the cloud service in tests and demos, over a real WebSocket: auth is checked at
the handshake (``api-key`` header or query parameter, or ``Authorization: Bearer``),
``session.update`` is answered with ``session.updated``, user audio is buffered from
``input_audio_buffer.append`` and committed (an empty commit is an ``error`` as on the real
service), and each ``response.create`` streams tone speech (:func:`voicelab.audio.tone_speech`)
as base64 pcm16 24 kHz deltas with its transcript, optionally a function call, then
``response.done``. ``response.cancel`` stops the audio promptly (status ``cancelled``).

What the "model" says comes from :class:`RealtimeServerConfig`: scripted ``lines`` (a product
reply or a simulated user's line per response), ``tool_calls`` by response number, and an
``end_conversation`` call on the last line for the persona role. A ``response.create`` carrying
Voice Live's ``pre_generated_assistant_message``, or an out-of-band response whose input is a
text, speaks that text (as exact-text synthesis does). Faults: a rejected handshake, an
``error`` on response N, a connection dropped mid-response, silence. Every client event is
recorded (audio as byte counts) for assertions. Both GA and beta spellings are selectable.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import JsonValue
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from ...audio import CANONICAL_FORMAT, tone_speech
from ._shapes import JsonObject, RealtimeUsage, ServerEvent, ToolCall

logger = logging.getLogger(__name__)

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


@dataclass
class RealtimeServerConfig:
    """Behaviour of the local realtime server (one instance per test)."""

    spelling: Literal["ga", "beta"] = "ga"
    api_key: str | None = None
    lines: list[str] = field(default_factory=lambda: ["Hello, how can I help you today?"])
    tool_calls: dict[int, ToolCall] = field(default_factory=dict)  # response no. -> call
    end_call_on_last_line: bool = False
    end_function: str = "end_conversation"
    input_transcript: str | None = None
    seed: int = 0
    chunk_ms: float = 100.0
    delta_delay_seconds: float = 0.0
    speak_instead: str | None = None
    reject_status: int | None = None
    error_on_response: int | None = None
    drop_on_response: int | None = None
    silent_from_response: int | None = None
    ignore_session_update: bool = False
    #: a hostile service: ``event_storm`` sends events of an unknown type as fast as the
    #: socket takes them once the session is created (not recorded)
    hostile: Literal["event_storm"] | None = None
    #: ``response.done`` carries ``usage`` (False: it is left out, as a service may)
    report_usage: bool = True


#: The double's audio tokens per second (as OpenAI's Realtime API counts them).
AUDIO_IN_TOKENS_PER_SECOND = 10
AUDIO_OUT_TOKENS_PER_SECOND = 20


@dataclass
class RealtimeUsageCounts:
    """What the server billed over every session: each ``response.done``'s usage summed."""

    responses: int = 0
    text_in: int = 0
    cached_text_in: int = 0
    audio_in: int = 0
    cached_audio_in: int = 0
    text_out: int = 0
    audio_out: int = 0

    def add(self, usage: RealtimeUsage) -> None:
        inputs, outputs = usage["input_token_details"], usage["output_token_details"]
        cached = inputs["cached_tokens_details"]
        self.responses += 1
        self.text_in += inputs["text_tokens"]
        self.cached_text_in += cached["text_tokens"]
        self.audio_in += inputs["audio_tokens"]
        self.cached_audio_in += cached["audio_tokens"]
        self.text_out += outputs["text_tokens"]
        self.audio_out += outputs["audio_tokens"]


@dataclass
class RealtimeConnectionRecord:
    """What one client connection did, for assertions."""

    path: str
    query: dict[str, str]
    auth: str | None
    client_events: list[JsonObject] = field(default_factory=list)
    committed_audio: list[bytes] = field(default_factory=list)
    session: JsonObject = field(default_factory=dict)

    def events_of(self, event_type: str) -> list[JsonObject]:
        return [event for event in self.client_events if event.get("type") == event_type]


class RealtimeServer:
    """``async with RealtimeServer(config) as server:`` then connect to ``server.url``."""

    def __init__(self, config: RealtimeServerConfig | None = None, *, host: str = "127.0.0.1"):
        self.config = config or RealtimeServerConfig()
        self.host = host
        self.port: int | None = None
        self.connections: list[RealtimeConnectionRecord] = []
        #: the usage every response reported (or would have, without ``report_usage``)
        self.usage = RealtimeUsageCounts()
        self._server: Server | None = None
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:<port>`` (any path is accepted)."""
        if self.port is None:
            raise RuntimeError("the realtime server is not started")
        return f"ws://{self.host}:{self.port}"

    @property
    def http_endpoint(self) -> str:
        """The same address as an ``http://`` resource endpoint (what Azure configs name)."""
        return self.url.replace("ws://", "http://", 1)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}"

    def events_of(self, event_type: str) -> list[JsonObject]:
        return [e for record in self.connections for e in record.events_of(event_type)]

    async def start(self) -> RealtimeServer:
        self._server = await serve(self._handle, self.host, 0, compression=None,
                                   max_size=16 * 1024 * 1024, process_request=self._authorize)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 3.0)

    async def __aenter__(self) -> RealtimeServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        if self.config.reject_status is not None:
            return connection.respond(self.config.reject_status, "rejected by configuration\n")
        key = self.config.api_key
        if key and _auth_scheme(request, key) is None:
            return connection.respond(401, "invalid or missing api key\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        request = ws.request
        assert request is not None
        parts = urlsplit(request.path)
        record = RealtimeConnectionRecord(
            path=parts.path, query=dict(parse_qsl(parts.query)), auth=_presented_auth(request))
        self.connections.append(record)
        await _Session(self, ws, record).run()


def _presented_auth(request: Request) -> str | None:
    """How the client authenticated: ``api-key`` (header), ``bearer``, ``query`` or ``None``."""
    if request.headers.get("api-key"):
        return "api-key"
    if (request.headers.get("Authorization") or "").startswith("Bearer "):
        return "bearer"
    return "query" if "api-key" in dict(parse_qsl(urlsplit(request.path).query)) else None


def _auth_scheme(request: Request, key: str | None) -> str | None:
    if request.headers.get("api-key") == key:
        return "api-key"
    if request.headers.get("Authorization") == f"Bearer {key}":
        return "bearer"
    if dict(parse_qsl(urlsplit(request.path).query)).get("api-key") == key:
        return "query"
    return None


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

    def __init__(self, server: RealtimeServer, ws: ServerConnection,
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
