"""The local demo agent: a real voice agent on 127.0.0.1 speaking protocol v1.

It hears the user with pocketsphinx, follows the small rule-based dialogue of :mod:`._rules`
(record the daily plan, save the reminder with a ``save_reminder`` tool call), speaks with
piper and persists to SQLite. Like the fake product it is strict about protocol order: a message
before ``evaluator.init``, a malformed or second init, a commit with no audio, ``response.create``
without a commit, an odd-length audio frame, malformed JSON or an unknown message type gets an
``error`` and a close (1008). Runs in-process (``LocalAgentEndpoint``) or on its own
(``python -m voicelab.doubles.demo_agent``). The server and the protocol are shared with the
fake product (:mod:`voicelab.doubles.product`); this module keeps how the agent listens, decides
and acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ...audio import PcmAudio
from ...endpoints._settings import parse_settings
from ...endpoints.websocket import _wire as wire
from ..product import ProductConnection, ProductServer
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


class _AgentConnection(ProductConnection):
    """One evaluator session with the agent: a recognition task per commit, and responses that
    decide, act (persist, call the tool) and speak."""

    session_prefix = "agent"
    # a response.cancel from now on cancels this response, even while it waits its turn
    cancel_while_queued = True

    behaviour: LocalAgentBehaviour
    record: AgentSessionRecord
    store: AgentStore

    def __init__(self, agent: LocalAgent, ws: ServerConnection, record: AgentSessionRecord,
                 store: AgentStore):
        super().__init__(agent, ws, record, store)
        self.voice = agent.voice
        self.requested = reminder_from_request({})
        self.state = DialogueState()
        self.completion_sent = False

    def requested_session_id(self, request: dict[str, Any]) -> Any:
        session_id = request.get("session_id")
        context = request.get("context")
        if session_id is None and isinstance(context, Mapping):
            session_id = context.get("session_id")
        return session_id

    def read_request(self, request: dict[str, Any]) -> str:
        self.requested = reminder_from_request(request)
        return topic_from_request(request)

    async def opened(self) -> None:
        self.start_response(0, None, None)  # the agent opens the conversation

    async def commit_turn(self, audio: bytes) -> asyncio.Task[str]:
        return self.spawn(self.recognize_turn(self.user_turns, PcmAudio.from_bytes(audio)))

    async def recognize_turn(self, turn: int, audio: PcmAudio) -> str:
        """Recognize one committed user turn and report what was heard (input transcript)."""
        heard, elapsed_ms = await self.voice.listen(audio)
        self.record.heard.append(heard)
        self.store.record_utterance(self.session_id, turn_index=turn, heard_text=heard,
                                    audio_ms=int(audio.num_samples * 2 / BYTES_PER_MS))
        logger.debug("demo agent heard %r in %.0f ms", heard, elapsed_ms)
        await self.send({"type": wire.INPUT_TRANSCRIPT, "item_id": f"turn_{turn}",
                         "transcript": heard, "recognition_ms": round(elapsed_ms, 1)})
        return heard

    async def response_failed(self, number: int, error: Exception) -> None:
        # recognizer/synthesizer failures vary: report them on the wire, keep the session
        logger.warning("demo agent: response %d failed: %s: %s", number,
                       type(error).__name__, error)
        with contextlib.suppress(ConnectionClosed):
            await self.send({"type": wire.ERROR, "error": {
                "code": "agent_failure",
                "message": f"response {number} failed: {type(error).__name__}: {error}"}})
            await self.send({"type": wire.RESPONSE_DONE, "response": {
                "id": f"resp_{number}", "status": "failed"}})

    async def respond(self, number: int, user_turn: int, turn: asyncio.Task[str] | None,
                      trigger_ns: int | None, cancel: asyncio.Event) -> None:
        response_id = f"resp_{number}"
        timing: dict[str, Any] = {"response_create_ns": trigger_ns, "first_audio_ns": None,
                                  "synthesis_ms": None}
        decision: Decision | None = None
        if turn is None:
            text = OPENING_TEXT
        else:
            recognized = await turn
            if cancel.is_set():  # barge-in before the agent acted on this turn
                await self.send_done(response_id, "cancelled", timing)
                return
            decision = decide(self.state, understand(recognized), requested=self.requested)
            self.state = decision.state
            await self.act(decision, user_turn, recognized, response_id)
            text = decision.reply_text
        audio, timing["synthesis_ms"] = await self.voice.speak(text)
        timing["synthesis_ms"] = round(timing["synthesis_ms"], 1)
        frames = [chunk.to_bytes() for chunk in audio.chunks(self.behaviour.output_chunk_ms)]
        if await self.stream_audio(number, frames, cancel, timing):
            await self.send_done(response_id, "cancelled", timing)
            return
        self.record.replies.append(text)
        await self.finish(response_id, text, timing)
        if decision is not None and decision.completes and not self.completion_sent:
            self.completion_sent = True
            await self.complete()

    async def act(self, decision: Decision, user_turn: int, heard: str,
                  response_id: str) -> None:
        """Persist what the decision says: the plan, and the reminder through its tool call."""
        if decision.record_plan:
            self.store.record_plan(self.session_id, turn_index=user_turn, topic=self.topic,
                                   plan_text=heard)
        reminder = decision.reminder
        if reminder is None:
            return
        arguments = {"session_id": self.session_id, "text": reminder.text, "time": reminder.time,
                     "time_source": reminder.time_source, "time_heard": reminder.time_heard}
        await self.call_save_reminder(
            response_id, arguments, reminder_time=reminder.time,
            save=lambda: self.store.save_reminder(self.session_id, text=reminder.text,
                                                  time=reminder.time,
                                                  time_source=reminder.time_source))


class LocalAgent(ProductServer):
    """The demo agent as a server. ``await start()`` returns its ``ws://127.0.0.1:<port>/`` URI.

    The constructor checks the speech packages and settings but loads nothing; ``start()``
    loads the piper voice before it listens.
    """

    behaviour_model = LocalAgentBehaviour
    store_class = AgentStore
    probe_class = LocalAgentProbe
    database_dir_class = TemporaryDatabaseDir
    connection_class = _AgentConnection
    label = "demo agent"
    log = logger

    behaviour: LocalAgentBehaviour
    store: AgentStore | None
    sessions: list[AgentSessionRecord]

    def __init__(self, behaviour: LocalAgentBehaviour | Mapping[str, Any] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0,
                 database_path: str | Path | None = None,
                 default_session_id: str | None = None, base_dir: Path | None = None):
        behaviour = parse_settings(LocalAgentBehaviour, behaviour)
        self.voice = AgentVoice(behaviour, base_dir=base_dir)
        super().__init__(behaviour, host=host, port=port, database_path=database_path,
                         default_session_id=default_session_id)

    async def prepare(self) -> None:
        await self.voice.warm_up()

    def new_record(self, ws: ServerConnection) -> AgentSessionRecord:
        return AgentSessionRecord()
