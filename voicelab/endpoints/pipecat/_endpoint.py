"""The pipecat adapter (``adapter: pipecat``): a bot served with pipecat's WebSocket transport
and ``ProtobufFrameSerializer``, over a real socket.

A pipecat bot takes turns by listening, so this adapter is ``server_vad`` only: the runner
streams the user's line through :meth:`PipecatEndpoint.send_audio` for the whole call and never
commits a turn. The connection stamps each message as the loop reads it and puts it into the
adapter's bounded inbox (see :mod:`.._socket`); ``events()`` decodes on the consumer side (see
:mod:`._wire`), delivers the resampler's tail once the bot's audio has paused, and enforces
the receive timeout (one timer each, per quiet period).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field

from ...audio import PcmAudio
from .._abilities import EndpointSettings
from .._fields import JsonObject
from .._inbox import Closure
from .._protocol import EndpointContext, EndpointEvent
from .._settings import parse_settings, secret_values
from .._socket_endpoint import QuietTimer, SocketEndpoint, SocketSettings
from ._wire import OutboundAudio, PipecatDecoder, encode_frame, message_frame

logger = logging.getLogger(__name__)

_QUIET = object()  # queued when the bot's audio may have paused


class PipecatSettings(SocketSettings):
    #: the rate the user's audio is sent at (the bot's ``audio_in_sample_rate``); the bot's
    #: frames carry their own rate, and this one stands in when a frame leaves it unset
    sample_rate_hz: Annotated[int, Field(ge=8000, le=48000)] = 16000
    #: no frame at all from the bot for this long ends the call (``error{receive_timeout}``);
    #: a bot says nothing while the user talks, so this spans a turn plus its answer
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 60.0
    #: duration of each chunk of the user's line (the runner sends one every ``chunk_ms``)
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 20.0
    #: soxr's recipe for both directions (QQ, LQ, MQ, HQ, VHQ)
    resample_quality: Literal["QQ", "LQ", "MQ", "HQ", "VHQ"] = "HQ"
    #: JSON objects sent as message frames right after connecting, e.g. an RTVI
    #: ``client-ready`` for bots that wait for one before they greet
    connect_messages: list[JsonObject] = Field(default_factory=list)


class PipecatEndpoint(SocketEndpoint):
    """pipecat frames: the user's audio as ``audio`` frames at the bot's rate; the bot's audio,
    text, transcriptions, messages and interruptions back as normalized events."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": True,
        "tool_events": False,
        "input_transcripts": True,
        # the bot's text frames are read when it sends them; most pipelines do not (their TTS
        # takes the text), so a run cannot count on them
        "output_transcripts": False,
    }
    USER_AGENT = "voicelab-evaluator (pipecat frames)"
    TIMEOUT_MESSAGE = "no frame from the bot within {timeout:g} s"

    #: ``endpoint.settings`` are parsed into this once, at ``validate``
    settings_model = PipecatSettings

    def __init__(self, settings: Mapping[str, object] | PipecatSettings, context: EndpointContext):
        self._settings: PipecatSettings = parse_settings(PipecatSettings, settings)
        self._scrubber = context.scrubber.with_values(
            secret_values(self._settings.headers, None, uri=self._settings.uri))
        super().__init__(context)
        quality = self._settings.resample_quality
        self._outbound = OutboundAudio(sample_rate_hz=self._settings.sample_rate_hz,
                                       quality=quality)
        self._decoder = PipecatDecoder(self._scrubber, sample_rate_hz=self._settings.sample_rate_hz,
                                       quality=quality)
        clock = context.clock_ns
        self._quiet = QuietTimer(clock, lambda: self._decoder.last_audio_ns,
                                 lambda: self._decoder.quiet_ns,
                                 lambda: self._queue.put_nowait((clock(), _QUIET)))

    @classmethod
    def turn_taking(cls, settings: EndpointSettings) -> str:
        return "server_vad"  # a pipecat bot detects the end of the user's speech itself

    @property
    def settings(self) -> PipecatSettings:
        return self._settings

    async def connect(self) -> None:
        """Open the socket (configured headers, ``traceparent``), send ``connect_messages``.

        Raises :class:`EndpointError` (``connection_refused``, ``handshake_rejected``,
        ``connect_timeout``, ``connection_failed``, ``handshake_failed``) before the connection is
        open; later problems arrive as ``error``/``closed`` events.
        """
        settings = self._settings
        await self._open({**settings.headers, "traceparent": self._context.traceparent})
        await self._send_first([message_frame(message) for message in settings.connect_messages],
                               before="the connect messages were sent")
        logger.info("connected to %s (session %s)", self._where(), self._context.session_id)

    # --- sending -------------------------------------------------------------------------

    async def send_audio(self, audio: PcmAudio) -> None:
        """The next chunk of the user's line (canonical PCM), resampled to ``sample_rate_hz``
        and sent as an ``audio`` frame; never sleeps (the runner paces)."""
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        self._open_connection()
        for frame in self._outbound.frames(audio):
            await self._send(frame)

    async def commit_turn(self) -> None:
        """Nothing to send: the bot hears the end of the user's turn itself."""
        self._open_connection()

    async def interrupt(self) -> None:
        """An ``interruption`` frame: pipecat's serializer takes one from the client as a request
        to stop the bot's output. (A user on a live line barges in by speaking instead.)"""
        await self._send(encode_frame("interruption"))

    # --- receiving -----------------------------------------------------------------------

    async def _receive(self, received_ns: int, item: object) -> list[EndpointEvent]:
        if item is _QUIET:  # the bot's audio paused: deliver what the resampler still holds
            decoder = self._decoder
            if decoder.holds_audio and received_ns >= decoder.last_audio_ns + decoder.quiet_ns:
                return decoder.flush_audio()
            return []
        if not isinstance(item, str | bytes):  # the socket delivers text or binary messages
            return []
        events = self._decoder.decode(received_ns, item)
        if self._decoder.holds_audio:
            self._quiet.arm()
        return events

    def _closure_events(self, received_ns: int, closure: Closure) -> list[EndpointEvent]:
        return self._decoder.flush_audio() + super()._closure_events(received_ns, closure)

    def _stop(self) -> None:
        self._quiet.cancel()
        super()._stop()
