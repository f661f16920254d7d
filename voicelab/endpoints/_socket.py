"""WebSocket plumbing shared by the protocol v1 and the realtime adapters.

* :func:`open_websocket` connects and maps every failure to an :class:`EndpointError` code;
* the connection class stamps each message with the moment its first bytes reached the process
  (in the protocol callback), so a busy event loop delays processing, not the measurement, and
  delivers it from there to the adapter's queue;
* :class:`Closure` is how a receive loop reports the end of the stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidStatus,
    InvalidURI,
    WebSocketException,
)
from websockets.frames import DATA_OPCODES, CloseCode, Frame, Opcode

from ..config import SecretScrubber
from ._protocol import EndpointError

CLOSE_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Closure:
    """The end of a receive loop: close code and reason, and whether this side failed first
    (e.g. the library closed with 1009 because a message was too big)."""

    code: int | None
    reason: str
    local_failure: bool = False


def closure_from(error: ConnectionClosed) -> Closure:
    if error.rcvd is not None:
        return Closure(error.rcvd.code, error.rcvd.reason)
    if error.sent is not None:
        return Closure(error.sent.code, error.sent.reason, local_failure=True)
    return Closure(1006, "connection lost without a close frame")


class _TimestampingConnection(ClientConnection):
    """A client connection that stamps each message with the moment its first bytes reached the
    process, and hands complete messages straight to a sink.

    Data frames bypass the library's message assembler and ``recv()``: a message is delivered,
    with its arrival time, from the protocol callback that parsed it (no task wake-up, no extra
    queue per message). Until a sink is attached, messages wait in arrival order. When the
    connection is lost, the sink receives a :class:`Closure`.
    """

    def __init__(self, *args: Any, clock_ns: Callable[[], int], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.clock_ns = clock_ns
        self._received_ns = 0
        self._fragments: list[bytes] = []
        self._fragments_text = False
        self._fragments_ns = 0
        self._sink: Callable[[tuple[int, Any]], None] | None = None
        self._pending: list[tuple[int, Any]] = []

    def attach(self, sink: Callable[[tuple[int, Any]], None]) -> None:
        """Deliver ``(arrival ns, message or Closure)`` to ``sink``, starting with any waiting."""
        pending, self._pending = self._pending, []
        self._sink = sink
        for item in pending:
            sink(item)

    def _deliver(self, item: tuple[int, Any]) -> None:
        if self._sink is None:
            self._pending.append(item)
        else:
            self._sink(item)

    def data_received(self, data: bytes) -> None:
        self._received_ns = self.clock_ns()
        super().data_received(data)

    def process_event(self, event: Any) -> None:
        if not isinstance(event, Frame) or event.opcode not in DATA_OPCODES:
            super().process_event(event)
            return
        if event.opcode is Opcode.CONT:
            self._fragments.append(event.data)
            if not event.fin:
                return
            arrival, text, payload = self._fragments_ns, self._fragments_text, \
                b"".join(self._fragments)
            self._fragments = []
        elif not event.fin:
            self._fragments = [event.data]
            self._fragments_text = event.opcode is Opcode.TEXT
            self._fragments_ns = self._received_ns
            return
        else:
            arrival, text, payload = self._received_ns, event.opcode is Opcode.TEXT, event.data
        if not text:
            self._deliver((arrival, bytes(payload)))
            return
        try:
            self._deliver((arrival, bytes(payload).decode()))
        except UnicodeDecodeError as error:
            self.loop.create_task(self._fail_invalid_text(error))

    async def _fail_invalid_text(self, error: UnicodeDecodeError) -> None:
        self.set_connection_exc(error)
        async with self.send_context():
            self.protocol.fail(CloseCode.INVALID_DATA, f"{error.reason} at position {error.start}")

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._deliver((self.clock_ns(), closure_from(self.protocol.close_exc)))


def timestamping_connection(clock_ns: Callable[[], int]) -> Callable[..., ClientConnection]:
    """A factory of connections stamping arrivals with ``clock_ns`` (a partial, not a class per
    connection: classes are cyclic garbage)."""
    return partial(_TimestampingConnection, clock_ns=clock_ns)


async def receive_into(ws: ClientConnection, put: Callable[[tuple[int, Any]], None]) -> None:
    """Deliver ``(arrival ns, message)`` to ``put`` until the connection ends, then
    ``(ns, Closure)``; returns once the closure was delivered. ``ws`` comes from
    :func:`open_websocket`."""
    if not isinstance(ws, _TimestampingConnection):
        raise TypeError("receive_into needs a connection made by open_websocket")
    ws.attach(put)
    await ws.wait_closed()


async def open_websocket(url: str, *, headers: Mapping[str, str], connect_timeout_seconds: float,
                         max_message_bytes: int, clock_ns: Callable[[], int], where: str,
                         scrubber: SecretScrubber, user_agent: str,
                         rejected_codes: Mapping[int, str] | None = None) -> ClientConnection:
    """Connect, mapping failures to :class:`EndpointError` codes: ``connect_timeout``,
    ``handshake_rejected`` (or ``rejected_codes[status]``), ``connection_refused``,
    ``handshake_failed``, ``connection_failed``. Messages are scrubbed of secrets."""

    def failure(code: str, message: str) -> EndpointError:
        return EndpointError(scrubber.scrub_text(message), code=code)

    try:
        return await asyncio.wait_for(connect(
            url, additional_headers=dict(headers), compression=None,
            max_size=max_message_bytes, open_timeout=None, close_timeout=CLOSE_TIMEOUT_SECONDS,
            user_agent_header=user_agent, create_connection=timestamping_connection(clock_ns)),  # type: ignore[arg-type]
            connect_timeout_seconds)
    except TimeoutError:
        raise failure("connect_timeout", f"no WebSocket handshake with {where} within "
                      f"{connect_timeout_seconds:g} s") from None
    except InvalidStatus as error:
        status = error.response.status_code
        code = (rejected_codes or {}).get(status, "handshake_rejected")
        raise failure(code, f"{where} rejected the WebSocket handshake: HTTP {status}") from None
    except ConnectionRefusedError:
        raise failure("connection_refused", f"connection refused by {where}") from None
    except (InvalidURI, InvalidHandshake, WebSocketException) as error:
        raise failure("handshake_failed", f"WebSocket handshake with {where} failed: "
                      f"{type(error).__name__}") from None
    except OSError as error:
        raise failure("connection_failed", f"cannot connect to {where}: "
                      f"{error.strerror or type(error).__name__}") from None
