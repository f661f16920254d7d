"""The built-in WebSocket adapter (``adapter: websocket``): protocol v1 over a real socket.

The socket's life, the inbox and the receive timeout are shared with every WebSocket adapter
(:mod:`.._socket_endpoint`); this one decodes protocol v1 (:mod:`._wire`) and runs the receive
timeout only while a response is pending.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from ...audio import PcmAudio
from .._abilities import EndpointSettings
from .._protocol import EndpointContext, EndpointEvent, TurnTaking
from .._settings import AdapterSettings, auth_headers, parse_settings, secret_values
from .._socket_endpoint import SocketEndpoint, SocketSettings
from ._wire import (
    COMMIT,
    RESPONSE_CANCEL,
    RESPONSE_CREATE,
    WireV1Decoder,
    control_message,
    init_message,
)

logger = logging.getLogger(__name__)


class WebSocketSettings(SocketSettings):
    access_token: str | None = None
    #: ``client``: commit + response.create end each user turn; ``server_vad``: the product
    #: detects the end of the user's speech itself (no commit is ever sent)
    turn_taking: TurnTaking = "client"


class WebSocketEndpoint(SocketEndpoint):
    """Protocol v1 client: ``evaluator.init``, binary PCM, commit/create, cancel on barge-in."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": True,
        "tool_events": True,
        "input_transcripts": True,
        "output_transcripts": True,
    }
    #: ``endpoint.settings`` are parsed into this once, at ``validate``
    settings_model: ClassVar[type[AdapterSettings]] = WebSocketSettings
    USER_AGENT = "voicelab-evaluator (protocol v1)"
    EVENTS_CARRY_MESSAGE_STAMPS = True
    TIMEOUT_MESSAGE = "no product message within {timeout:g} s while a response was pending"

    def __init__(self, settings: Mapping[str, Any] | WebSocketSettings,
                 context: EndpointContext):
        self._settings: WebSocketSettings = parse_settings(WebSocketSettings, settings)
        self._scrubber = context.scrubber.with_values(
            secret_values(self._settings.headers, self._settings.access_token))
        super().__init__(context)
        self._decoder = WireV1Decoder(self._scrubber)
        self._commits = 0          # response.create messages sent
        self._answered = 0         # commits a non-cancelled response.done has answered
        self._in_response = False  # product output seen since the last turn_complete

    @classmethod
    def turn_taking(cls, settings: EndpointSettings) -> str:
        """The settings' ``turn_taking`` (a subclass with another settings model says its own)."""
        return parse_settings(WebSocketSettings, settings).turn_taking

    @property
    def settings(self) -> WebSocketSettings:
        return self._settings

    async def connect(self) -> None:
        """Open the socket (auth, ``traceparent``), send ``evaluator.init``, start receiving.

        Raises :class:`EndpointError` (``connection_refused``, ``handshake_rejected``,
        ``connect_timeout``, ``connection_failed``, ``handshake_failed``) before the connection is
        open; later problems arrive as ``error``/``closed`` events.
        """
        settings = self._settings
        await self._open(auth_headers(settings.headers, settings.access_token,
                                      self._context.traceparent))
        await self._send_first([init_message(self._context.data)],
                               before="evaluator.init was sent")
        logger.info("connected to %s (session %s)", self._where(), self._context.session_id)

    # --- sending -------------------------------------------------------------------------

    async def send_audio(self, audio: PcmAudio) -> None:
        """Send ``audio`` as binary frames of ``chunk_ms`` each; never sleeps (the runner paces)."""
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        self._open_connection()
        for frame in audio.chunks(self._settings.chunk_ms):
            await self._send(frame.to_bytes())

    async def commit_turn(self) -> None:
        """``input_audio_buffer.commit`` then ``response.create``; a response is now pending."""
        await self._send(control_message(COMMIT))
        # counted before sending: a fast reply may be decoded while the send is still awaited
        self._commits += 1
        self._progress_ns = self._context.clock_ns()
        self._watchdog.arm()
        await self._send(control_message(RESPONSE_CREATE))

    async def interrupt(self) -> None:
        """``response.cancel`` (barge-in); the runner then sends the user's turn as usual."""
        await self._send(control_message(RESPONSE_CANCEL))

    # --- receiving -----------------------------------------------------------------------

    def _receive_pending(self) -> bool:
        """A response is pending: commits not yet answered, or product output in progress."""
        return self._state == "open" and (self._answered < self._commits or self._in_response)

    def _mid_turn(self) -> bool:
        return self._receive_pending()

    async def _receive(self, received_ns: int, item: Any) -> list[EndpointEvent]:
        return self._receive_now(received_ns, item)

    def _receive_now(self, received_ns: int, item: Any) -> list[EndpointEvent]:
        events = self._decoder.decode(received_ns, item)
        for event in events:
            self._track(event)
        return events

    def _track(self, event: EndpointEvent) -> None:
        if event.type in ("audio_delta", "transcript_final", "tool_call", "tool_result"):
            self._in_response = True
        elif event.type == "turn_complete":
            self._in_response = False
            if event.data.get("status") != "cancelled":
                self._answered = self._commits
        elif event.type == "conversation_complete":
            self._in_response = False
            self._answered = self._commits
