"""The pipecat adapter (``adapter: pipecat``): a bot served with pipecat's WebSocket transport
and ``ProtobufFrameSerializer``, over a real socket.

A pipecat bot takes turns by listening, so this adapter is ``server_vad`` only: the runner
streams the caller's line through :meth:`PipecatEndpoint.send_audio` for the whole call and never
commits a turn. The connection stamps each message as the loop reads it and puts it into the
adapter's bounded inbox (see :mod:`._socket`); ``events()`` decodes on the consumer side (see
:mod:`._pipecat_wire`), delivers the resampler's tail once the bot's audio has paused, and enforces
the receive timeout (one timer each, per quiet period).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ..audio import PcmAudio
from ._inbox import Closure, MessageInbox, SocketClosed, closure_error
from ._pipecat_wire import OutboundAudio, PipecatDecoder, encode_frame, message_frame
from ._protocol import EndpointContext, EndpointError, EndpointEvent
from ._settings import AdapterSettings, parse_settings, redacted_url, secret_values
from ._socket import WebSocketConnection, open_websocket

logger = logging.getLogger(__name__)

USER_AGENT = "voicelab-evaluator (pipecat frames)"
_QUIET = object()     # queued when the bot's audio may have paused
_WATCHDOG = object()  # queued when the receive timeout may have passed


class PipecatSettings(AdapterSettings):
    uri: Annotated[str, Field(min_length=1)]
    headers: dict[str, str] = Field(default_factory=dict)
    #: the rate the caller's audio is sent at (the bot's ``audio_in_sample_rate``); the bot's
    #: frames carry their own rate, and this one stands in when a frame leaves it unset
    sample_rate_hz: Annotated[int, Field(ge=8000, le=48000)] = 16000
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    #: no frame at all from the bot for this long ends the call (``error{receive_timeout}``);
    #: a bot says nothing while the caller talks, so this spans a turn plus its answer
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 60.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    #: duration of each chunk of the caller's line (the runner sends one every ``chunk_ms``)
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 20.0
    #: soxr's recipe for both directions (QQ, LQ, MQ, HQ, VHQ)
    resample_quality: Literal["QQ", "LQ", "MQ", "HQ", "VHQ"] = "HQ"
    #: JSON objects sent as message frames right after connecting, e.g. an RTVI
    #: ``client-ready`` for bots that wait for one before they greet
    connect_messages: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("uri")
    @classmethod
    def _websocket_scheme(cls, value: str) -> str:
        if not value.startswith(("ws://", "wss://")):
            raise ValueError("must be a ws:// or wss:// URI")
        return value


class _QuietTimer:
    """One timer per quiet period: calls ``due()`` once ``clock_ns()`` has passed
    ``since_ns() + period_ns()``, re-arming itself while something moved the start later."""

    def __init__(self, clock_ns: Callable[[], int], since_ns: Callable[[], int],
                 period_ns: Callable[[], int], due: Callable[[], None]):
        self._clock_ns, self._since_ns, self._period_ns, self._due = \
            clock_ns, since_ns, period_ns, due
        self._handle: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        if self._handle is not None:
            return
        remaining_ns = self._since_ns() + self._period_ns() - self._clock_ns()
        self._handle = asyncio.get_running_loop().call_later(max(0, remaining_ns) / 1e9,
                                                             self._fired)

    def _fired(self) -> None:
        self._handle = None
        if self._clock_ns() >= self._since_ns() + self._period_ns():
            self._due()
        else:
            self.arm()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class PipecatEndpoint:
    """pipecat frames: the caller's audio as ``audio`` frames at the bot's rate; the bot's audio,
    text, transcriptions, messages and interruptions back as normalized events."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": True,
        "tool_events": False,
        "input_transcripts": True,
    }

    def __init__(self, settings: Mapping[str, Any] | PipecatSettings, context: EndpointContext):
        self._settings = parse_settings(PipecatSettings, settings)
        self._context = context
        self._uri = self._settings.uri
        self._scrubber = context.scrubber.with_values(
            secret_values(self._settings.headers, None, uri=self._uri))
        quality = self._settings.resample_quality
        self._outbound = OutboundAudio(sample_rate_hz=self._settings.sample_rate_hz,
                                       quality=quality)
        self._decoder = PipecatDecoder(self._scrubber, sample_rate_hz=self._settings.sample_rate_hz,
                                       quality=quality)
        self._queue = MessageInbox()  # (received ns, message | Closure | _QUIET | _WATCHDOG)
        self._ws: WebSocketConnection | None = None
        self._state = "new"  # new -> open -> closing -> closed
        self._closure_enqueued = False
        self._events_finished = False
        self._close_initiator: str | None = None
        self._close_reason: str | None = None
        self._progress_ns = 0  # when the bot last sent anything (or the call opened)
        clock = context.clock_ns
        self._quiet = _QuietTimer(clock, lambda: self._decoder.last_audio_ns,
                                  lambda: self._decoder.quiet_ns,
                                  lambda: self._queue.put_nowait((clock(), _QUIET)))
        self._watchdog = _QuietTimer(
            clock, lambda: self._progress_ns,
            lambda: int(self._settings.receive_timeout_seconds * 1e9),
            lambda: self._queue.put_nowait((clock(), _WATCHDOG)))

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        parse_settings(PipecatSettings, settings)

    @classmethod
    def turn_taking(cls, settings: Mapping[str, Any]) -> str:
        return "server_vad"  # a pipecat bot detects the end of the caller's speech itself

    @property
    def settings(self) -> PipecatSettings:
        return self._settings

    # --- connection ----------------------------------------------------------------------

    def _where(self) -> str:
        return self._scrubber.scrub_text(redacted_url(self._uri))

    async def connect(self) -> None:
        """Open the socket (configured headers, ``traceparent``), send ``connect_messages``.

        Raises :class:`EndpointError` (``connection_refused``, ``handshake_rejected``,
        ``connect_timeout``, ``connection_failed``, ``handshake_failed``) before the connection is
        open; later problems arrive as ``error``/``closed`` events.
        """
        if self._state != "new":
            raise EndpointError("connect() may be called once", code="already_connected")
        settings = self._settings
        headers = {**settings.headers, "traceparent": self._context.traceparent}
        where = self._where()
        self._ws = await open_websocket(
            self._uri, headers=headers, connect_timeout_seconds=settings.connect_timeout_seconds,
            max_message_bytes=settings.max_message_bytes, clock_ns=self._context.clock_ns,
            inbox=self._queue, where=where, scrubber=self._scrubber, user_agent=USER_AGENT)
        self._state = "open"
        self._progress_ns = self._context.clock_ns()
        try:
            for message in settings.connect_messages:
                await self._ws.send(message_frame(message))
        except SocketClosed:
            await self.close()
            raise EndpointError(f"{where} closed the connection before the connect messages "
                                f"were sent", code="connection_closed") from None
        logger.info("connected to %s (session %s)", where, self._context.session_id)

    def _closure_received(self) -> bool:
        return self._closure_enqueued or (self._ws is not None and self._ws.closed)

    # --- sending -------------------------------------------------------------------------

    def _open_connection(self) -> WebSocketConnection:
        if self._ws is None or self._state != "open":
            raise EndpointError("the connection to the product is closed", code="connection_closed")
        return self._ws

    async def _send(self, frame: bytes) -> None:
        ws = self._open_connection()
        try:
            await ws.send(frame)
        except SocketClosed:
            raise EndpointError("the connection to the product is closed",
                                code="connection_closed") from None

    async def send_audio(self, audio: PcmAudio) -> None:
        """The next chunk of the caller's line (canonical PCM), resampled to ``sample_rate_hz``
        and sent as an ``audio`` frame; never sleeps (the runner paces)."""
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        self._open_connection()
        for frame in self._outbound.frames(audio):
            await self._send(frame)

    async def commit_turn(self) -> None:
        """Nothing to send: the bot hears the end of the caller's turn itself."""
        self._open_connection()

    async def interrupt(self) -> None:
        """An ``interruption`` frame: pipecat's serializer takes one from the client as a request
        to stop the bot's output. (A caller on a live line barges in by speaking instead.)"""
        await self._send(encode_frame("interruption"))

    # --- receiving -----------------------------------------------------------------------

    async def events(self) -> AsyncIterator[EndpointEvent]:
        """Normalized events in arrival order; the last one is ``closed``. One consumer only."""
        if self._events_finished:
            return
        queue = self._queue
        while True:
            if queue.empty():
                if self._state == "open":
                    self._watchdog.arm()
                received_ns, item = await queue.get()
            else:
                received_ns, item = queue.get_nowait()
            if item is _QUIET:
                if self._decoder.holds_audio and \
                        received_ns >= self._decoder.last_audio_ns + self._decoder.quiet_ns:
                    for event in self._decoder.flush_audio():
                        yield event
                continue
            if item is _WATCHDOG:
                timeout = self._settings.receive_timeout_seconds
                if self._state != "open" or \
                        received_ns < self._progress_ns + int(timeout * 1e9):
                    continue
                message = f"no frame from the bot within {timeout:g} s"
                yield EndpointEvent("error", self._context.clock_ns(), text=message, data={
                    "code": "receive_timeout", "message": message, "origin": "adapter"})
                await self._shutdown("adapter", f"receive timeout ({timeout:g} s)")
                continue
            if isinstance(item, Closure):
                for event in self._decoder.flush_audio() + self._closure_events(received_ns,
                                                                                 item):
                    yield event
                self._events_finished = True
                return
            self._progress_ns = received_ns
            for event in self._decoder.decode(received_ns, item):
                yield event
            if self._decoder.holds_audio:
                self._quiet.arm()

    def _closure_events(self, received_ns: int, closure: Closure) -> list[EndpointEvent]:
        self._state = "closed"
        self._quiet.cancel()
        self._watchdog.cancel()
        initiator = self._close_initiator
        reason = self._close_reason or self._scrubber.scrub_text(closure.reason)
        events: list[EndpointEvent] = []
        if initiator is None:
            initiator = "adapter" if closure.local_failure else "product"
            # a bot ends a call by closing the socket: no turn is ever "pending" on this wire
            unexpected = closure_error(closure, reason=reason, mid_turn=False,
                                       max_message_bytes=self._settings.max_message_bytes)
            if unexpected is not None:
                message = self._scrubber.scrub_text(unexpected.message)
                events.append(EndpointEvent("error", received_ns, text=message, data={
                    "code": unexpected.code, "message": message, "origin": "adapter"}))
        reason = reason or ("closed by the evaluator" if initiator == "evaluator"
                            else "connection closed")
        events.append(EndpointEvent("closed", received_ns, data={
            "reason": reason, "code": closure.code, "initiated_by": initiator}))
        logger.info("connection to %s closed by %s (code %s: %s)", self._where(), initiator,
                    closure.code, reason)
        return events

    # --- closing -------------------------------------------------------------------------

    async def _shutdown(self, initiator: str, reason: str) -> None:
        if self._close_initiator is None and not self._closure_received():
            self._close_initiator, self._close_reason = initiator, reason
        if self._state == "open":
            self._state = "closing"
        if self._ws is not None:
            await self._ws.close(1000, reason)  # the closure follows in the inbox
        elif not self._closure_enqueued:
            self._closure_enqueued = True
            self._queue.put_nowait((self._context.clock_ns(), Closure(1000, reason)))

    async def close(self) -> None:
        """Close the connection (code 1000) and stop receiving; idempotent, never raises."""
        if self._state == "closed" and self._closure_received():
            return
        try:
            await self._shutdown("evaluator", "closed by the evaluator")
        except Exception as error:  # noqa: BLE001
            logger.debug("close() swallowed %s", type(error).__name__)
        finally:
            self._state = "closed"
            self._quiet.cancel()
            self._watchdog.cancel()

    async def __aenter__(self) -> PipecatEndpoint:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
