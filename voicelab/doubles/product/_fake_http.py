"""A tiny fake product for the HTTP adapter: a real HTTP/1.1 server on 127.0.0.1 (asyncio streams).

It answers ``POST`` requests of the ``voicelab.http.v1`` shape with the seed's example replies
(turn 0 = the opening, the completing turn saves the reminder) and can inject the faults the
HTTP adapter must survive: an error status, malformed JSON, a non-object reply, a slow reply,
odd-length audio and a product-level error. Each connection serves one request
(``Connection: close``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from ...endpoints import field_mapping
from ...endpoints._settings import AdapterSettings, parse_settings
from ._fake_behaviour import (
    DEFAULT_INTERIM_REPLY,
    DEFAULT_OPENING,
    DEFAULT_REMINDER_TIME,
    DEFAULT_REPLY,
    FakeBehaviour,
    plan_reply,
    reminder_from_request,
    reply_audio,
)

logger = logging.getLogger(__name__)

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error",
            503: "Service Unavailable"}


class FakeHttpBehaviour(AdapterSettings):
    opening_text: str = DEFAULT_OPENING
    reply_text: str = DEFAULT_REPLY
    interim_reply_text: str = DEFAULT_INTERIM_REPLY
    complete_after_turns: Annotated[int, Field(ge=0)] = 1
    reminder_time: str = DEFAULT_REMINDER_TIME
    input_transcript: str | None = None
    voice_seed: int = 7
    fault: Literal["none", "status", "bad_json", "non_object", "slow", "odd_audio",
                   "product_error"] = "none"
    fault_on_turn: Annotated[int, Field(ge=0)] | None = None  # None = every request
    fault_status: Annotated[int, Field(ge=400, le=599)] = 500
    slow_seconds: Annotated[float, Field(gt=0)] = 5.0
    access_token: str | None = None


class FakeHttpProduct:
    """``await start()`` returns ``http://127.0.0.1:<port>/turn``; ``requests`` records bodies."""

    def __init__(self, behaviour: FakeHttpBehaviour | Mapping[str, Any] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0):
        self.behaviour = parse_settings(FakeHttpBehaviour, behaviour)
        self.host, self._requested_port = host, port
        self.port: int | None = None
        self.requests: list[dict[str, Any]] = []
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the fake HTTP product is not started")
        return f"http://{self.host}:{self.port}/turn"

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, self.host, self._requested_port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.url

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 2.0)

    async def __aenter__(self) -> FakeHttpProduct:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            request_line = (await reader.readline()).decode("latin-1").split()
            headers: dict[str, str] = {}
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            status, payload = await self._answer(request_line, headers, body)
            reason = _REASONS.get(status, "Status")
            head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n")
            writer.write(head.encode("latin-1") + payload)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if task is not None:
                self._handlers.discard(task)

    async def _answer(self, request_line: list[str], headers: dict[str, str],
                      body: bytes) -> tuple[int, bytes]:
        if not request_line or request_line[0] != "POST":
            return 405, b'{"error": {"code": "method_not_allowed", "message": "POST only"}}'
        token = self.behaviour.access_token
        if token and headers.get("authorization") != f"Bearer {token}":
            status = 401 if "authorization" not in headers else 403
            return status, b'{"error": {"code": "unauthorized", "message": "bad token"}}'
        try:
            request = json.loads(body)
            turn_index = int(request["turn_index"])
            audio = base64.b64decode(request.get("audio") or "")
        except (ValueError, KeyError, TypeError):
            return 400, b'{"error": {"code": "bad_request", "message": "malformed request"}}'
        recorded = {k: v for k, v in request.items() if k != "audio"}
        recorded["audio_bytes"] = len(audio)
        recorded["traceparent"] = headers.get("traceparent")
        self.requests.append(recorded)
        return await self._reply(turn_index, request, audio)

    async def _reply(self, turn_index: int, request: dict[str, Any],
                     audio: bytes) -> tuple[int, bytes]:
        behaviour = self.behaviour
        faulty = behaviour.fault != "none" and behaviour.fault_on_turn in (None, turn_index)
        if faulty and behaviour.fault == "slow":
            await asyncio.sleep(behaviour.slow_seconds)
        if faulty and behaviour.fault == "status":
            return behaviour.fault_status, b'{"error": {"code": "fault", "message": "injected"}}'
        if faulty and behaviour.fault == "bad_json":
            return 200, b'{"audio": "AAAA", "transcript": '
        if faulty and behaviour.fault == "non_object":
            return 200, b'["not", "an", "object"]'
        voice = FakeBehaviour(voice_seed=behaviour.voice_seed)
        data = field_mapping(request, "data")
        reminder = reminder_from_request(data, fallback_time=behaviour.reminder_time)
        reply: dict[str, Any] = {"turn_index": turn_index}
        if turn_index == 0:
            text, completed = behaviour.opening_text, False
        else:
            plan = plan_reply(FakeBehaviour(
                reply_text=behaviour.reply_text, interim_reply_text=behaviour.interim_reply_text,
                complete_after_turns=behaviour.complete_after_turns), turn_index, reminder)
            text, completed = plan.text, plan.completes
            if behaviour.input_transcript is not None:
                reply["input_transcript"] = behaviour.input_transcript
            if plan.saves_reminder:
                call_id = f"call_{turn_index}"
                arguments = {"text": reminder.text, "time": reminder.time}
                reply["tool_calls"] = [{"call_id": call_id, "name": "save_reminder",
                                        "arguments": json.dumps(arguments)}]
                reply["tool_results"] = [{"call_id": call_id,
                                          "output": {"status": "saved", "time": reminder.time}}]
        pcm = reply_audio(text, voice).to_bytes() if text else b""
        if faulty and behaviour.fault == "odd_audio":
            pcm = pcm[:-1] if len(pcm) % 2 == 0 else pcm
        reply.update({"audio": base64.b64encode(pcm).decode("ascii"), "transcript": text,
                      "completed": completed})
        if faulty and behaviour.fault == "product_error":
            reply["error"] = {"code": "fault", "message": "injected product error"}
        return 200, json.dumps(reply).encode()
