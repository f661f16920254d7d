"""The Twilio Media Streams adapter (``adapter: twilio``): voicelab plays Twilio's part.

A bot built for Twilio (``<Connect><Stream>``) runs a WebSocket server; Twilio connects to it,
says ``connected`` and ``start``, streams the user's audio as ``media`` messages (20 ms of
8 kHz mu-law each), and plays what the bot sends back. This adapter connects the same way and
speaks the same messages (see :mod:`._wire`), so such a bot is tested unchanged.

* **The user's line.** Twilio products take turns by listening (``turn_taking`` is
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

The connection stamps each message with the trial clock as the loop reads it (:mod:`.._socket`);
decoding happens in :meth:`TwilioEndpoint.events`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import deque
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, ValidationInfo, field_validator

from ...audio import PcmAudio
from .._abilities import EndpointSettings
from .._g711_line import FRAME_MS, LINE_LATENCY_MS, LineDecoder
from .._inbox import SocketClosed
from .._protocol import EndpointContext, EndpointError, EndpointEvent, Playback
from .._settings import auth_headers, parse_settings, secret_values
from .._socket import WebSocketConnection
from .._socket_endpoint import SocketEndpoint, SocketSettings
from ._line import CallerLine
from ._playback import ArrivalPlayback
from ._wire import (
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
    trace_parameters,
)

logger = logging.getLogger(__name__)

class TwilioSettings(SocketSettings):
    #: generated per trial when not given (``AC``/``CA``/``MZ`` and 32 hex digits)
    account_sid: str | None = None
    call_sid: str | None = None
    stream_sid: str | None = None
    #: added to the run data in ``start.customParameters`` (these win a clash)
    custom_parameters: dict[str, Any] = Field(default_factory=dict)
    #: the longest the product may send nothing at all while the call is up
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 60.0

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


class TwilioEndpoint(SocketEndpoint):
    """voicelab as Twilio's media-stream service, connected to the product's WebSocket."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": True,  # the product's own clear
        "tool_events": False,
        "input_transcripts": False,
        "output_transcripts": False,  # Twilio's wire carries audio only
    }
    #: the codec this wire carries: an environment's channel line with this codec codes once,
    #: here, and only loses, delays and conceals packets itself (see docs/channel.md)
    wire_codec = "mulaw"
    #: the rate conversion's constant group delay each way (voicelab's own processing)
    conversion_delay_ms = {"to_product": LINE_LATENCY_MS, "to_user": LINE_LATENCY_MS}
    USER_AGENT = "voicelab-evaluator (twilio media streams)"
    #: every media, mark and clear event carries its message's stamp (the hang-up's events are
    #: no timed arrival): a ``ws://`` stream read with the kernel's stamps is judged by them
    EVENTS_CARRY_MESSAGE_STAMPS = True

    #: ``endpoint.settings`` are parsed into this once, at ``validate``
    settings_model = TwilioSettings

    def __init__(self, settings: Mapping[str, object] | TwilioSettings, context: EndpointContext):
        self._settings: TwilioSettings = parse_settings(TwilioSettings, settings)
        self._scrubber = context.scrubber.with_values(
            secret_values(self._settings.headers, None, uri=self._settings.uri))
        super().__init__(context)
        self.identity = self._settings.identity(context)
        self._stream = CallerStream(self.identity, parameters=custom_parameters(
            context.data, {**self._settings.custom_parameters,
                           **trace_parameters(context.traceparent, self._settings.headers)}),
            frame_ms=FRAME_MS)
        self._decoder = ProductDecoder(self._scrubber, stream_sid=self.identity.stream_sid)
        self._line_in = LineDecoder()
        # outside a trial there is no listener: play the product's audio on our own clock
        self._own_playback: ArrivalPlayback | None = None
        playback = context.playback
        if playback is None:
            playback = self._own_playback = ArrivalPlayback(context.clock_ns)
        self._playback: Playback = playback
        self._line = CallerLine(self._stream, self._send_quietly, clock_ns=context.clock_ns)
        # the product's side: samples delivered as audio_delta, marks waiting for playback
        self._delivered_samples = 0
        self._marks: deque[tuple[str, int]] = deque()  # (name, samples delivered before it)
        self._echoer: asyncio.Task[None] | None = None

    @classmethod
    def turn_taking(cls, settings: EndpointSettings) -> str:
        """A Twilio bot listens: it detects the end of the user's speech itself."""
        return "server_vad"

    @property
    def settings(self) -> TwilioSettings:
        return self._settings

    @property
    def custom_parameters(self) -> dict[str, str]:
        """What ``start.customParameters`` carries."""
        return dict(self._stream.parameters)

    async def connect(self) -> None:
        """Open the socket, send ``connected`` and ``start``, start receiving.

        Raises :class:`EndpointError` (``connection_refused``, ``handshake_rejected``,
        ``connect_timeout``, ``connection_failed``, ``handshake_failed``, ``connection_closed``)
        before the call is up; later problems arrive as ``error``/``closed`` events.
        """
        await self._open(auth_headers(self._settings.headers, None, self._context.traceparent))
        self._line.warm_up()
        await self._send_first([self._stream.connected(), self._stream.start()],
                               before="the stream started")
        self._progress_ns = self._context.clock_ns()
        logger.info("media stream %s open with %s (session %s)", self.identity.stream_sid,
                    self._where(), self._context.session_id)

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
        from now (see :mod:`._line`). A remainder shorter than a frame waits for the
        next call.

        Raises :class:`EndpointError` (``connection_closed``) once the connection is gone,
        except after the product hung up (closed normally): the audio is then dropped, as on a
        phone whose other end has hung up, and ``events()`` says the conversation is complete.
        """
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        if self._product_hung_up():
            return  # a user still talking after the bot hung up: nothing to send it to
        self._require_open()
        self._line.queue_audio(audio.samples)

    async def send_dtmf(self, digits: str) -> None:
        """Press ``digits`` (0-9, ``*``, ``#``) on the user's phone: one ``dtmf`` message a
        digit, sent in order right after the line audio already queued."""
        check_digits(digits)
        if self._product_hung_up():
            return
        self._require_open()
        self._line.queue_digits(digits)

    async def commit_turn(self) -> None:
        """Never called in ``server_vad`` mode (the product detects turns); does nothing."""
        logger.debug("commit_turn() ignored: a Twilio product detects the user's turns")

    async def interrupt(self) -> None:
        """Never called in ``server_vad`` mode (a user barges in by speaking); does nothing."""
        logger.debug("interrupt() ignored: on a phone line the user can only speak")

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

    async def _receive(self, received_ns: int, item: object) -> list[EndpointEvent]:
        if not isinstance(item, str | bytes):  # the socket delivers text or binary messages
            return []
        return await self._decode(received_ns, item)

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

    def _product_hung_up_events(self, received_ns: int) -> list[EndpointEvent]:
        return [EndpointEvent("conversation_complete", received_ns,
                              data={"reason": "the product closed the stream"})]

    # --- closing -------------------------------------------------------------------------

    def _stop(self) -> None:
        """The line and the mark echoes end with the call (queued audio is not sent)."""
        self._line.stop()
        if self._echoer is not None and not self._echoer.done():
            self._echoer.cancel()
        self._marks.clear()
        super()._stop()

    async def _shutdown(self, initiator: str, reason: str) -> None:
        self._stop()
        await super()._shutdown(initiator, reason)

    async def _hang_up(self, ws: WebSocketConnection) -> None:
        """Hang up as Twilio does: ``stop``, then the close."""
        self._stop()
        with contextlib.suppress(SocketClosed):
            await ws.send(self._stream.stop())
