"""The built-in HTTP adapter (``adapter: http``): one POST per user turn, non-streaming.

``send_audio`` buffers; ``commit_turn`` starts the POST in the background and returns. When the
reply arrives it is stamped with the trial clock and enqueued; ``events()`` decodes it into
normalized events, all carrying the reply's arrival time. Request and reply shapes are in
``docs/protocol.md``. A failed turn (status >= 400, bad JSON, timeout, refused connection)
becomes an ``error`` event followed by ``closed``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import httpx
from pydantic import Field, field_validator

from ...audio import BYTES_PER_SAMPLE, PcmAudio
from .._abilities import EndpointSettings
from .._fields import parse_arguments
from .._protocol import EndpointContext, EndpointError, EndpointEvent
from .._settings import (
    AdapterSettings,
    auth_headers,
    parse_settings,
    redacted_url,
    secret_values,
)

logger = logging.getLogger(__name__)

PROTOCOL = "voicelab.http.v1"
BODY_EXCERPT_CHARS = 300


class HttpSettings(AdapterSettings):
    url: Annotated[str, Field(min_length=1)]
    headers: dict[str, str] = Field(default_factory=dict)
    access_token: str | None = None
    timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    opening_request: bool = False
    #: a reply larger than this is refused as it streams in, before it is decoded (a product
    #: is hostile input too): the turn ends in ``error{resource_limit}``
    max_response_bytes: Annotated[int, Field(gt=0, le=1024 * 1024 * 1024)] = 64 * 1024 * 1024

    @field_validator("url")
    @classmethod
    def _http_scheme(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


@dataclass(frozen=True, slots=True)
class _Reply:
    turn_index: int
    status_code: int
    body: bytes


@dataclass(frozen=True, slots=True)
class _Failure:
    turn_index: int
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class _Closure:
    reason: str
    initiated_by: str


class HttpEndpoint:
    """POST ``{session_id, turn_index, data, audio}`` per turn; the JSON reply is the response."""

    capabilities = {
        "streaming_input": False,
        "streaming_output": False,
        "interruption": False,
        "tool_events": True,
        "input_transcripts": True,
        "output_transcripts": True,
    }
    #: ``endpoint.settings`` are parsed into this once, at ``validate``
    settings_model = HttpSettings

    def __init__(self, settings: Mapping[str, object] | HttpSettings, context: EndpointContext):
        self._settings = parse_settings(HttpSettings, settings)
        self._context = context
        self._scrubber = context.scrubber.with_values(
            secret_values(self._settings.headers, self._settings.access_token))
        self._queue: asyncio.Queue[tuple[int, _Reply | _Failure | _Closure]] = asyncio.Queue()
        self._client: httpx.AsyncClient | None = None
        self._buffer = bytearray()
        self._turn_index = 0
        self._last_post: asyncio.Task[None] | None = None
        self._posts: set[asyncio.Task[None]] = set()
        self._state = "new"  # new -> open -> closed
        self._closure_enqueued = False
        self._events_finished = False

    @classmethod
    def product_can_speak_first(cls, settings: EndpointSettings) -> bool:
        """Only with ``opening_request``: otherwise nothing is asked before the user's turn."""
        return parse_settings(HttpSettings, settings).opening_request

    def _where(self) -> str:
        return self._scrubber.scrub_text(redacted_url(self._settings.url))

    async def connect(self) -> None:
        """Create the client; with ``opening_request`` POST turn 0 (no audio) for a greeting."""
        if self._state != "new":
            raise EndpointError("connect() may be called once", code="already_connected")
        settings = self._settings
        headers = auth_headers(settings.headers, settings.access_token, self._context.traceparent)
        self._client = httpx.AsyncClient(headers=headers, timeout=settings.timeout_seconds)
        self._state = "open"
        if not settings.opening_request:
            return
        outcome = await self._post(0, b"")
        if isinstance(outcome[1], _Failure):
            failure = outcome[1]
            await self.close()
            raise EndpointError(failure.message, code=failure.code)
        if isinstance(outcome[1], _Reply) and outcome[1].status_code >= 400:
            status = outcome[1].status_code
            await self.close()
            code = "handshake_rejected" if status in (401, 403) else "http_status"
            raise EndpointError(f"{self._where()} answered the opening request with HTTP "
                                f"{status}", code=code)
        self._queue.put_nowait(outcome)

    def _request_body(self, turn_index: int, audio: bytes) -> dict[str, object]:
        audio_format = self._context.audio_format
        return {"protocol": PROTOCOL, "session_id": self._context.session_id,
                "turn_index": turn_index, "data": dict(self._context.data),
                "audio_format": audio_format.to_dict(),
                "audio": base64.b64encode(audio).decode("ascii")}

    async def _post(self, turn_index: int, audio: bytes) -> tuple[int, _Reply | _Failure]:
        client = self._client
        assert client is not None
        body = json.dumps(self._request_body(turn_index, audio), default=str).encode()
        timeout = self._settings.timeout_seconds
        where = self._where()
        try:
            outcome: _Reply | _Failure = await asyncio.wait_for(
                self._bounded_post(client, turn_index, body), timeout)
        except (TimeoutError, httpx.TimeoutException) as error:
            code = "connect_timeout" if isinstance(error, httpx.ConnectTimeout) else \
                "receive_timeout"
            outcome = _Failure(
                turn_index, code, f"no reply from {where} to turn {turn_index} within "
                f"{timeout:g} s")
        except httpx.ConnectError as error:
            refused = _caused_by_refusal(error)
            outcome = _Failure(turn_index, "connection_refused" if refused else
                               "connection_failed", f"cannot connect to {where}"
                               + (" (connection refused)" if refused else ""))
        except httpx.HTTPError as error:
            outcome = _Failure(turn_index, "connection_failed",
                               f"POST to {where} failed: {type(error).__name__}")
        return self._context.clock_ns(), outcome

    async def _bounded_post(self, client: httpx.AsyncClient, turn_index: int, body: bytes
                            ) -> _Reply | _Failure:
        """POST and read the reply as it streams, refusing it past ``max_response_bytes``
        (before it is held whole, let alone decoded)."""
        limit = self._settings.max_response_bytes
        async with client.stream("POST", self._settings.url, content=body,
                                 headers={"Content-Type": "application/json"}) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                return self._too_large(turn_index, f"declares {int(declared):,} bytes")
            content = bytearray()
            async for piece in response.aiter_bytes():
                content += piece
                if len(content) > limit:
                    return self._too_large(turn_index, f"went past {limit:,} bytes")
            return _Reply(turn_index, response.status_code, bytes(content))

    def _too_large(self, turn_index: int, what: str) -> _Failure:
        return _Failure(turn_index, "resource_limit",
                        f"the reply from {self._where()} to turn {turn_index} {what}: over "
                        f"endpoint.settings.max_response_bytes "
                        f"({self._settings.max_response_bytes:,}); refused before decoding")

    async def _post_after(self, previous: asyncio.Task[None] | None, turn_index: int,
                          audio: bytes) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        self._queue.put_nowait(await self._post(turn_index, audio))

    def _require_open(self) -> None:
        if self._state != "open":
            raise EndpointError("the connection to the product is closed", code="connection_closed")

    async def send_audio(self, audio: PcmAudio) -> None:
        """Buffer the turn's audio; it is sent with ``commit_turn``."""
        self._require_open()
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        self._buffer.extend(audio.to_bytes())

    async def commit_turn(self) -> None:
        """POST the buffered audio as the next turn (in the background, after earlier turns)."""
        self._require_open()
        self._turn_index += 1
        audio, self._buffer = bytes(self._buffer), bytearray()
        task = asyncio.create_task(self._post_after(self._last_post, self._turn_index, audio),
                                   name=f"voicelab-http-turn-{self._turn_index}")
        self._last_post = task
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)

    async def interrupt(self) -> None:
        """No-op: a non-streaming product cannot be interrupted (``interruption: false``)."""
        logger.debug("interrupt() ignored: the HTTP adapter does not support interruption")

    async def events(self) -> AsyncIterator[EndpointEvent]:
        if self._events_finished:
            return
        while True:
            received_ns, item = await self._queue.get()
            if isinstance(item, _Closure):
                self._events_finished = True
                yield EndpointEvent("closed", received_ns, data={
                    "reason": item.reason, "code": None, "initiated_by": item.initiated_by})
                return
            events = (self._failure_events(received_ns, item) if isinstance(item, _Failure)
                      else self._reply_events(received_ns, item))
            for event in events:
                yield event
            if len(events) == 1 and events[0].type == "error":  # the turn failed: no reply
                await self._finish(f"turn failed: {events[0].text}", "adapter")

    def _error(self, received_ns: int, code: str, message: str, raw: object = None, *,
               origin: str = "adapter", **extra: object) -> EndpointEvent:
        message = self._scrubber.scrub_text(message)
        data = {"code": code, "message": message, "origin": origin, **extra}
        return EndpointEvent("error", received_ns, text=message, data=data, raw=raw)

    def _failure_events(self, received_ns: int, failure: _Failure) -> list[EndpointEvent]:
        return [self._error(received_ns, failure.code, failure.message,
                            raw={"turn_index": failure.turn_index, "failure": failure.code})]

    def _reply_events(self, received_ns: int, reply: _Reply) -> list[EndpointEvent]:
        text = reply.body.decode("utf-8", errors="replace")
        if reply.status_code >= 400:
            excerpt = self._scrubber.scrub_text(text[:BODY_EXCERPT_CHARS])
            raw = {"turn_index": reply.turn_index, "status_code": reply.status_code,
                   "body_excerpt": excerpt}
            return [self._error(received_ns, "http_status", f"{self._where()} answered turn "
                                f"{reply.turn_index} with HTTP {reply.status_code}", raw,
                                status_code=reply.status_code)]
        try:
            body = json.loads(text)
        except ValueError as error:
            raw = {"turn_index": reply.turn_index,
                   "malformed_text": self._scrubber.scrub_text(text[:BODY_EXCERPT_CHARS])}
            return [self._error(received_ns, "malformed_json",
                                f"reply to turn {reply.turn_index} is not JSON: {error}", raw)]
        if not isinstance(body, dict):
            return [self._error(received_ns, "malformed_message", f"reply to turn "
                                f"{reply.turn_index} is a JSON {type(body).__name__}, not an "
                                f"object", self._scrubber.scrub(body))]
        return self._decode_reply(received_ns, reply.turn_index, body)

    def _decode_reply(self, ns: int, turn_index: int, body: dict[str, object]) -> list[EndpointEvent]:
        encoded = body.get("audio")
        raw = self._scrubber.scrub({k: v for k, v in body.items() if k != "audio"})
        raw["turn_index"] = raw.get("turn_index", turn_index)
        events: list[EndpointEvent] = []
        audio: bytes | None = None
        if encoded:
            try:
                if not isinstance(encoded, str):
                    raise TypeError(f"audio is a JSON {type(encoded).__name__}, not base64 text")
                audio = base64.b64decode(encoded, validate=True)
                raw["audio"] = {"omitted": "base64 pcm", "byte_count": len(audio)}
            except (binascii.Error, TypeError, ValueError):
                raw["audio"] = {"omitted": "base64 pcm", "invalid": True}
                events.append(self._error(ns, "invalid_audio", "reply audio is not valid base64; "
                                          "dropped", raw))
        if isinstance(raw.get("input_transcript"), str):
            events.append(EndpointEvent("input_transcript", ns, text=raw["input_transcript"],
                                        raw=raw))
        for call in _dicts(raw.get("tool_calls")):
            arguments, arguments_json = parse_arguments(call.get("arguments"))
            data = {"call_id": call.get("call_id"), "name": call.get("name"),
                    "arguments": arguments}
            if arguments_json is not None:
                data["arguments_json"] = arguments_json
            events.append(EndpointEvent("tool_call", ns, data=data, raw=raw))
        for result in _dicts(raw.get("tool_results")):
            events.append(EndpointEvent("tool_result", ns, raw=raw, data={
                "call_id": result.get("call_id"), "output": result.get("output")}))
        if audio is not None and len(audio) % BYTES_PER_SAMPLE:
            events.append(self._error(ns, "invalid_audio", f"reply audio has an odd byte count "
                                      f"({len(audio)}); pcm_s16le needs whole samples, dropped",
                                      raw))
        elif audio:
            events.append(EndpointEvent("audio_delta", ns, audio=audio, raw=raw))
        if isinstance(raw.get("transcript"), str):
            events.append(EndpointEvent("transcript_final", ns, text=raw["transcript"], raw=raw))
        status = "completed"
        product_error = raw.get("error")
        if isinstance(product_error, dict):
            status = "failed"
            code = str(product_error.get("code") or "product_error")
            events.append(self._error(ns, code, str(product_error.get("message") or code), raw,
                                      origin="product"))
        events.append(EndpointEvent("turn_complete", ns, data={"status": status}, raw=raw))
        if raw.get("completed") is True:
            events.append(EndpointEvent("conversation_complete", ns, raw=raw))
        return events

    async def _finish(self, reason: str, initiated_by: str) -> None:
        self._state = "closed"
        current = asyncio.current_task()
        for task in list(self._posts):
            if task is not current:
                task.cancel()
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.aclose()
            except Exception as error:  # noqa: BLE001 - closing must not raise
                logger.debug("closing the HTTP client failed: %s", type(error).__name__)
        if not self._closure_enqueued:
            self._closure_enqueued = True
            self._queue.put_nowait((self._context.clock_ns(), _Closure(reason, initiated_by)))

    async def close(self) -> None:
        """Cancel pending turns and release the client; idempotent, never raises."""
        if self._state == "closed" and self._closure_enqueued:
            return
        try:
            await self._finish("closed by the evaluator", "evaluator")
        except Exception as error:  # noqa: BLE001
            logger.debug("close() swallowed %s", type(error).__name__)


def _caused_by_refusal(error: BaseException) -> bool:
    seen: BaseException | None = error
    for _ in range(8):  # httpx -> httpcore -> OSError -> ConnectionRefusedError
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
