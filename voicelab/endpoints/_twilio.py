"""The Twilio Media Streams adapter (``adapter: twilio``): voicelab plays Twilio's part.

A bot built for Twilio (``<Connect><Stream>``) runs a WebSocket server; Twilio connects to it,
says ``connected`` and ``start``, streams the caller's audio as ``media`` messages (20 ms of
8 kHz mu-law each), and plays what the bot sends back. This adapter connects the same way and
speaks the same messages (see :mod:`._twilio_wire`), so such a bot is tested unchanged.

* **The caller's line.** Twilio products take turns by listening (``turn_taking`` is
  ``server_vad``): the runner hands :meth:`TwilioEndpoint.send_audio` the live line every
  ``chunk_ms``; the adapter cuts it into exact 20 ms mu-law frames (a remainder waits for the
  next call) and sends one every 20 ms, as Twilio does, whatever ``chunk_ms`` is: frame ``n``
  goes out ``n * 20 ms`` after the line started, or at once when the line is behind.
* **Marks** are echoed when the audio sent before them has *played* on the listener's clock
  (``context.playback``), not when they arrive; echoes keep the marks' order.
* **clear** drops the product audio not yet played: an ``interruption`` event with
  ``flush: true`` (the recording flushes the listener and records ``dropped_ms``), and the marks
  still pending are echoed at once, as Twilio does.
* A normal close by the product (1000/1001) is the bot hanging up: ``conversation_complete``
  then ``closed``. Other closures and failures map to events as in the protocol v1 adapter.

The connection stamps each message with the trial clock as the loop reads it (:mod:`._socket`);
decoding happens in :meth:`TwilioEndpoint.events`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

from pydantic import Field, ValidationInfo, field_validator

from ..audio import PcmAudio
from ._inbox import Closure, MessageInbox, SocketClosed, closure_error
from ._protocol import EndpointContext, EndpointError, EndpointEvent, Playback
from ._settings import AdapterSettings, auth_headers, parse_settings, redacted_url, secret_values
from ._socket import WebSocketConnection, open_websocket
from ._twilio_audio import FRAME_MS, LineDecoder
from ._twilio_line import CallerLine
from ._twilio_playback import ArrivalPlayback
from ._twilio_wire import (
    SID_PATTERNS,
    SID_PREFIXES,
    CallerStream,
    ProductClear,
    ProductDecoder,
    ProductMark,
    ProductMedia,
    StreamIdentity,
    check_digits,
    custom_parameters,
    generated_sid,
)

logger = logging.getLogger(__name__)

USER_AGENT = "voicelab-evaluator (twilio media streams)"
_WATCHDOG = object()  # queued when the receive timeout fires


class TwilioSettings(AdapterSettings):
    uri: Annotated[str, Field(min_length=1)]
    headers: dict[str, str] = Field(default_factory=dict)
    #: generated per trial when not given (``AC``/``CA``/``MZ`` and 32 hex digits)
    account_sid: str | None = None
    call_sid: str | None = None
    stream_sid: str | None = None
    #: added to the run data in ``start.customParameters`` (these win a clash)
    custom_parameters: dict[str, Any] = Field(default_factory=dict)
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    #: the longest the product may send nothing at all while the call is up
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 60.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    #: how often the runner hands over line audio (its default); the wire is 20 ms regardless
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 100.0

    @field_validator("uri")
    @classmethod
    def _websocket_scheme(cls, value: str) -> str:
        if not value.startswith(("ws://", "wss://")):
            raise ValueError("must be a ws:// or wss:// URI")
        return value

    @field_validator("account_sid", "call_sid", "stream_sid")
    @classmethod
    def _sid_form(cls, value: str | None, info: ValidationInfo) -> str | None:
        name = str(info.field_name)
        if value is not None and not re.match(SID_PATTERNS[name], value):
            raise ValueError(f"must be {SID_PREFIXES[name]} followed by 32 hex digits")
        return value

    def identity(self, context: EndpointContext) -> StreamIdentity:
        """The SIDs of the call: as configured, else generated from the trial's session."""
        trial = (context.session_id, context.trial_index)
        return StreamIdentity(
            account_sid=self.account_sid or generated_sid("AC", "voicelab account"),
            call_sid=self.call_sid or generated_sid("CA", *trial, "call"),
            stream_sid=self.stream_sid or generated_sid("MZ", *trial, "stream"))


class TwilioEndpoint:
    """voicelab as Twilio's media-stream service, connected to the product's WebSocket."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": True,  # the product's own clear
        "tool_events": False,
        "input_transcripts": False,
    }
    #: the codec this wire carries: an environment's channel line with this codec codes once,
    #: here, and only loses, delays and conceals packets itself (see docs/channel.md)
    wire_codec = "mulaw"

    def __init__(self, settings: Mapping[str, Any] | TwilioSettings, context: EndpointContext):
        self._settings = parse_settings(TwilioSettings, settings)
        self._context = context
        self._uri = self._settings.uri
        self._scrubber = context.scrubber.with_values(
            secret_values(self._settings.headers, None, uri=self._uri))
        self.identity = self._settings.identity(context)
        self._stream = CallerStream(self.identity, parameters=custom_parameters(
            context.data, self._settings.custom_parameters), frame_ms=FRAME_MS)
        self._decoder = ProductDecoder(self._scrubber, stream_sid=self.identity.stream_sid)
        self._line_in = LineDecoder()
        # outside a trial there is no listener: play the product's audio on our own clock
        self._own_playback: ArrivalPlayback | None = None
        playback = context.playback
        if playback is None:
            playback = self._own_playback = ArrivalPlayback(context.clock_ns)
        self._playback: Playback = playback
        self._queue = MessageInbox()  # (received ns, message | Closure | _WATCHDOG)
        self._ws: WebSocketConnection | None = None
        self._state = "new"  # new -> open -> closing -> closed
        self._closure_enqueued = False  # when never connected, close() enqueues one itself
        self._events_finished = False
        self._close_initiator: str | None = None
        self._close_reason: str | None = None
        self._progress_ns = 0  # when the last product message arrived (or the call started)
        self._watchdog: asyncio.TimerHandle | None = None
        self._line = CallerLine(self._stream, self._send_quietly, clock_ns=context.clock_ns)
        # the product's side: samples delivered as audio_delta, marks waiting for playback
        self._delivered_samples = 0
        self._marks: deque[tuple[str, int]] = deque()  # (name, samples delivered before it)
        self._echoer: asyncio.Task[None] | None = None

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        parse_settings(TwilioSettings, settings)

    @classmethod
    def turn_taking(cls, settings: Mapping[str, Any]) -> str:
        """A Twilio bot listens: it detects the end of the caller's speech itself."""
        return "server_vad"

    @property
    def settings(self) -> TwilioSettings:
        return self._settings

    @property
    def custom_parameters(self) -> dict[str, str]:
        """What ``start.customParameters`` carries."""
        return dict(self._stream.parameters)

    # --- connection ----------------------------------------------------------------------

    def _where(self) -> str:
        return self._scrubber.scrub_text(redacted_url(self._uri))

    async def connect(self) -> None:
        """Open the socket, send ``connected`` and ``start``, start receiving.

        Raises :class:`EndpointError` (``connection_refused``, ``handshake_rejected``,
        ``connect_timeout``, ``connection_failed``, ``handshake_failed``, ``connection_closed``)
        before the call is up; later problems arrive as ``error``/``closed`` events.
        """
        if self._state != "new":
            raise EndpointError("connect() may be called once", code="already_connected")
        settings = self._settings
        headers = auth_headers(settings.headers, None, self._context.traceparent)
        where = self._where()
        ws = await open_websocket(self._uri, headers=headers,
                                  connect_timeout_seconds=settings.connect_timeout_seconds,
                                  max_message_bytes=settings.max_message_bytes,
                                  clock_ns=self._context.clock_ns, inbox=self._queue,
                                  where=where, scrubber=self._scrubber, user_agent=USER_AGENT)
        self._ws = ws
        self._state = "open"
        self._line.warm_up()
        try:
            await ws.send(self._stream.connected())
            await ws.send(self._stream.start())
        except SocketClosed:
            await self.close()
            raise EndpointError(f"{where} closed the connection before the stream started",
                                code="connection_closed") from None
        self._progress_ns = self._context.clock_ns()
        logger.info("media stream %s open with %s (session %s)", self.identity.stream_sid,
                    where, self._context.session_id)

    def _closure_received(self) -> bool:
        return self._closure_enqueued or (self._ws is not None and self._ws.closed)

    # --- sending -------------------------------------------------------------------------

    def _require_open(self) -> None:
        if self._ws is None or self._state != "open" or self._line.broken or self._ws.closed:
            raise EndpointError("the connection to the product is closed", code="connection_closed")

    def _product_hung_up(self) -> bool:
        """The product closed the stream normally (1000/1001): the call is over, not broken."""
        closure = self._ws.closure if self._ws is not None else None
        return closure is not None and self._close_initiator is None and \
            not closure.local_failure and closure.code in (1000, 1001)

    async def _send_quietly(self, message: str) -> bool:
        """Send from a background task or ``events()``: a lost connection shows up as the
        closing events, not as an exception here."""
        ws = self._ws
        if ws is None or self._state != "open":
            return False
        try:
            await ws.send(message)
        except SocketClosed:
            logger.debug("could not send: the connection is closed")
            return False
        return True

    async def send_audio(self, audio: PcmAudio) -> None:
        """Queue ``audio`` (canonical PCM) as 20 ms ``media`` messages; never sleeps.

        Frame ``n`` of the line is due ``n * 20 ms`` after the line started, so a caller that
        hands over audio on time gets it sent in real time, and one that fell behind (up to a
        second) gets the overdue frames sent at once; after a longer pause the line starts over
        from now (see :mod:`._twilio_line`). A remainder shorter than a frame waits for the
        next call.

        Raises :class:`EndpointError` (``connection_closed``) once the connection is gone,
        except after the product hung up (closed normally): the audio is then dropped, as on a
        phone whose other end has hung up, and ``events()`` says the conversation is complete.
        """
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        if self._product_hung_up():
            return  # a caller still talking after the bot hung up: nothing to send it to
        self._require_open()
        self._line.queue_audio(audio.samples)

    async def send_dtmf(self, digits: str) -> None:
        """Press ``digits`` (0-9, ``*``, ``#``) on the caller's phone: one ``dtmf`` message a
        digit, sent in order right after the line audio already queued."""
        check_digits(digits)
        if self._product_hung_up():
            return
        self._require_open()
        self._line.queue_digits(digits)

    async def commit_turn(self) -> None:
        """Never called in ``server_vad`` mode (the product detects turns); does nothing."""
        logger.debug("commit_turn() ignored: a Twilio product detects the caller's turns")

    async def interrupt(self) -> None:
        """Never called in ``server_vad`` mode (a caller barges in by speaking); does nothing."""
        logger.debug("interrupt() ignored: on a phone line the caller can only speak")

    # --- marks -----------------------------------------------------------------------------

    async def _echo_marks(self) -> None:
        """Echo each pending mark once its audio has played, oldest first."""
        while self._marks:
            name, samples = self._marks[0]
            await self._playback.until_played(samples)
            self._marks.popleft()
            if not await self._send_quietly(self._stream.mark(name)):
                return
            logger.debug("mark %r echoed after %d samples played", name, samples)

    async def _echo_marks_now(self) -> None:
        """A clear: every pending mark is echoed at once, in order."""
        if self._echoer is not None:
            self._echoer.cancel()  # it waits for playback; a mark it popped is already sent
            self._echoer = None
        while self._marks:
            name, _ = self._marks.popleft()
            if not await self._send_quietly(self._stream.mark(name)):
                return

    # --- receiving -----------------------------------------------------------------------

    async def events(self) -> AsyncIterator[EndpointEvent]:
        """Normalized events in arrival order; the last one is ``closed``. One consumer only."""
        if self._events_finished:
            return
        timeout = self._settings.receive_timeout_seconds
        queue = self._queue
        while True:
            if queue.empty():
                self._arm_watchdog()
                received_ns, item = await queue.get()
            else:
                received_ns, item = queue.get_nowait()
            if item is _WATCHDOG:
                if not self._timed_out():
                    continue
                message = f"no product message within {timeout:g} s"
                yield EndpointEvent("error", self._context.clock_ns(), text=message, data={
                    "code": "receive_timeout", "message": message, "origin": "adapter"})
                await self._shutdown("adapter", f"receive timeout ({timeout:g} s)")
                continue
            self._progress_ns = received_ns
            if isinstance(item, Closure):
                for event in self._closure_events(received_ns, item):
                    yield event
                self._events_finished = True
                return
            for event in await self._decode(received_ns, item):
                yield event

    async def _decode(self, received_ns: int, message: str | bytes) -> list[EndpointEvent]:
        decoded = self._decoder.decode(received_ns, message)
        if isinstance(decoded, EndpointEvent):
            return [decoded]
        if isinstance(decoded, ProductMedia):
            pcm = self._line_in.push(decoded.payload)
            self._delivered_samples += pcm.size
            if self._own_playback is not None:
                self._own_playback.hear(pcm.size, received_ns)
            return [EndpointEvent("audio_delta", received_ns, audio=PcmAudio(pcm).to_bytes(),
                                  raw=decoded.raw)]
        if isinstance(decoded, ProductMark):
            position = self._delivered_samples
            self._marks.append((decoded.name, position))
            if self._echoer is None or self._echoer.done():
                self._echoer = asyncio.create_task(self._echo_marks(),
                                                   name="voicelab-twilio-marks")
            return [EndpointEvent("raw", received_ns, raw=decoded.raw,
                                  data={"mark": decoded.name, "after_samples": position})]
        assert isinstance(decoded, ProductClear)
        self._line_in.reset()  # what the filter still holds belongs to the dropped audio
        if self._own_playback is not None:
            self._own_playback.clear(received_ns)
        await self._echo_marks_now()
        return [EndpointEvent("interruption", received_ns, raw=decoded.raw,
                              data={"flush": True, "reason": "clear"})]

    # The receive timeout: one timer per quiet period, armed while the call is up.

    def _timed_out(self) -> bool:
        quiet_ns = self._context.clock_ns() - self._progress_ns
        return self._state == "open" and quiet_ns >= self._settings.receive_timeout_seconds * 1e9

    def _arm_watchdog(self) -> None:
        if self._watchdog is not None or self._state != "open":
            return
        quiet_s = (self._context.clock_ns() - self._progress_ns) / 1e9
        delay = max(0.0, self._settings.receive_timeout_seconds - quiet_s)
        self._watchdog = asyncio.get_running_loop().call_later(delay, self._watchdog_fired)

    def _watchdog_fired(self) -> None:
        self._watchdog = None
        if self._timed_out():
            self._queue.put_nowait((self._context.clock_ns(), _WATCHDOG))
        else:
            self._arm_watchdog()

    def _closure_events(self, received_ns: int, closure: Closure) -> list[EndpointEvent]:
        self._state = "closed"
        self._stop_tasks()
        initiator = self._close_initiator
        reason = self._close_reason or self._scrubber.scrub_text(closure.reason)
        events: list[EndpointEvent] = []
        if initiator is None:
            initiator = "adapter" if closure.local_failure else "product"
            unexpected = closure_error(closure, reason=reason, mid_turn=False,
                                       max_message_bytes=self._settings.max_message_bytes)
            if unexpected is not None:
                message = self._scrubber.scrub_text(unexpected.message)
                events.append(EndpointEvent("error", received_ns, text=message, data={
                    "code": unexpected.code, "message": message, "origin": "adapter"}))
            elif initiator == "product":  # the bot hung up
                events.append(EndpointEvent("conversation_complete", received_ns,
                                            data={"reason": "the product closed the stream"}))
        reason = reason or ("closed by the evaluator" if initiator == "evaluator"
                            else "connection closed")
        events.append(EndpointEvent("closed", received_ns, data={
            "reason": reason, "code": closure.code, "initiated_by": initiator}))
        logger.info("media stream to %s closed by %s (code %s: %s)", self._where(), initiator,
                    closure.code, reason)
        return events

    # --- closing -------------------------------------------------------------------------

    def _stop_tasks(self) -> None:
        """The line and the mark echoes end with the call (queued audio is not sent)."""
        self._line.stop()
        if self._echoer is not None and not self._echoer.done():
            self._echoer.cancel()
        self._marks.clear()

    async def _shutdown(self, initiator: str, reason: str) -> None:
        if self._close_initiator is None and not self._closure_received():
            self._close_initiator, self._close_reason = initiator, reason
        self._stop_tasks()
        if self._state == "open":
            self._state = "closing"
        if self._ws is not None:
            await self._ws.close(1000, reason)  # the closure follows in the inbox
        elif not self._closure_enqueued:
            self._closure_enqueued = True
            self._queue.put_nowait((self._context.clock_ns(), Closure(1000, reason)))

    async def close(self) -> None:
        """Hang up: ``stop``, then close the connection (code 1000); idempotent, never raises."""
        if self._state == "closed" and self._closure_received():
            return
        try:
            if self._state == "open" and self._ws is not None and not self._ws.closed:
                self._stop_tasks()
                with contextlib.suppress(SocketClosed):
                    await self._ws.send(self._stream.stop())
            await self._shutdown("evaluator", "closed by the evaluator")
        except Exception as error:  # noqa: BLE001
            logger.debug("close() swallowed %s", type(error).__name__)
        finally:
            self._state = "closed"
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None

    async def __aenter__(self) -> TwilioEndpoint:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
