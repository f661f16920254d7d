"""What every WebSocket adapter shares (protocol v1, Twilio, pipecat): the settings every socket
has, the connection's life (new -> open -> closing -> closed), the bounded inbox read by
``events()``, the receive timeout, the closing events and an idempotent ``close()``.

The connection stamps each message with the trial clock as the loop reads it and puts it into
the inbox, nothing else (see :mod:`._socket`); a subclass decodes on the consumer side
(:meth:`SocketEndpoint._receive`) and says when the product owes it a message
(:meth:`SocketEndpoint._receive_pending`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, ClassVar, Self

from pydantic import Field, field_validator

from ..config import SecretScrubber
from ._inbox import Closure, MessageInbox, SocketClosed, closure_error
from ._limits import InboundBudget, InboundLimits, limit_error
from ._protocol import EndpointContext, EndpointError, EndpointEvent
from ._settings import AdapterSettings, redacted_url
from ._socket import KERNEL_STREAM_STAMPS, LOOP_STAMPED_ATTRIBUTE, WebSocketConnection
from ._socket_open import open_websocket

logger = logging.getLogger(__name__)

WATCHDOG = object()  # queued when the receive timeout may have passed


class SocketSettings(AdapterSettings):
    """The settings of every WebSocket adapter (a subclass may change a default)."""

    uri: Annotated[str, Field(min_length=1)]
    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 100.0
    #: what the product may send (see :mod:`._limits`)
    limits: InboundLimits = Field(default_factory=InboundLimits)

    @field_validator("uri")
    @classmethod
    def _websocket_scheme(cls, value: str) -> str:
        if not value.startswith(("ws://", "wss://")):
            raise ValueError("must be a ws:// or wss:// URI")
        return value


class QuietTimer:
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


class SocketEndpoint:
    """The shared life of a WebSocket adapter. A subclass sets ``_settings`` (a
    :class:`SocketSettings`) and ``_scrubber`` before calling ``__init__``, opens the socket with
    :meth:`_open` in its ``connect()``, and implements :meth:`_receive`."""

    USER_AGENT: ClassVar[str]
    #: the ``receive_timeout`` error's message (``{timeout}`` in seconds)
    TIMEOUT_MESSAGE: ClassVar[str] = "no product message within {timeout:g} s"
    #: every product event the adapter makes from a message carries that message's stamp, and
    #: its other events (a closure's, a timeout's) are no timed arrival: on a kernel-stamped
    #: connection its timings are then judged by the kernel's stamps (``arrival_stamps``)
    EVENTS_CARRY_MESSAGE_STAMPS: ClassVar[bool] = False

    _settings: SocketSettings
    _scrubber: SecretScrubber

    def __init__(self, context: EndpointContext):
        self._context = context
        self._uri = self._settings.uri
        self._queue = MessageInbox()  # (received ns, message | Closure | a timer's marker)
        self._ws: WebSocketConnection | None = None
        self._state = "new"  # new -> open -> closing -> closed
        self._closure_enqueued = False  # when never connected, close() enqueues one itself
        self._events_finished = False
        self._close_initiator: str | None = None
        self._close_reason: str | None = None
        self._progress_ns = 0  # when the last product message arrived (or the wait began)
        self._budget = InboundBudget(self._settings.limits)
        clock = context.clock_ns
        self._watchdog = QuietTimer(
            clock, lambda: self._progress_ns,
            lambda: int(self._settings.receive_timeout_seconds * 1e9),
            lambda: self._queue.put_nowait((clock(), WATCHDOG)))

    # --- for subclasses ----------------------------------------------------------------------

    async def connect(self) -> None:
        raise NotImplementedError

    async def _receive(self, received_ns: int, item: Any) -> list[EndpointEvent]:
        """The events of one inbox item: a message (str or bytes) or a subclass's marker."""
        raise NotImplementedError

    #: ``_receive`` as a plain method, for a subclass whose decoding never waits: the receive
    #: path calls it without making a coroutine for each of a response's hundreds of frames
    _receive_now: Callable[[int, Any], list[EndpointEvent]] | None = None

    def _receive_pending(self) -> bool:
        """The product owes a message: the receive timeout runs (default: while open)."""
        return self._state == "open"

    def _mid_turn(self) -> bool:
        """An unexpected closure now cut a turn short."""
        return False

    def _product_hung_up_events(self, received_ns: int) -> list[EndpointEvent]:
        """Events for a product that closed the connection normally (default: none)."""
        return []

    def _stop(self) -> None:
        """Stop what runs beside the connection (timers, tasks); called once it ends."""
        self._watchdog.cancel()

    async def _hang_up(self, ws: WebSocketConnection) -> None:
        """What the wire says before the evaluator closes an open connection (default: nothing)."""

    # --- connection ----------------------------------------------------------------------

    def _where(self) -> str:
        return self._scrubber.scrub_text(redacted_url(self._uri))

    async def _open(self, headers: dict[str, str]) -> WebSocketConnection:
        """Open the socket; from here on the connection stamps and enqueues each message."""
        if self._state != "new":
            raise EndpointError("connect() may be called once", code="already_connected")
        settings = self._settings
        self._ws = await open_websocket(
            self._uri, headers=headers, connect_timeout_seconds=settings.connect_timeout_seconds,
            max_message_bytes=settings.max_message_bytes, clock_ns=self._context.clock_ns,
            inbox=self._queue, where=self._where(), scrubber=self._scrubber,
            user_agent=self.USER_AGENT)
        self._state = "open"
        self._progress_ns = self._context.clock_ns()
        return self._ws

    async def _send_first(self, messages: list[str | bytes], *, before: str) -> None:
        """Send the wire's opening messages; a product that closes first fails ``connect()``."""
        assert self._ws is not None
        try:
            for message in messages:
                await self._ws.send(message)
        except SocketClosed:
            await self.close()
            raise EndpointError(self._scrubber.scrub_text(
                f"{self._where()} closed the connection before {before}"),
                code="connection_closed") from None

    def _closure_received(self) -> bool:
        return self._closure_enqueued or (self._ws is not None and self._ws.closed)

    def _open_connection(self) -> WebSocketConnection:
        if self._ws is None or self._state != "open":
            raise EndpointError("the connection to the product is closed", code="connection_closed")
        return self._ws

    async def _send(self, message: str | bytes) -> None:
        ws = self._open_connection()
        try:
            await ws.send(message)
        except SocketClosed:
            raise EndpointError("the connection to the product is closed",
                                code="connection_closed") from None

    # --- receiving -----------------------------------------------------------------------

    async def events(self) -> AsyncIterator[EndpointEvent]:
        """Normalized events in arrival order; the last one is ``closed``. One consumer only."""
        if self._events_finished:
            return
        queue = self._queue
        receive_now = self._receive_now
        while True:
            if queue.empty():
                if self._receive_pending():
                    self._watchdog.arm()
                received_ns, item = await queue.get()
            else:  # the common case under load: no waiting at all
                received_ns, item = queue.get_nowait()
            if item is WATCHDOG:
                if not self._timed_out():
                    continue  # progress since the timer fired, or nothing is owed
                timeout = self._settings.receive_timeout_seconds
                message = self.TIMEOUT_MESSAGE.format(timeout=timeout)
                yield EndpointEvent("error", self._context.clock_ns(), text=message, data={
                    "code": "receive_timeout", "message": message, "origin": "adapter"})
                await self._shutdown("adapter", f"receive timeout ({timeout:g} s)")
                continue
            if isinstance(item, Closure):
                for event in self._closure_events(received_ns, item):
                    yield event
                self._events_finished = True
                return
            size = 0
            if isinstance(item, str | bytes):
                self._progress_ns = received_ns
                size = len(item)
                if self._budget.exceeded is not None:
                    continue  # past a limit: nothing more is decoded or recorded
                problem = self._budget.charge_message(size, received_ns)
                if problem is not None:
                    yield self._over_limit(problem)
                    continue
            for event in (receive_now(received_ns, item) if receive_now is not None
                          else await self._receive(received_ns, item)):
                if event.type != "audio_delta":
                    problem = self._budget.charge(event, size, received_ns)
                    size = 0  # the events of one message share its raw record
                    if problem is not None:
                        yield self._over_limit(problem)
                        break
                yield event

    def _over_limit(self, problem: str) -> EndpointEvent:
        """The ``resource_limit`` error, which ends the call; from here on the product's
        messages are dropped undecoded until the connection closes."""
        error = limit_error(problem, self._context.clock_ns())
        logger.warning("%s: %s", self._where(), error.text)
        return error

    def _timed_out(self) -> bool:
        quiet_ns = self._context.clock_ns() - self._progress_ns
        return self._receive_pending() and \
            quiet_ns >= self._settings.receive_timeout_seconds * 1e9

    def _closure_events(self, received_ns: int, closure: Closure) -> list[EndpointEvent]:
        mid_turn = self._mid_turn()
        self._state = "closed"
        self._stop()
        initiator = self._close_initiator
        reason = self._close_reason or self._scrubber.scrub_text(closure.reason)
        events: list[EndpointEvent] = []
        if initiator is None:
            initiator = "adapter" if closure.local_failure else "product"
            unexpected = closure_error(closure, reason=reason, mid_turn=mid_turn,
                                       max_message_bytes=self._settings.max_message_bytes)
            if unexpected is not None:
                message = self._scrubber.scrub_text(unexpected.message)
                events.append(EndpointEvent("error", received_ns, text=message, data={
                    "code": unexpected.code, "message": message, "origin": "adapter"}))
            elif initiator == "product":
                events += self._product_hung_up_events(received_ns)
        reason = reason or ("closed by the evaluator" if initiator == "evaluator"
                            else "connection closed")
        events.append(EndpointEvent("closed", received_ns, data={
            "reason": reason, "code": closure.code, "initiated_by": initiator,
            **self._loop_stamped(received_ns)}))
        logger.info("connection to %s closed by %s (code %s: %s)", self._where(), initiator,
                    closure.code, reason)
        return events

    def arrival_stamps(self) -> str:
        """``kernel_stream`` once connected when the product's messages carry the kernel's
        receive stamps (Linux, ``ws://``: see :class:`._socket.WebSocketConnection`) and the
        adapter says its timed events carry their message's stamp, else ``loop``."""
        ws = self._ws
        return KERNEL_STREAM_STAMPS if self.EVENTS_CARRY_MESSAGE_STAMPS and ws is not None \
            and ws.kernel_stamps else "loop"

    def _loop_stamped(self, closed_ns: int) -> dict[str, list[list[int]]]:
        """The ``closed`` event's list of the messages the loop stamped, each as [ns before
        ``closed_ns``, how late it may be at most (ns; -1: not known)], and the closure's own
        stamp, which events made at the closure carry; nothing when the connection is not
        kernel-stamped or the list was given up (every stamp is then bounded by the loop's
        lag)."""
        ws = self._ws
        stamped = ws.loop_stamped if self.arrival_stamps() == KERNEL_STREAM_STAMPS and \
            ws is not None else None
        if stamped is None:
            return {}
        return {LOOP_STAMPED_ATTRIBUTE: [[closed_ns - stamp, late] for stamp, late in stamped]
                + [[0, -1]]}

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
            ws = self._ws
            if self._state == "open" and ws is not None and not ws.closed:
                await self._hang_up(ws)
            await self._shutdown("evaluator", "closed by the evaluator")
        except Exception as error:  # noqa: BLE001
            logger.debug("close() swallowed %s", type(error).__name__)
        finally:
            self._state = "closed"
            self._stop()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
