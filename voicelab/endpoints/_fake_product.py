"""The embedded fake product: a real WebSocket server on 127.0.0.1 speaking protocol v1.

It is strict, so evaluator protocol slips are caught: a message before ``evaluator.init``, a
malformed init, a commit with no audio, ``response.create`` without a commit, an odd-length
audio frame or an unknown message type gets an ``error`` event and a close (code 1008). It
records every client message in order, persists its state in SQLite, and can inject the faults
of :class:`FakeBehaviour`. Runs in-process (``FakeProductEndpoint``) or standalone
(``python -m voicelab.endpoints.fake_server``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from . import _wire as wire
from ._fake_behaviour import (
    FakeBehaviour,
    Reminder,
    audio_frames,
    plan_reply,
    reminder_from_request,
    reply_audio,
    topic_from_request,
)
from ._fake_store import FakeProductProbe, FakeStore, TemporaryDatabaseDir
from ._settings import parse_settings

logger = logging.getLogger(__name__)

VIOLATION_CLOSE_CODE = 1008
FAULT_CLOSE_CODE = 1011


@dataclass
class FakeSessionRecord:
    """What one connection to the fake looked like (for protocol-order and golden tests)."""

    session_id: str | None = None
    request: dict[str, Any] | None = None
    client_messages: list[str] = field(default_factory=list)
    server_messages: list[dict[str, Any]] = field(default_factory=list)
    # both directions interleaved as the fake saw them: ("evaluator" | "product", summary)
    exchange: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    handshake_headers: dict[str, str] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    responses_started: int = 0
    completed: bool = False


class FakeProduct:
    """Protocol v1 as the product. ``await start()`` returns its ``ws://127.0.0.1:<port>/`` URI."""

    def __init__(self, behaviour: FakeBehaviour | Mapping[str, Any] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0,
                 database_path: str | Path | None = None,
                 default_session_id: str | None = None):
        self.behaviour = parse_settings(FakeBehaviour, behaviour)
        self.host, self._requested_port = host, port
        self._temporary: TemporaryDatabaseDir | None = None
        path = database_path or self.behaviour.database_path
        if path is None:
            self._temporary = TemporaryDatabaseDir()
            path = self._temporary.database_path
        self.database_path = Path(path)
        self.default_session_id = default_session_id
        self.store: FakeStore | None = None
        self.sessions: list[FakeSessionRecord] = []
        self.port: int | None = None
        self._server: Server | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise RuntimeError("the fake product is not started")
        return f"ws://{self.host}:{self.port}/"

    def outcome_probe(self) -> FakeProductProbe:
        return FakeProductProbe({"database_path": str(self.database_path)},
                                keep_alive=self._temporary)

    async def start(self) -> str:
        self.store = FakeStore(self.database_path)
        self._server = await serve(self._handle, self.host, self._requested_port,
                                   compression=None,
                                   max_size=self.behaviour.max_client_message_bytes,
                                   process_request=self._authorize)
        self.port = int(self._server.sockets[0].getsockname()[1])
        logger.debug("fake product listening on %s", self.uri)
        return self.uri

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 3.0)
        if self.store is not None:
            self.store.close()
            self.store = None

    async def __aenter__(self) -> FakeProduct:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        token = self.behaviour.access_token
        if not token:
            return None
        supplied = request.headers.get("Authorization")
        if supplied is None:
            return connection.respond(401, "missing bearer token\n")
        if supplied != f"Bearer {token}":
            return connection.respond(403, "invalid bearer token\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        record = FakeSessionRecord(handshake_headers=_visible_headers(ws.request.headers
                                                                      if ws.request else None))
        self.sessions.append(record)
        assert self.store is not None
        await _FakeConnection(self, ws, record, self.store).run()


def _visible_headers(headers: Headers | None) -> dict[str, str]:
    if headers is None:
        return {}
    return {name.lower(): ("<present>" if name.lower() == "authorization" else value)
            for name, value in headers.raw_items()}


class _ClosedByFault(Exception):
    """``close_mid_response`` closed the connection; the response ends here."""


def _summary(message: str | bytes | dict[str, Any]) -> dict[str, Any]:
    """A message as recorded: JSON as parsed (base64 audio elided), binary as its size."""
    if isinstance(message, bytes | bytearray):
        return {"binary_audio": len(message)}
    if isinstance(message, str):
        try:
            parsed = json.loads(message)
        except ValueError:
            return {"malformed_text": message[:200]}
        message = parsed if isinstance(parsed, dict) else {"json": parsed}
    summary = dict(message)
    if "delta" in summary:
        summary["delta"] = "<base64 pcm>"
    return summary


class _FakeConnection:
    """One evaluator session: a reader that validates messages, and response tasks that stream."""

    def __init__(self, product: FakeProduct, ws: ServerConnection, record: FakeSessionRecord,
                 store: FakeStore):
        self.behaviour = product.behaviour
        self.product, self.ws, self.record, self.store = product, ws, record, store
        self.session_id = ""
        self.topic = ""
        self.reminder = Reminder("", "")
        self.turn_audio = bytearray()
        self.committed: bytes | None = None
        self.user_turns = 0
        self.responses = 0
        self.response_task: asyncio.Task[None] | None = None
        self.active_cancel: asyncio.Event | None = None
        self.send_lock = asyncio.Lock()
        self.initialized = False

    async def run(self) -> None:
        try:
            async for message in self.ws:
                received_ns = time.perf_counter_ns()
                self.record.client_messages.append(wire.client_message_name(message))
                self.record.exchange.append(("evaluator", _summary(message)))
                if not await self.on_message(message, received_ns):
                    break
        except ConnectionClosed:
            pass
        finally:
            task = self.response_task
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def send(self, message: dict[str, Any] | bytes) -> None:
        payload = message if isinstance(message, bytes) else json.dumps(message)
        async with self.send_lock:
            await self.ws.send(payload)
        summary = _summary(message)
        self.record.server_messages.append(summary)
        self.record.exchange.append(("product", summary))

    async def violation(self, code: str, message: str) -> bool:
        self.record.violations.append(code)
        logger.debug("fake product: protocol violation %s: %s", code, message)
        with contextlib.suppress(ConnectionClosed):
            await self.send({"type": wire.ERROR, "error": {"code": code, "message": message}})
            await self.ws.close(VIOLATION_CLOSE_CODE, code)
        return False

    async def on_message(self, message: str | bytes, received_ns: int) -> bool:
        if isinstance(message, bytes):
            if not self.initialized:
                return await self.violation("init_required", "binary audio before evaluator.init")
            if len(message) % 2:
                return await self.violation("invalid_audio", f"odd-length audio frame "
                                            f"({len(message)} bytes)")
            self.turn_audio.extend(message)
            return True
        try:
            parsed = json.loads(message)
        except ValueError:
            return await self.violation("malformed_json", "message is not valid JSON")
        kind = parsed.get("type") if isinstance(parsed, dict) else None
        if not self.initialized:
            if kind != wire.INIT:
                return await self.violation("init_required", f"{kind!r} before evaluator.init")
            request = parsed.get("request")
            if not isinstance(request, dict):
                return await self.violation("malformed_init",
                                            "evaluator.init needs a 'request' object")
            await self.initialize(request)
            return True
        if kind == wire.INIT:
            return await self.violation("duplicate_init", "evaluator.init sent twice")
        if kind == wire.COMMIT:
            if not self.turn_audio:
                return await self.violation("empty_commit", "input_audio_buffer.commit with no "
                                            "audio since the last commit")
            self.committed, self.turn_audio = bytes(self.turn_audio), bytearray()
            self.user_turns += 1
            if self.behaviour.input_transcript is not None:
                await self.send({"type": wire.INPUT_TRANSCRIPT,
                                 "item_id": f"turn_{self.user_turns}",
                                 "transcript": self.behaviour.input_transcript})
            return True
        if kind == wire.RESPONSE_CREATE:
            if self.committed is None:
                return await self.violation("create_without_commit",
                                            "response.create without input_audio_buffer.commit")
            audio, self.committed = self.committed, None
            if not self.behaviour.never_answer:
                self.start_response(self.user_turns, audio, received_ns)
            return True
        if kind == wire.RESPONSE_CANCEL:
            if self.active_cancel is not None and not self.behaviour.ignore_cancel:
                self.active_cancel.set()
            return True
        return await self.violation("unknown_message_type", f"unknown message type {kind!r}")

    async def initialize(self, request: dict[str, Any]) -> None:
        self.initialized = True
        session_id = request.get("session_id")
        self.session_id = str(session_id if session_id is not None else
                              self.product.default_session_id or f"fake-{uuid.uuid4().hex[:12]}")
        self.topic = topic_from_request(request)
        self.reminder = reminder_from_request(request, fallback_time=self.behaviour.reminder_time)
        self.record.session_id, self.record.request = self.session_id, request
        self.store.start_session(self.session_id, self.topic, request)
        if self.behaviour.opening_text:
            self.start_response(0, b"", None)

    def start_response(self, user_turn: int, audio: bytes, trigger_ns: int | None) -> None:
        previous = self.response_task
        self.responses += 1
        self.record.responses_started = self.responses
        self.response_task = asyncio.create_task(
            self.respond(previous, self.responses, user_turn, audio, trigger_ns))

    async def pause(self, seconds: float, cancel: asyncio.Event) -> bool:
        """Sleep ``seconds``; True when a honoured response.cancel cut it short."""
        if self.behaviour.ignore_cancel:
            await asyncio.sleep(max(0.0, seconds))
            return False
        if seconds <= 0:
            await asyncio.sleep(0)  # lets the reader see a response.cancel between frames
            return cancel.is_set()
        try:
            await asyncio.wait_for(cancel.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def respond(self, previous: asyncio.Task[None] | None, number: int, user_turn: int,
                      audio: bytes, trigger_ns: int | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            await self._respond(number, user_turn, audio, trigger_ns)
        except (ConnectionClosed, _ClosedByFault):
            logger.debug("fake product: connection closed during response %d", number)

    async def _respond(self, number: int, user_turn: int, audio: bytes,
                       trigger_ns: int | None) -> None:
        behaviour = self.behaviour
        cancel = self.active_cancel = asyncio.Event()
        response_id = f"resp_{number}"
        timing: dict[str, int | None] = {"response_create_ns": trigger_ns, "first_audio_ns": None}

        async def done(status: str) -> None:
            await self.send({"type": wire.RESPONSE_DONE,
                             "response": {"id": response_id, "status": status},
                             "server_timing": dict(timing)})

        if await self.pause(behaviour.latency_seconds(number), cancel):
            await done("cancelled")
            return
        if behaviour.error_on_response == number:
            await self.send({"type": wire.ERROR, "error": {
                "code": "fake_fault", "message": f"injected error on response {number}"}})
            await done("failed")
            return
        if user_turn == 0:
            text, completes = behaviour.opening_text, False
        else:
            plan = plan_reply(behaviour, user_turn, self.reminder)
            text, completes = plan.text, plan.completes
            await self.persist(plan.records_plan, plan.saves_reminder, user_turn, len(audio),
                               response_id)
        if await self.stream_audio(number, text, cancel, timing):
            await done("cancelled")
            return
        await self.send({"type": wire.TRANSCRIPT_DONE, "response_id": response_id,
                         "transcript": text})
        await done("completed")
        if completes:
            self.record.completed = True
            await self.send({"type": wire.CONVERSATION_COMPLETED, "session_id": self.session_id,
                             "client_messages": list(self.record.client_messages)})

    async def persist(self, records_plan: bool, saves_reminder: bool, user_turn: int,
                      audio_bytes: int, response_id: str) -> None:
        if records_plan:
            audio_ms = int(audio_bytes / 48)  # 24 kHz * 2 bytes = 48 bytes per ms
            plan_text = self.behaviour.input_transcript or f"spoken plan ({audio_ms} ms of audio)"
            self.store.record_plan(self.session_id, turn_index=user_turn, topic=self.topic,
                                   plan_text=plan_text, audio_ms=audio_ms)
        if saves_reminder:
            call_id = f"call_{response_id}"
            arguments = {"session_id": self.session_id, "text": self.reminder.text,
                         "time": self.reminder.time}
            await self.send({"type": wire.FUNCTION_CALL_DONE, "response_id": response_id,
                             "call_id": call_id, "name": "save_reminder",
                             "arguments": json.dumps(arguments)})
            reminder_id = self.store.save_reminder(self.session_id, text=self.reminder.text,
                                                   time=self.reminder.time)
            await self.send({"type": wire.TOOL_RESULT, "call_id": call_id,
                             "output": {"status": "saved", "reminder_id": reminder_id,
                                        "time": self.reminder.time}})

    async def stream_audio(self, number: int, text: str, cancel: asyncio.Event,
                           timing: dict[str, int | None]) -> bool:
        """Send the reply audio; True when a honoured response.cancel stopped it."""
        behaviour = self.behaviour
        frames = audio_frames(reply_audio(text, behaviour), behaviour.output_chunk_ms)
        loop = asyncio.get_running_loop()
        realtime = behaviour.audio_pacing == "realtime"
        start = loop.time()
        sent_seconds = 0.0
        stall_pending = behaviour.stalls_on(number)
        for index, frame in enumerate(frames):
            if cancel.is_set() and not behaviour.ignore_cancel:
                return True
            if behaviour.close_mid_response == number and index == len(frames) // 2:
                await self.ws.close(FAULT_CLOSE_CODE, "fake product closed mid-response")
                raise _ClosedByFault
            if stall_pending and sent_seconds >= behaviour.stall_after_seconds:
                stall_pending = False
                if await self.pause(behaviour.stall_ms / 1000.0, cancel):
                    return True
                start += behaviour.stall_ms / 1000.0
            wait = start + sent_seconds / behaviour.pacing_speed - loop.time() if realtime else 0
            if await self.pause(wait, cancel):
                return True
            if behaviour.audio_transport == "base64":
                await self.send({"type": wire.AUDIO_DELTA,
                                 "delta": base64.b64encode(frame).decode("ascii")})
            else:
                await self.send(frame)
            if timing["first_audio_ns"] is None:
                timing["first_audio_ns"] = time.perf_counter_ns()
            sent_seconds += len(frame) / 48000.0
        return False
