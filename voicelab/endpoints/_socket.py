"""WebSocket plumbing shared by the protocol v1 and the realtime adapters.

* :func:`open_websocket` connects and maps every failure to an :class:`EndpointError` code;
* the connection class stamps each message with the moment its first bytes reached the process
  (in the protocol callback), so a busy event loop delays processing, not the measurement;
* :class:`Closure` is how a receive loop reports the end of the stream.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidStatus,
    InvalidURI,
    WebSocketException,
)
from websockets.frames import DATA_OPCODES, Frame, Opcode

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
    """A client connection that notes when each message's first bytes reached the process."""

    clock_ns: Callable[[], int]

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.arrivals: deque[int] = deque()
        self._received_ns = 0
        self._message_ns: int | None = None

    def data_received(self, data: bytes) -> None:
        self._received_ns = self.clock_ns()
        super().data_received(data)

    def process_event(self, event: Any) -> None:
        if isinstance(event, Frame) and event.opcode in DATA_OPCODES:
            if event.opcode is not Opcode.CONT or self._message_ns is None:
                self._message_ns = self._received_ns
            if event.fin:
                self.arrivals.append(self._message_ns)
                self._message_ns = None
        super().process_event(event)


def timestamping_connection(clock_ns: Callable[[], int]) -> type[ClientConnection]:
    """A :class:`ClientConnection` class stamping arrivals with ``clock_ns``."""
    return type("TimestampingConnection", (_TimestampingConnection,),
                {"clock_ns": staticmethod(clock_ns)})


async def receive_into(ws: ClientConnection, put: Callable[[tuple[int, Any]], None], *,
                       clock_ns: Callable[[], int]) -> None:
    """Enqueue ``(arrival ns, message)`` until the connection ends, then ``(ns, Closure)``."""
    arrivals = getattr(ws, "arrivals", None)
    try:
        while True:
            message = await ws.recv()
            put((arrivals.popleft() if arrivals else clock_ns(), message))
    except ConnectionClosed as error:
        put((clock_ns(), closure_from(error)))
    except Exception as error:  # noqa: BLE001 - any receive failure ends the stream cleanly
        put((clock_ns(), Closure(None, f"receive failed: {type(error).__name__}", True)))


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
            user_agent_header=user_agent, create_connection=timestamping_connection(clock_ns)),
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
