"""The built-in WebSocket adapter (``adapter: websocket``): protocol v1 over a real socket.

The connection stamps each message with the trial clock as the loop reads it and puts it into
the adapter's bounded inbox, nothing else (see :mod:`._socket`). ``events()`` decodes on the
consumer side (see :mod:`._wire`) and enforces the receive timeout while a response is pending
(one timer per quiet period).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

from pydantic import Field, field_validator

from ..audio import PcmAudio
from ._protocol import EndpointContext, EndpointError, EndpointEvent, TurnTaking
from ._settings import (
    AdapterSettings,
    auth_headers,
    parse_settings,
    redacted_url,
    secret_values,
)
from ._socket import (
    Closure,
    MessageInbox,
    SocketClosed,
    WebSocketConnection,
    closure_error,
    open_websocket,
)
from ._wire import (
    COMMIT,
    RESPONSE_CANCEL,
    RESPONSE_CREATE,
    WireV1Decoder,
    control_message,
    init_message,
)

logger = logging.getLogger(__name__)

_WATCHDOG = object()  # queued when the receive timeout fires

USER_AGENT = "voicelab-evaluator (protocol v1)"


class WebSocketSettings(AdapterSettings):
    uri: Annotated[str, Field(min_length=1)]
    headers: dict[str, str] = Field(default_factory=dict)
    access_token: str | None = None
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 100.0
    #: ``client``: commit + response.create end each user turn; ``server_vad``: the product
    #: detects the end of the user's speech itself (no commit is ever sent)
    turn_detection: TurnTaking = "client"

    @field_validator("uri")
    @classmethod
    def _websocket_scheme(cls, value: str) -> str:
        if not value.startswith(("ws://", "wss://")):
            raise ValueError("must be a ws:// or wss:// URI")
        return value


class WebSocketEndpoint:
    """Protocol v1 client: ``evaluator.init``, binary PCM, commit/create, cancel on barge-in."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": True,
        "tool_events": True,
        "input_transcripts": True,
    }

    def __init__(self, settings: Mapping[str, Any] | WebSocketSettings,
                 context: EndpointContext):
        self._settings = parse_settings(WebSocketSettings, settings)
        self._context = context
        self._uri = self._settings.uri
        self._scrubber = context.scrubber.with_values(
            secret_values(self._settings.headers, self._settings.access_token))
        self._decoder = WireV1Decoder(self._scrubber)
        self._queue = MessageInbox()  # (received ns, message | Closure | _WATCHDOG)
        self._ws: WebSocketConnection | None = None
        self._state = "new"  # new -> open -> closing -> closed
        self._closure_enqueued = False  # when never connected, close() enqueues one itself
        self._events_finished = False
        self._close_initiator: str | None = None
        self._close_reason: str | None = None
        self._commits = 0          # response.create messages sent
        self._answered = 0         # commits a non-cancelled response.done has answered
        self._in_response = False  # product output seen since the last turn_complete
        self._progress_ns = 0      # when the last message arrived, or the last commit was sent
        self._watchdog: asyncio.TimerHandle | None = None

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        parse_settings(WebSocketSettings, settings)

    @classmethod
    def turn_taking(cls, settings: Mapping[str, Any]) -> str:
        return str(settings.get("turn_detection", "client"))

    @property
    def settings(self) -> WebSocketSettings:
        return self._settings

    # --- connection ----------------------------------------------------------------------

    def _where(self) -> str:
        return self._scrubber.scrub_text(redacted_url(self._uri))

    def _connect_error(self, code: str, message: str) -> EndpointError:
        return EndpointError(self._scrubber.scrub_text(message), code=code)

    async def connect(self) -> None:
        """Open the socket (auth, ``traceparent``), send ``evaluator.init``, start receiving.

        Raises :class:`EndpointError` (``connection_refused``, ``handshake_rejected``,
        ``connect_timeout``, ``connection_failed``, ``handshake_failed``) before the connection is
        open; later problems arrive as ``error``/``closed`` events.
        """
        if self._state != "new":
            raise EndpointError("connect() may be called once", code="already_connected")
        settings = self._settings
        headers = auth_headers(settings.headers, settings.access_token, self._context.traceparent)
        where = self._where()
        timeout = settings.connect_timeout_seconds
        # From here on the connection stamps and enqueues each message as it arrives (see
        # ._socket); decoding happens in events().
        ws = await open_websocket(self._uri, headers=headers, connect_timeout_seconds=timeout,
                                  max_message_bytes=settings.max_message_bytes,
                                  clock_ns=self._context.clock_ns, inbox=self._queue,
                                  where=where, scrubber=self._scrubber, user_agent=USER_AGENT)
        self._ws = ws
        self._state = "open"
        try:
            await ws.send(init_message(self._context.data))
        except SocketClosed:
            await self.close()
            raise self._connect_error("connection_closed", f"{where} closed the connection "
                                      f"before evaluator.init was sent") from None
        logger.info("connected to %s (session %s)", where, self._context.session_id)

    def _closure_received(self) -> bool:
        return self._closure_enqueued or (self._ws is not None and self._ws.closed)

    # --- sending -------------------------------------------------------------------------

    async def _send(self, message: str | bytes) -> None:
        ws = self._ws
        if ws is None or self._state != "open":
            raise EndpointError("the connection to the product is closed", code="connection_closed")
        try:
            await ws.send(message)
        except SocketClosed:
            raise EndpointError("the connection to the product is closed",
                                code="connection_closed") from None

    async def send_audio(self, audio: PcmAudio) -> None:
        """Send ``audio`` as binary frames of ``chunk_ms`` each; never sleeps (the runner paces)."""
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        if self._ws is None or self._state != "open":
            raise EndpointError("the connection to the product is closed", code="connection_closed")
        for frame in audio.chunks(self._settings.chunk_ms):
            await self._send(frame.to_bytes())

    async def commit_turn(self) -> None:
        """``input_audio_buffer.commit`` then ``response.create``; a response is now pending."""
        await self._send(control_message(COMMIT))
        # counted before sending: a fast reply may be decoded while the send is still awaited
        self._commits += 1
        self._progress_ns = self._context.clock_ns()
        self._arm_watchdog()
        await self._send(control_message(RESPONSE_CREATE))

    async def interrupt(self) -> None:
        """``response.cancel`` (barge-in); the runner then sends the user's turn as usual."""
        await self._send(control_message(RESPONSE_CANCEL))

    # --- receiving -----------------------------------------------------------------------

    def _awaiting_response(self) -> bool:
        return self._state == "open" and (self._answered < self._commits or self._in_response)

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
            else:  # the common case under load: no waiting at all
                received_ns, item = queue.get_nowait()
            if item is _WATCHDOG:
                if not self._timed_out():
                    continue  # progress since the watchdog fired, or no response is pending
                message = f"no product message within {timeout:g} s while a response was pending"
                yield self._event("error", text=message, data={
                    "code": "receive_timeout", "message": message, "origin": "adapter"})
                await self._shutdown("adapter", f"receive timeout ({timeout:g} s)")
                continue
            self._progress_ns = received_ns
            if isinstance(item, Closure):
                for event in self._closure_events(received_ns, item):
                    yield event
                self._events_finished = True
                return
            for event in self._decoder.decode(received_ns, item):
                self._track(event)
                yield event

    # The receive timeout: one timer per quiet period instead of one per message. It runs while
    # a response is pending and fires when no message arrived for receive_timeout_seconds.

    def _timed_out(self) -> bool:
        quiet_ns = self._context.clock_ns() - self._progress_ns
        return self._awaiting_response() and \
            quiet_ns >= self._settings.receive_timeout_seconds * 1e9

    def _arm_watchdog(self) -> None:
        if self._watchdog is not None or not self._awaiting_response():
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

    def _event(self, kind: str, **fields: Any) -> EndpointEvent:
        return EndpointEvent(kind, self._context.clock_ns(), **fields)

    def _closure_events(self, received_ns: int, closure: Closure) -> list[EndpointEvent]:
        mid_turn = self._awaiting_response()
        self._state = "closed"
        initiator = self._close_initiator
        reason = self._close_reason or self._scrubber.scrub_text(closure.reason)
        code = closure.code
        events: list[EndpointEvent] = []

        def error(error_code: str, message: str) -> None:
            message = self._scrubber.scrub_text(message)
            events.append(EndpointEvent("error", received_ns, text=message, data={
                "code": error_code, "message": message, "origin": "adapter"}))

        if initiator is None:
            initiator = "adapter" if closure.local_failure else "product"
            unexpected = closure_error(closure, reason=reason, mid_turn=mid_turn,
                                       max_message_bytes=self._settings.max_message_bytes)
            if unexpected is not None:
                error(unexpected.code, unexpected.message)
        reason = reason or ("closed by the evaluator" if initiator == "evaluator"
                            else "connection closed")
        events.append(EndpointEvent("closed", received_ns, data={
            "reason": reason, "code": code, "initiated_by": initiator}))
        logger.info("connection to %s closed by %s (code %s: %s)", self._where(), initiator,
                    code, reason)
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
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None

    async def __aenter__(self) -> WebSocketEndpoint:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

