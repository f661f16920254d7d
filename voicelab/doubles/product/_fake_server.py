"""The embedded fake product: a real WebSocket server on 127.0.0.1 speaking protocol v1.

It is strict, so evaluator protocol slips are caught: a message before ``evaluator.init``, a
malformed init, a commit with no audio, ``response.create`` without a commit, an odd-length
audio frame or an unknown message type gets an ``error`` event and a close (code 1008). It
records every client message in order, persists its state in SQLite, and can inject the faults
of :class:`FakeBehaviour`. Runs in-process (``FakeProductEndpoint``) or standalone
(``python -m voicelab.doubles.product``). The server and the protocol are shared with the
demo agent (:mod:`._server`, :mod:`._connection`); this module keeps what the
fake says, records and breaks.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

from ...audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio
from ...endpoints.websocket import _wire as wire
from .._voice import DoubleVoice
from ._connection import ClosedByProduct, ProductConnection
from ._fake_behaviour import (
    FakeBehaviour,
    Reminder,
    audio_frames,
    heard_transcript,
    plan_reply,
    reminder_from_request,
    reply_audio,
    speech_start_byte,
    spoken_text,
    topic_from_request,
)
from ._fake_store import FakeProductProbe, FakeStore, TemporaryDatabaseDir
from ._server import ProductServer

logger = logging.getLogger(__name__)

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


def _visible_headers(headers: Headers | None) -> dict[str, str]:
    if headers is None:
        return {}
    return {name.lower(): ("<present>" if name.lower() == "authorization" else value)
            for name, value in headers.raw_items()}


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


class _FakeConnection(ProductConnection):
    """One evaluator session with the fake: scripted replies, recorded exchange, faults."""

    session_prefix = "fake"

    behaviour: FakeBehaviour
    record: FakeSessionRecord
    store: FakeStore
    server: FakeProduct

    def __init__(self, product: FakeProduct, ws: ServerConnection, record: FakeSessionRecord,
                 store: FakeStore):
        super().__init__(product, ws, record, store)
        self.reminder = Reminder("", "")
        self.stall_pending = False  # the response now streaming still has its stall to come

    @property
    def honours_cancel(self) -> bool:
        return not self.behaviour.ignore_cancel

    async def initialize(self, request: dict[str, Any]) -> None:
        await super().initialize(request)
        # what a product that traces would do with the handshake's trace context: its spans
        # of this session become children of the evaluator's trial span (docs/observability.md)
        logger.info("fake product: session %s joins trace context traceparent=%s",
                    self.session_id, self.record.handshake_headers.get("traceparent"))

    def received(self, message: str | bytes) -> None:
        self.record.exchange.append(("evaluator", _summary(message)))

    def sent(self, message: dict[str, Any] | bytes) -> None:
        summary = _summary(message)
        self.record.server_messages.append(summary)
        self.record.exchange.append(("product", summary))

    def read_request(self, request: dict[str, Any]) -> str:
        self.reminder = reminder_from_request(request, fallback_time=self.behaviour.reminder_time)
        return topic_from_request(request)

    async def opened(self) -> None:
        if self.behaviour.hostile == "event_storm":
            self.spawn(self.event_storm())
            return
        if self.behaviour.idle_silence:
            self.spawn(self.idle_line())
        if self.behaviour.opening_text:
            self.start_response(0, b"", None)

    async def event_storm(self) -> None:
        """``hostile: event_storm``: unknown events until the connection ends, sent straight to
        the socket (not recorded, which would fill this process instead)."""
        filler = "x" * 1000
        number = 0
        while True:
            number += 1
            async with self.send_lock:
                await self.ws.send(json.dumps({"type": "telemetry.unknown", "n": number,
                                               "filler": filler}))

    async def idle_line(self) -> None:
        """Silence frames in real time whenever no reply is being sent (a phone line's media
        never stops)."""
        loop = asyncio.get_running_loop()
        seconds = self.behaviour.output_chunk_ms / 1000.0
        frame = bytes(int(round(seconds * 24_000)) * 2)
        due = loop.time()
        while True:
            due += seconds
            await asyncio.sleep(max(0.0, due - loop.time()))
            if not self.speaking:
                try:
                    await self.send_audio(frame)
                except ConnectionClosed:
                    return

    async def commit_turn(self, audio: bytes) -> bytes:
        heard = heard_transcript(self.behaviour)
        if heard is not None:
            await self.send({"type": wire.INPUT_TRANSCRIPT, "item_id": f"turn_{self.user_turns}",
                             "transcript": heard})
        return audio

    def create_response(self, turn: bytes, received_ns: int) -> None:
        if not self.behaviour.never_answer:
            self.start_response(self.user_turns, turn, received_ns)

    async def respond(self, number: int, user_turn: int, turn: bytes, trigger_ns: int | None,
                      cancel: asyncio.Event) -> None:
        behaviour = self.behaviour
        response_id = f"resp_{number}"
        timing: dict[str, int | None] = {"response_create_ns": trigger_ns, "first_audio_ns": None,
                                         "speech_start_ns": None, "speech_end_ns": None}
        if await self.pause(behaviour.latency_seconds(number), cancel):
            await self.send_done(response_id, "cancelled", timing)
            return
        if behaviour.error_on_response == number:
            await self.send({"type": wire.ERROR, "error": {
                "code": "fake_fault",
                "message": behaviour.error_message.replace("{number}", str(number))}})
            await self.send_done(response_id, "failed", timing)
            return
        if user_turn == 0:
            text, completes = behaviour.opening_text, False
        else:
            plan = plan_reply(behaviour, user_turn, self.reminder)
            text, completes = plan.text, plan.completes
            await self.persist(plan.records_plan, plan.saves_reminder, user_turn, len(turn),
                               response_id)
        audio = await self.reply_audio(text)
        frames = audio_frames(audio, behaviour.output_chunk_ms)
        self.stall_pending = behaviour.stalls_on(number)
        if await self.stream_audio(number, frames, cancel, timing,
                                   speech_start_byte=speech_start_byte(audio)):
            await self.send_done(response_id, "cancelled", timing)
            return
        await self.finish(response_id, text, timing)
        if completes:
            await self.complete()

    async def reply_audio(self, text: str) -> PcmAudio:
        """The reply's audio in the fake's voice (piper: synthesized in a worker thread)."""
        behaviour = self.behaviour
        said = spoken_text(text, behaviour)
        if behaviour.voice == "tone":
            return reply_audio(said, behaviour)
        voice = self.server.double_voice()
        return reply_audio(said, behaviour, speech=await asyncio.to_thread(voice.speak, said))

    async def persist(self, records_plan: bool, saves_reminder: bool, user_turn: int,
                      audio_bytes: int, response_id: str) -> None:
        if records_plan:
            audio_ms = int(audio_bytes / 48)  # 24 kHz * 2 bytes = 48 bytes per ms
            plan_text = heard_transcript(self.behaviour) or f"spoken plan ({audio_ms} ms of audio)"
            self.store.record_plan(self.session_id, turn_index=user_turn, topic=self.topic,
                                   plan_text=plan_text, audio_ms=audio_ms)
        if saves_reminder:
            reminder = self.reminder
            arguments = {"session_id": self.session_id, "text": reminder.text,
                         "time": reminder.time}
            await self.call_save_reminder(
                response_id, arguments, reminder_time=reminder.time,
                save=lambda: self.store.save_reminder(self.session_id, text=reminder.text,
                                                      time=reminder.time))

    async def before_frame(self, number: int, index: int, count: int, sent_seconds: float,
                           cancel: asyncio.Event) -> float | None:
        behaviour = self.behaviour
        if cancel.is_set() and not behaviour.ignore_cancel:
            return None
        if behaviour.close_mid_response == number and index == count // 2:
            await self.ws.close(FAULT_CLOSE_CODE, "fake product closed mid-response")
            raise ClosedByProduct
        if self.stall_pending and sent_seconds >= behaviour.stall_after_seconds:
            self.stall_pending = False
            if await self.pause(behaviour.stall_ms / 1000.0, cancel):
                return None
            return behaviour.stall_ms / 1000.0
        return 0.0

    async def send_audio(self, frame: bytes) -> None:
        if self.behaviour.audio_transport == "base64":
            await self.send({"type": wire.AUDIO_DELTA,
                             "delta": base64.b64encode(frame).decode("ascii")})
        else:
            await self.send(frame)


class FakeProduct(ProductServer):
    """Protocol v1 as the product. ``await start()`` returns its ``ws://127.0.0.1:<port>/`` URI."""

    behaviour_model = FakeBehaviour
    store_class = FakeStore
    probe_class = FakeProductProbe
    database_dir_class = TemporaryDatabaseDir
    connection_class = _FakeConnection
    label = "fake product"
    log = logger

    behaviour: FakeBehaviour
    store: FakeStore | None
    sessions: list[FakeSessionRecord]

    _voice: DoubleVoice | None = None

    def double_voice(self) -> DoubleVoice:
        """The fake's piper voice, loaded once per product (its renderings kept)."""
        if self._voice is None:
            self._voice = DoubleVoice(self.behaviour.voice, seed=self.behaviour.voice_seed,
                                      sample_rate_hz=CANONICAL_SAMPLE_RATE_HZ)
        return self._voice

    def new_record(self, ws: ServerConnection) -> FakeSessionRecord:
        return FakeSessionRecord(handshake_headers=_visible_headers(ws.request.headers
                                                                    if ws.request else None))
