"""The realtime adapter (``adapter: realtime``): a product built directly on the OpenAI Realtime
API, Azure OpenAI realtime or Azure Voice Live, driven over its own WebSocket event protocol.

The evaluator owns turn boundaries: the session is configured with ``turn_detection: null``
(unless ``session.turn_detection`` says otherwise), user audio is appended as base64 pcm16 at
24 kHz, and each turn is ``input_audio_buffer.commit`` + ``response.create``. Both the GA and the
beta / Voice Live event spellings are normalized (see :mod:`.wire`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping

from ...audio import PcmAudio
from .. import (
    EndpointContext,
    EndpointError,
    EndpointEvent,
    EndpointSettings,
    InboundBudget,
    closure_error,
    limit_error,
    parse_settings,
)
from .._fields import JsonObject
from . import wire
from ._connection import Closure, RealtimeConnection
from ._server_events import _ServerEvents
from ._settings import RealtimeSettings

logger = logging.getLogger(__name__)


class RealtimeEndpoint(_ServerEvents):
    """The evaluator as a Realtime API client of the product's session."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": True,
        "tool_events": True,
        "input_transcripts": True,
        "output_transcripts": True,
    }
    #: ``endpoint.settings`` are parsed into this once, at ``validate``
    settings_model = RealtimeSettings

    def __init__(self, settings: Mapping[str, object] | RealtimeSettings, context: EndpointContext):
        self._settings = parse_settings(RealtimeSettings, settings)
        self._context = context
        self._target = self._settings.target()
        self._scrubber = context.scrubber.with_values(self._target.secrets())
        self._conn: RealtimeConnection | None = None
        self._backlog: list[tuple[int, JsonObject]] = []  # received while connecting
        self._budget = InboundBudget(self._settings.limits)
        self._state = "new"  # new -> open -> closed
        self._events_finished = False
        self._appended_bytes = 0      # audio appended since the last commit
        self._pending_requests = 0    # response.create sent, not yet created or rejected
        self._active_response: str | None = None
        self._interrupted: set[str] = set()       # responses an interruption was emitted for
        self._continue_after: set[str] = set()    # responses whose tool calls we answered
        self._tool_names: dict[str, str] = {}     # call_id -> function name (beta events)
        self._cancel_sent = False
        self._close_reason: str | None = None
        # the response in progress, for its usage when the service does not report it
        self._response_audio_bytes = 0
        self._response_text: list[str] = []

    @classmethod
    def check_settings(cls, settings: EndpointSettings) -> None:
        """Azure's credential package, when the settings ask for it."""
        parsed = parse_settings(RealtimeSettings, settings)
        if parsed.auth == "default_credential" and parsed.dialect != "openai":
            wire.require_azure_identity(purpose="endpoint auth 'default_credential'",
                                        key="endpoint.settings.auth")

    @classmethod
    def turn_taking(cls, settings: EndpointSettings) -> str:
        """The session's own ``turn_detection`` decides: ``server_vad``/``semantic_vad`` is
        voicelab's ``server_vad`` mode (the service listens), anything else ``client``."""
        return parse_settings(RealtimeSettings, settings).turn_detection

    @classmethod
    def product_can_speak_first(cls, settings: EndpointSettings) -> bool:
        """Only with ``opening_response`` (a response.create right after the session setup)."""
        return parse_settings(RealtimeSettings, settings).opening_response

    @property
    def session_config(self) -> dict[str, object]:
        """The session sent with ``session.update``."""
        return wire.build_session(self._target.session_format, self._settings.session)

    # --- connection ----------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the socket, send ``session.update`` and wait for ``session.updated``.

        Raises :class:`EndpointError` with code ``connection_refused``, ``unauthorized`` (401),
        ``forbidden`` (403), ``handshake_rejected``, ``connect_timeout``, ``auth_failed``,
        ``session_rejected`` (an ``error`` answered the update), ``session_timeout`` or
        ``connection_closed``.
        """
        if self._state != "new":
            raise EndpointError("connect() may be called once", code="already_connected")
        settings = self._settings
        headers = await self._target.headers(traceparent=self._context.traceparent)
        self._scrubber = self._scrubber.with_values(self._target.credential_values(headers))
        self._conn = await RealtimeConnection.open(
            self._target.url, headers=headers,
            connect_timeout_seconds=settings.connect_timeout_seconds,
            max_message_bytes=settings.max_message_bytes, scrubber=self._scrubber,
            clock_ns=self._context.clock_ns)
        self._state = "open"
        try:
            await self._conn.send(wire.session_update(self.session_config))
            await self._await_session()
            if settings.opening_response:
                await self._request_response()
        except BaseException:
            await self.close()
            raise
        logger.info("realtime session open with %s (session %s)", self._conn.where,
                    self._context.session_id)

    async def _await_session(self) -> None:
        assert self._conn is not None
        deadline = asyncio.get_running_loop().time() + self._settings.connect_timeout_seconds
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                received_ns, message = await self._conn.next(max(0.0, remaining))
            except TimeoutError:
                raise EndpointError(f"{self._conn.where} did not answer session.update within "
                                    f"{self._settings.connect_timeout_seconds:g} s",
                                    code="session_timeout") from None
            if isinstance(message, Closure):
                raise EndpointError(self._scrubber.scrub_text(
                    f"{self._conn.where} closed the connection during session setup "
                    f"(code {message.code}: {message.reason})"), code="connection_closed")
            kind = wire.kind_of(message)
            if kind == "error":
                code, text = wire.error_detail(message)
                raise EndpointError(self._scrubber.scrub_text(
                    f"{self._conn.where} rejected session.update: {code}: {text}"),
                    code="session_rejected")
            name = message.get("type")
            problem = self._budget.charge_event(str(name)[:64] if isinstance(name, str) else kind,
                                                0, received_ns)
            if problem is not None:  # the backlog is bounded too
                raise EndpointError(self._scrubber.scrub_text(
                    f"{self._conn.where} during session setup: {problem}"), code="resource_limit")
            self._backlog.append((received_ns, message))
            if kind == "session_updated":
                return

    # --- sending -------------------------------------------------------------------------

    async def _send(self, event: Mapping[str, object]) -> None:
        if self._conn is None or self._state != "open":
            raise EndpointError("the connection to the product is closed", code="connection_closed")
        await self._conn.send(event)

    async def _send_quietly(self, event: Mapping[str, object]) -> bool:
        """Send from inside ``events()``: a lost connection shows up as the closing events."""
        try:
            await self._send(event)
        except EndpointError:
            logger.debug("could not send %s: the connection is closed", event.get("type"))
            return False
        return True

    async def _request_response(self) -> None:
        await self._send(wire.response_create())
        self._pending_requests += 1

    async def send_audio(self, audio: PcmAudio) -> None:
        """Append ``audio`` as base64 pcm16 in ``chunk_ms`` pieces; never sleeps (the runner
        paces)."""
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        for frame in audio.chunks(self._settings.chunk_ms):
            await self._send(wire.append_audio(frame.to_bytes()))
            self._appended_bytes += frame.byte_count

    async def commit_turn(self) -> None:
        """``input_audio_buffer.commit`` (skipped when nothing was appended: the service rejects
        an empty commit) and ``response.create``."""
        if self._appended_bytes:
            await self._send(wire.commit())
            self._appended_bytes = 0
        else:
            logger.debug("commit_turn with an empty input buffer: response.create only")
        await self._request_response()

    async def interrupt(self) -> None:
        """``response.cancel`` for the response in progress (``output_audio_buffer.clear`` is
        WebRTC/SIP only, so it is not sent over a WebSocket)."""
        if self._active_response is None and not self._pending_requests:
            logger.debug("interrupt() with no response in progress: nothing to cancel")
            return
        await self._send(wire.response_cancel())
        self._cancel_sent = True

    # --- receiving -----------------------------------------------------------------------

    def _awaiting_response(self) -> bool:
        return self._state == "open" and (self._pending_requests > 0
                                          or self._active_response is not None)

    async def events(self) -> AsyncIterator[EndpointEvent]:
        """Normalized events in arrival order; the last one is ``closed``. One consumer only."""
        if self._events_finished or self._conn is None:
            return
        backlog, self._backlog = self._backlog, []
        for received_ns, message in backlog:
            for event in await self._decode(received_ns, message):
                yield event
        timeout = self._settings.receive_timeout_seconds
        budget = self._budget  # the backlog was charged as it came
        while True:
            try:
                received_ns, item = await self._conn.next(
                    timeout if self._awaiting_response() else None)
            except TimeoutError:
                text = f"no product event within {timeout:g} s while a response was pending"
                yield self._error(self._context.clock_ns(), "receive_timeout", text)
                self._close_reason = f"receive timeout ({timeout:g} s)"
                self._state = "closing"
                await self._shutdown()
                continue
            if isinstance(item, Closure):
                for event in self._closure_events(received_ns, item):
                    yield event
                self._events_finished = True
                return
            if budget.exceeded is not None:
                continue  # past a limit: dropped until the connection closes
            for event in await self._decode(received_ns, item):
                problem = budget.charge(event, 0, received_ns)
                if problem is not None:
                    yield limit_error(problem, self._context.clock_ns())
                    break
                yield event

    def _closure_events(self, received_ns: int, closure: Closure) -> list[EndpointEvent]:
        mid_turn = self._awaiting_response()
        self._state = "closed"
        assert self._conn is not None
        by_us = self._conn.closed_by_us
        reason = self._close_reason or self._scrubber.scrub_text(closure.reason)
        events: list[EndpointEvent] = []
        initiator = "evaluator" if by_us and not self._close_reason else "adapter"
        if not by_us:
            initiator = "adapter" if closure.local_failure else "product"
            unexpected = closure_error(closure, reason=reason, mid_turn=mid_turn,
                                       max_message_bytes=self._settings.max_message_bytes)
            if unexpected is not None:
                events.append(self._error(received_ns, unexpected.code, unexpected.message))
        events.append(EndpointEvent("closed", received_ns, data={
            "reason": reason or "connection closed", "code": closure.code,
            "initiated_by": initiator}))
        logger.info("realtime connection to %s closed by %s (code %s)", self._conn.where,
                    initiator, closure.code)
        return events

    # --- closing -------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        if self._conn is not None:
            await self._conn.close(self._close_reason or "closed by the evaluator")

    async def close(self) -> None:
        """Close the connection (code 1000); idempotent, never raises."""
        if self._state == "closed" or self._conn is None:
            self._state = "closed"
            return
        self._state = "closed"
        try:
            await self._shutdown()
        except Exception as error:  # noqa: BLE001
            logger.debug("close() swallowed %s", type(error).__name__)

    async def __aenter__(self) -> RealtimeEndpoint:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
