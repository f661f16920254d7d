"""The local demo agent: a real voice agent on 127.0.0.1 speaking protocol v1.

It hears the user with pocketsphinx, follows the small rule-based dialogue of :mod:`._rules`
(record the daily plan, save the reminder with a ``save_reminder`` tool call), speaks with
piper and persists to SQLite. Like the fake product it is strict about protocol order: a message
before ``evaluator.init``, a malformed or second init, a commit with no audio, ``response.create``
without a commit, an odd-length audio frame, malformed JSON or an unknown message type gets an
``error`` and a close (1008). Runs in-process (``LocalAgentEndpoint``) or on its own
(``python -m voicelab.demo_agent``).
"""

from __future__ import annotations

import asyncio
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
from websockets.exceptions import ConnectionClosed

from ..audio import PcmAudio
from ..endpoints import _wire as wire
from ..endpoints._settings import parse_settings
from ._rules import (
    OPENING_TEXT,
    Decision,
    DialogueState,
    decide,
    reminder_from_request,
    topic_from_request,
    understand,
)
from ._store import AgentStore, LocalAgentProbe, TemporaryDatabaseDir
from ._voice import AgentVoice, LocalAgentBehaviour

logger = logging.getLogger(__name__)

VIOLATION_CLOSE_CODE = 1008
BYTES_PER_MS = 48  # canonical PCM: 24 kHz * 2 bytes


@dataclass
class AgentSessionRecord:
    """What one connection looked like: client message order, what the agent heard, problems."""

    session_id: str | None = None
    request: dict[str, Any] | None = None
    client_messages: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    responses_started: int = 0
    completed: bool = False


class LocalAgent:
    """The demo agent as a server. ``await start()`` returns its ``ws://127.0.0.1:<port>/`` URI.

    The constructor checks the speech packages and settings but loads nothing; ``start()``
    loads the piper voice before it listens.
    """

    def __init__(self, behaviour: LocalAgentBehaviour | Mapping[str, Any] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0,
                 database_path: str | Path | None = None,
                 default_session_id: str | None = None, base_dir: Path | None = None):
        self.behaviour = parse_settings(LocalAgentBehaviour, behaviour)
        self.voice = AgentVoice(self.behaviour, base_dir=base_dir)
        self.host, self._requested_port = host, port
        self._temporary: TemporaryDatabaseDir | None = None
        path = database_path or self.behaviour.database_path
        if path is None:
            self._temporary = TemporaryDatabaseDir()
            path = self._temporary.database_path
        self.database_path = Path(path)
        self.default_session_id = default_session_id
        self.store: AgentStore | None = None
        self.sessions: list[AgentSessionRecord] = []
        self.port: int | None = None
        self._server: Server | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise RuntimeError("the demo agent is not started")
        return f"ws://{self.host}:{self.port}/"

    def outcome_probe(self) -> LocalAgentProbe:
        return LocalAgentProbe({"database_path": str(self.database_path)},
                               keep_alive=self._temporary)

    async def start(self) -> str:
        await self.voice.warm_up()
        self.store = AgentStore(self.database_path)
        self._server = await serve(self._handle, self.host, self._requested_port,
                                   compression=None,
                                   max_size=self.behaviour.max_client_message_bytes)
        self.port = int(self._server.sockets[0].getsockname()[1])
        logger.debug("demo agent listening on %s", self.uri)
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

    async def __aenter__(self) -> LocalAgent:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _handle(self, ws: ServerConnection) -> None:
        record = AgentSessionRecord()
        self.sessions.append(record)
        assert self.store is not None
        await _AgentConnection(self, ws, record, self.store).run()


class _AgentConnection:
    """One evaluator session: a reader that validates messages, recognition tasks per commit,
    and response tasks that run one after another."""

    def __init__(self, agent: LocalAgent, ws: ServerConnection, record: AgentSessionRecord,
                 store: AgentStore):
        self.agent, self.ws, self.record, self.store = agent, ws, record, store
        self.behaviour = agent.behaviour
        self.session_id = ""
        self.topic = ""
        self.requested = reminder_from_request({})
        self.state = DialogueState()
        self.turn_audio = bytearray()
        self.committed: asyncio.Task[str] | None = None
        self.user_turns = 0
        self.responses = 0
        self.tasks: list[asyncio.Task[Any]] = []
        self.response_task: asyncio.Task[None] | None = None
        self.active_cancel: asyncio.Event | None = None
        self.send_lock = asyncio.Lock()
        self.initialized = False
        self.completion_sent = False

    async def run(self) -> None:
        try:
            async for message in self.ws:
                received_ns = time.perf_counter_ns()
                self.record.client_messages.append(wire.client_message_name(message))
                if not await self.on_message(message, received_ns):
                    break
        except ConnectionClosed:
            pass
        finally:
            pending = [task for task in self.tasks if not task.done()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def send(self, message: dict[str, Any] | bytes) -> None:
        payload = message if isinstance(message, bytes) else json.dumps(message)
        async with self.send_lock:
            await self.ws.send(payload)

    async def violation(self, code: str, message: str) -> bool:
        self.record.violations.append(code)
        logger.debug("demo agent: protocol violation %s: %s", code, message)
        with contextlib.suppress(ConnectionClosed):
            await self.send({"type": wire.ERROR, "error": {"code": code, "message": message}})
            await self.ws.close(VIOLATION_CLOSE_CODE, code)
        return False

    def spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coroutine)
        self.tasks = [t for t in self.tasks if not t.done()] + [task]
        return task

    async def on_message(self, message: str | bytes, received_ns: int) -> bool:
        if isinstance(message, bytes):
            if not self.initialized:
                return await self.violation("init_required", "binary audio before evaluator.init")
            if len(message) % 2:
                return await self.violation("invalid_audio",
                                            f"odd-length audio frame ({len(message)} bytes)")
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
            self.initialize(request)
            return True
        if kind == wire.INIT:
            return await self.violation("duplicate_init", "evaluator.init sent twice")
        if kind == wire.COMMIT:
            if not self.turn_audio:
                return await self.violation("empty_commit", "input_audio_buffer.commit with no "
                                            "audio since the last commit")
            audio = PcmAudio.from_bytes(bytes(self.turn_audio))
            self.turn_audio = bytearray()
            self.user_turns += 1
            self.committed = self.spawn(self.recognize_turn(self.user_turns, audio))
            return True
        if kind == wire.RESPONSE_CREATE:
            if self.committed is None:
                return await self.violation("create_without_commit",
                                            "response.create without input_audio_buffer.commit")
            heard, self.committed = self.committed, None
            self.start_response(self.user_turns, heard, received_ns)
            return True
        if kind == wire.RESPONSE_CANCEL:
            if self.active_cancel is not None:
                self.active_cancel.set()
            return True
        return await self.violation("unknown_message_type", f"unknown message type {kind!r}")

    def initialize(self, request: dict[str, Any]) -> None:
        self.initialized = True
        session_id = request.get("session_id")
        context = request.get("context")
        if session_id is None and isinstance(context, Mapping):
            session_id = context.get("session_id")
        self.session_id = str(session_id if session_id is not None else
                              self.agent.default_session_id or f"agent-{uuid.uuid4().hex[:12]}")
        self.topic = topic_from_request(request)
        self.requested = reminder_from_request(request)
        self.record.session_id, self.record.request = self.session_id, request
        self.store.start_session(self.session_id, self.topic, request)
        self.start_response(0, None, None)  # the agent opens the conversation

    async def recognize_turn(self, turn: int, audio: PcmAudio) -> str:
        """Recognize one committed user turn and report what was heard (input transcript)."""
        heard, elapsed_ms = await self.agent.voice.listen(audio)
        self.record.heard.append(heard)
        self.store.record_utterance(self.session_id, turn_index=turn, heard_text=heard,
                                    audio_ms=int(audio.num_samples * 2 / BYTES_PER_MS))
        logger.debug("demo agent heard %r in %.0f ms", heard, elapsed_ms)
        await self.send({"type": wire.INPUT_TRANSCRIPT, "item_id": f"turn_{turn}",
                         "transcript": heard, "recognition_ms": round(elapsed_ms, 1)})
        return heard

    def start_response(self, user_turn: int, heard: asyncio.Task[str] | None,
                       trigger_ns: int | None) -> None:
        previous = self.response_task
        self.responses += 1
        self.record.responses_started = self.responses
        # a response.cancel from now on cancels this response, even while it waits its turn
        cancel = self.active_cancel = asyncio.Event()
        self.response_task = self.spawn(
            self.respond(previous, self.responses, user_turn, heard, trigger_ns, cancel))

    async def pause(self, seconds: float, cancel: asyncio.Event) -> bool:
        """Sleep ``seconds``; True when a response.cancel cut it short."""
        if seconds <= 0:
            await asyncio.sleep(0)  # lets the reader see a response.cancel between frames
            return cancel.is_set()
        try:
            await asyncio.wait_for(cancel.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def respond(self, previous: asyncio.Task[None] | None, number: int, user_turn: int,
                      heard: asyncio.Task[str] | None, trigger_ns: int | None,
                      cancel: asyncio.Event) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            await self._respond(number, user_turn, heard, trigger_ns, cancel)
        except ConnectionClosed:
            logger.debug("demo agent: connection closed during response %d", number)
        except Exception as error:  # noqa: BLE001 - recognizer/synthesizer failures vary
            logger.warning("demo agent: response %d failed: %s: %s", number,
                           type(error).__name__, error)
            with contextlib.suppress(ConnectionClosed):
                await self.send({"type": wire.ERROR, "error": {
                    "code": "agent_failure",
                    "message": f"response {number} failed: {type(error).__name__}: {error}"}})
                await self.send({"type": wire.RESPONSE_DONE, "response": {
                    "id": f"resp_{number}", "status": "failed"}})

    async def _respond(self, number: int, user_turn: int, heard: asyncio.Task[str] | None,
                       trigger_ns: int | None, cancel: asyncio.Event) -> None:
        response_id = f"resp_{number}"
        timing: dict[str, Any] = {"response_create_ns": trigger_ns, "first_audio_ns": None,
                                  "synthesis_ms": None}

        async def done(status: str) -> None:
            await self.send({"type": wire.RESPONSE_DONE,
                             "response": {"id": response_id, "status": status},
                             "server_timing": dict(timing)})

        decision: Decision | None = None
        if heard is None:
            text = OPENING_TEXT
        else:
            recognized = await heard
            if cancel.is_set():  # barge-in before the agent acted on this turn
                await done("cancelled")
                return
            decision = decide(self.state, understand(recognized), requested=self.requested)
            self.state = decision.state
            await self.act(decision, user_turn, recognized, response_id)
            text = decision.reply_text
        audio, timing["synthesis_ms"] = await self.agent.voice.speak(text)
        timing["synthesis_ms"] = round(timing["synthesis_ms"], 1)
        if await self.stream_audio(audio, cancel, timing):
            await done("cancelled")
            return
        self.record.replies.append(text)
        await self.send({"type": wire.TRANSCRIPT_DONE, "response_id": response_id,
                         "transcript": text})
        await done("completed")
        if decision is not None and decision.completes and not self.completion_sent:
            self.completion_sent = self.record.completed = True
            await self.send({"type": wire.CONVERSATION_COMPLETED, "session_id": self.session_id,
                             "client_messages": list(self.record.client_messages)})

    async def act(self, decision: Decision, user_turn: int, heard: str,
                  response_id: str) -> None:
        """Persist what the decision says: the plan, and the reminder through its tool call."""
        if decision.record_plan:
            self.store.record_plan(self.session_id, turn_index=user_turn, topic=self.topic,
                                   plan_text=heard)
        reminder = decision.reminder
        if reminder is None:
            return
        call_id = f"call_{response_id}"
        arguments = {"session_id": self.session_id, "text": reminder.text, "time": reminder.time,
                     "time_source": reminder.time_source, "time_heard": reminder.time_heard}
        await self.send({"type": wire.FUNCTION_CALL_DONE, "response_id": response_id,
                         "call_id": call_id, "name": "save_reminder",
                         "arguments": json.dumps(arguments)})
        reminder_id = self.store.save_reminder(self.session_id, text=reminder.text,
                                               time=reminder.time,
                                               time_source=reminder.time_source)
        await self.send({"type": wire.TOOL_RESULT, "call_id": call_id,
                         "output": {"status": "saved", "reminder_id": reminder_id,
                                    "time": reminder.time}})

    async def stream_audio(self, audio: PcmAudio, cancel: asyncio.Event,
                           timing: dict[str, Any]) -> bool:
        """Send the reply audio in frames; True when a response.cancel stopped it."""
        behaviour = self.behaviour
        loop = asyncio.get_running_loop()
        realtime = behaviour.audio_pacing == "realtime"
        start = loop.time()
        sent_seconds = 0.0
        for chunk in audio.chunks(behaviour.output_chunk_ms):
            wait = start + sent_seconds / behaviour.pacing_speed - loop.time() if realtime else 0
            if await self.pause(wait, cancel):
                return True
            await self.send(chunk.to_bytes())
            if timing["first_audio_ns"] is None:
                timing["first_audio_ns"] = time.perf_counter_ns()
            sent_seconds += chunk.duration_seconds
        return False
