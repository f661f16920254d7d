"""One evaluator session with a local protocol-v1 product: the strict protocol state machine.

A message before ``evaluator.init``, a malformed or second init, a commit with no audio,
``response.create`` without a commit, an odd-length audio frame, malformed JSON or an unknown
message type gets an ``error`` event and a close (1008). Every client message is recorded in
order; responses run one after another, their audio paced as configured. The product
(:mod:`._server` subclass) fills in what it says and does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import ClassVar, Generic, Protocol, TypedDict, TypeVar, cast

import numpy as np
from pydantic import JsonValue
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ...audio import SILENCE_THRESHOLD
from ...endpoints.websocket import _wire as wire
from .._json import JsonObject
from ._store import ProductStore
from ._turn_detector import TurnDetector

VIOLATION_CLOSE_CODE = 1008
BYTES_PER_SECOND = 48000  # canonical PCM: 24 kHz * 2 bytes


def _last_loud_byte(frame: bytes) -> int | None:
    """Where the last sample above the silence threshold ends in ``frame`` (bytes)."""
    samples = np.frombuffer(frame, dtype="<i2")
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SILENCE_THRESHOLD)
    return (int(loud[-1]) + 1) * 2 if loud.size else None


class ClosedByProduct(Exception):
    """The product closed the connection mid-response (a fault); the response ends here."""


#: what a product makes of a committed user turn (its audio, a recognition task...), handed to
#: its response
TurnT = TypeVar("TurnT")
T = TypeVar("T")


class ProductBehaviour(Protocol):
    """What the strict protocol reads of every product's behaviour settings (a product's own
    optional settings are read where they apply)."""

    @property
    def audio_pacing(self) -> str: ...

    @property
    def pacing_speed(self) -> float: ...


class SessionRecord(Protocol):
    """What a connection records of its session (a product's record adds its own fields)."""

    session_id: str | None
    request: JsonObject | None
    client_messages: list[str]
    violations: list[str]
    responses_started: int
    completed: bool


class ServerTiming(TypedDict, total=False):
    """A response's ``server_timing`` (``response.done``): when things were sent, on the
    product's ``perf_counter_ns`` clock, and what a product measured of itself."""

    response_create_ns: int | None
    first_audio_ns: int | None
    speech_start_ns: int | None
    speech_end_ns: int | None
    frame_sent_ns: list[int]
    #: (``report_frame_times``) each frame's clock just before its send began: a frame left
    #: between this and its ``frame_sent_ns`` (a busy loop may hold the product in between)
    frame_before_ns: list[int]
    synthesis_ms: float | None


class ConnectionServer(Protocol):
    """What a connection reads of the server that accepted it (a :mod:`._server` product)."""

    @property
    def behaviour(self) -> ProductBehaviour: ...

    @property
    def log(self) -> logging.Logger: ...

    @property
    def label(self) -> str: ...

    @property
    def default_session_id(self) -> str | None: ...


class ProductConnection(Generic[TurnT]):
    """One evaluator session: a reader that validates messages in protocol order, and response
    tasks that run one after another.

    A subclass fills in the hooks: :meth:`read_request` and :meth:`opened` at init,
    :meth:`commit_turn` per commit, :meth:`respond` per response. ``TurnT`` is what the
    product makes of a user turn.
    """

    session_prefix: ClassVar[str] = "product"  # of a generated session id
    # True: a response.cancel cancels the newest response even while it waits for the one
    # before; False: it cancels the response that is playing
    cancel_while_queued: ClassVar[bool] = False

    def __init__(self, server: ConnectionServer, ws: ServerConnection, record: SessionRecord,
                 store: ProductStore):
        self.server, self.ws, self.record, self.store = server, ws, record, store
        self.behaviour = server.behaviour
        self.log, self.label = server.log, server.label
        self.session_id = ""
        self.topic = ""
        self.turn_audio = bytearray()
        self.committed: TurnT | None = None  # what commit_turn returned, until response.create
        self.user_turns = 0
        self.responses = 0
        self.tasks: list[asyncio.Task[object]] = []
        self.response_task: asyncio.Task[None] | None = None
        #: ``server_vad``: the product listens to a live line instead of taking commits
        self.listening = getattr(self.behaviour, "turn_taking", "client") == "server_vad"
        self.turn_detector = TurnDetector(
            silence_ms=getattr(self.behaviour, "vad_silence_ms", 500.0),
            interrupt_after_ms=getattr(self.behaviour, "stop_on_speech_ms", 150.0)) \
            if self.listening else None
        #: a reply's audio is being sent (idle silence frames wait)
        self.speaking = False
        #: (send time, peak) of the reply frames sent lately: the far end an echo canceller
        #: compares the line with
        self.far_end: deque[tuple[int, int]] = deque()
        self.active_cancel: asyncio.Event | None = None
        self.send_lock = asyncio.Lock()
        self.initialized = False

    # --- hooks ------------------------------------------------------------------------------

    @property
    def honours_cancel(self) -> bool:
        return True

    def received(self, message: str | bytes) -> None:
        """Every client message, as it arrives (after its name is recorded)."""

    def sent(self, message: Mapping[str, object] | bytes) -> None:
        """Every message sent, after it went out."""

    def requested_session_id(self, request: JsonObject) -> JsonValue:
        return request.get("session_id")

    def read_request(self, request: JsonObject) -> str:
        """Take what the conversation needs from the init request; return its topic."""
        raise NotImplementedError

    async def opened(self) -> None:
        """The session is initialized and persisted (e.g. start the opening response)."""

    async def commit_turn(self, audio: bytes) -> TurnT:
        """A committed user turn (``self.user_turns`` counts it); the value is handed to
        :meth:`respond` as ``turn`` on the next ``response.create``. By default the turn is
        its audio (a product that makes something else of it overrides this)."""
        return cast(TurnT, audio)

    def create_response(self, turn: TurnT, received_ns: int) -> None:
        self.start_response(self.user_turns, turn, received_ns)

    async def respond(self, number: int, user_turn: int, turn: TurnT, trigger_ns: int | None,
                      cancel: asyncio.Event) -> None:
        """Answer: stream the reply, ``response.done`` etc. ``user_turn`` 0 is the opening."""
        raise NotImplementedError

    async def response_failed(self, number: int, error: Exception) -> None:
        raise error

    async def before_frame(self, number: int, index: int, count: int, sent_seconds: float,
                           cancel: asyncio.Event) -> float | None:
        """Before each reply frame: extra seconds to hold it back, or ``None`` to stop (as
        cancelled)."""
        return 0.0

    async def send_audio(self, frame: bytes) -> None:
        await self.send(frame)

    # --- the protocol -----------------------------------------------------------------------

    async def run(self) -> None:
        try:
            async for message in self.ws:
                received_ns = time.perf_counter_ns()
                self.record.client_messages.append(wire.client_message_name(message))
                self.received(message)
                if not await self.on_message(message, received_ns):
                    break
        except ConnectionClosed:
            pass
        finally:
            pending = [task for task in self.tasks if not task.done()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def send(self, message: Mapping[str, object] | bytes) -> None:
        payload = message if isinstance(message, bytes) else json.dumps(message)
        async with self.send_lock:
            await self.ws.send(payload)
        self.sent(message)

    async def violation(self, code: str, message: str) -> bool:
        self.record.violations.append(code)
        self.log.debug("%s: protocol violation %s: %s", self.label, code, message)
        with contextlib.suppress(ConnectionClosed):
            await self.send({"type": wire.ERROR, "error": {"code": code, "message": message}})
            await self.ws.close(VIOLATION_CLOSE_CODE, code)
        return False

    def spawn(self, coroutine: Coroutine[object, object, T]) -> asyncio.Task[T]:
        task = asyncio.create_task(coroutine)
        self.tasks = [t for t in self.tasks if not t.done()] + [task]
        return task

    async def on_message(self, message: str | bytes, received_ns: int) -> bool:
        """Handle one client message; False when a violation closed the connection."""
        if isinstance(message, bytes):
            if not self.initialized:
                return await self.violation("init_required", "binary audio before evaluator.init")
            if len(message) % 2:
                return await self.violation("invalid_audio",
                                            f"odd-length audio frame ({len(message)} bytes)")
            if self.turn_detector is not None:
                await self.listen(message, received_ns)
                return True
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
        if self.listening and kind in (wire.COMMIT, wire.RESPONSE_CREATE, wire.RESPONSE_CANCEL):
            return await self.violation("server_vad", f"{kind!r} in server_vad mode: the product "
                                        f"detects turns itself")
        if kind == wire.COMMIT:
            if not self.turn_audio:
                return await self.violation("empty_commit", "input_audio_buffer.commit with no "
                                            "audio since the last commit")
            audio, self.turn_audio = bytes(self.turn_audio), bytearray()
            self.user_turns += 1
            self.committed = await self.commit_turn(audio)
            return True
        if kind == wire.RESPONSE_CREATE:
            if self.committed is None:
                return await self.violation("create_without_commit",
                                            "response.create without input_audio_buffer.commit")
            turn, self.committed = self.committed, None
            self.create_response(turn, received_ns)
            return True
        if kind == wire.RESPONSE_CANCEL:
            if self.active_cancel is not None and self.honours_cancel:
                self.active_cancel.set()
            return True
        return await self.violation("unknown_message_type", f"unknown message type {kind!r}")

    def cancel_echo(self, pcm: bytes, received_ns: int) -> bytes:
        """The line's frame, or silence when it is only the product's own echo (a Geigel
        double-talk detector: near-end speech is louder than ``echo_gate_ratio`` times the
        loudest far-end sample within ``echo_tail_ms``)."""
        if not getattr(self.behaviour, "echo_cancellation", False):
            return pcm
        tail_ns = int(getattr(self.behaviour, "echo_tail_ms", 1000.0) * 1e6)
        while self.far_end and self.far_end[0][0] < received_ns - tail_ns:
            self.far_end.popleft()
        far_peak = max((peak for _, peak in self.far_end), default=0)
        near = np.frombuffer(pcm, dtype="<i2")
        near_peak = int(np.abs(near.astype(np.int32)).max()) if near.size else 0
        if far_peak and near_peak < getattr(self.behaviour, "echo_gate_ratio", 0.5) * far_peak:
            return bytes(len(pcm))
        return pcm

    async def listen(self, pcm: bytes, received_ns: int) -> None:
        """``server_vad``: the line's audio, as the product's voice activity detection hears it."""
        assert self.turn_detector is not None
        pcm = self.cancel_echo(pcm, received_ns)
        for heard in self.turn_detector.hear(pcm):
            if heard.kind == "interrupted" and self.speaking and self.honours_cancel \
                    and self.active_cancel is not None:
                self.active_cancel.set()  # the user talks over the reply: stop it
            elif heard.kind == "ended":
                if len(heard.audio) / 48 < getattr(self.behaviour, "min_turn_ms", 0.0):
                    continue  # too short to be a turn ("mm-hmm"): the product talks on
                self.user_turns += 1
                self.create_response(await self.commit_turn(heard.audio), received_ns)

    async def initialize(self, request: JsonObject) -> None:
        self.initialized = True
        session_id = self.requested_session_id(request)
        self.session_id = str(session_id if session_id is not None else
                              self.server.default_session_id
                              or f"{self.session_prefix}-{uuid.uuid4().hex[:12]}")
        self.topic = self.read_request(request)
        self.record.session_id, self.record.request = self.session_id, request
        self.store.start_session(self.session_id, self.topic, request)
        await self.opened()

    # --- responses --------------------------------------------------------------------------

    def start_response(self, user_turn: int, turn: TurnT, trigger_ns: int | None) -> None:
        previous = self.response_task
        self.responses += 1
        self.record.responses_started = self.responses
        cancel: asyncio.Event | None = None  # else made when the response begins
        if self.cancel_while_queued:
            cancel = self.active_cancel = asyncio.Event()
        self.response_task = self.spawn(
            self._run_response(previous, self.responses, user_turn, turn, trigger_ns, cancel))

    async def _run_response(self, previous: asyncio.Task[None] | None, number: int,
                            user_turn: int, turn: TurnT, trigger_ns: int | None,
                            cancel: asyncio.Event | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        if cancel is None:
            cancel = self.active_cancel = asyncio.Event()
        try:
            await self.respond(number, user_turn, turn, trigger_ns, cancel)
        except (ConnectionClosed, ClosedByProduct):
            self.log.debug("%s: connection closed during response %d", self.label, number)
        except Exception as error:  # noqa: BLE001 - the subclass decides (default: re-raise)
            await self.response_failed(number, error)

    async def pause(self, seconds: float, cancel: asyncio.Event) -> bool:
        """Sleep ``seconds``; True when a honoured response.cancel cut it short."""
        if not self.honours_cancel:
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

    async def stream_audio(self, number: int, frames: Sequence[bytes], cancel: asyncio.Event,
                           timing: ServerTiming, *, speech_start_byte: int | None = None
                           ) -> bool:
        """Send the reply audio frames, paced as configured (always in real time in
        ``server_vad``); True when a cancel stopped it. Stamps ``timing["first_audio_ns"]`` (the
        first frame sent) and, given where the speech starts in the audio, ``speech_start_ns``
        (when the first speech sample was sent: its frame's send time plus its offset in it)."""
        loop = asyncio.get_running_loop()
        realtime = self.behaviour.audio_pacing == "realtime" or self.listening
        speed = self.behaviour.pacing_speed
        start = loop.time()
        sent_seconds = 0.0
        sent_bytes = 0
        self.speaking = True
        try:
            for index, frame in enumerate(frames):
                held_back = await self.before_frame(number, index, len(frames), sent_seconds,
                                                    cancel)
                if held_back is None:
                    return True
                start += held_back
                wait = start + sent_seconds / speed - loop.time() if realtime else 0
                if await self.pause(wait, cancel):
                    return True
                before_ns = time.perf_counter_ns()
                await self.send_audio(frame)
                sent_ns = time.perf_counter_ns()
                if self.listening and getattr(self.behaviour, "echo_cancellation", False):
                    samples = np.frombuffer(frame, dtype="<i2")
                    self.far_end.append((sent_ns, int(np.abs(samples.astype(np.int32)).max())
                                         if samples.size else 0))
                if timing["first_audio_ns"] is None:
                    timing["first_audio_ns"] = sent_ns
                if getattr(self.behaviour, "report_frame_times", False):
                    timing.setdefault("frame_sent_ns", []).append(sent_ns)
                    timing.setdefault("frame_before_ns", []).append(before_ns)
                if speech_start_byte is not None and timing.get("speech_start_ns") is None \
                        and sent_bytes <= speech_start_byte < sent_bytes + len(frame):
                    offset_ns = (speech_start_byte - sent_bytes) * 1_000_000_000 \
                        // BYTES_PER_SECOND
                    timing["speech_start_ns"] = sent_ns + int(offset_ns / speed)
                last_loud = _last_loud_byte(frame)
                if last_loud is not None:  # when the last speech sample so far was sent
                    timing["speech_end_ns"] = sent_ns + int(
                        last_loud * 1_000_000_000 // BYTES_PER_SECOND / speed)
                sent_seconds += len(frame) / BYTES_PER_SECOND
                sent_bytes += len(frame)
            return False
        finally:
            self.speaking = False

    async def send_done(self, response_id: str, status: str, timing: ServerTiming) -> None:
        await self.send({"type": wire.RESPONSE_DONE,
                         "response": {"id": response_id, "status": status},
                         "server_timing": dict(timing)})

    async def finish(self, response_id: str, text: str, timing: ServerTiming) -> None:
        """The reply's transcript (unless the product sends none), then ``response.done``."""
        if getattr(self.behaviour, "transcripts", True):
            await self.send({"type": wire.TRANSCRIPT_DONE, "response_id": response_id,
                             "transcript": text})
        await self.send_done(response_id, "completed", timing)

    async def complete(self) -> None:
        """``conversation.completed``, echoing the client message order."""
        self.record.completed = True
        await self.send({"type": wire.CONVERSATION_COMPLETED, "session_id": self.session_id,
                         "client_messages": list(self.record.client_messages)})

    async def call_save_reminder(self, response_id: str, arguments: Mapping[str, JsonValue], *,
                                 reminder_time: str, save: Callable[[], int]) -> None:
        """The ``save_reminder`` tool call, ``save()`` (persisting it), then its result."""
        call_id = f"call_{response_id}"
        await self.send({"type": wire.FUNCTION_CALL_DONE, "response_id": response_id,
                         "call_id": call_id, "name": "save_reminder",
                         "arguments": json.dumps(arguments)})
        reminder_id = save()
        await self.send({"type": wire.TOOL_RESULT, "call_id": call_id,
                         "output": {"status": "saved", "reminder_id": reminder_id,
                                    "time": reminder_time}})
