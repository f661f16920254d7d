"""The SIP transport of one call: a connected UDP socket, or a TCP connection plus a listener
for requests the far end sends on a new connection (RFC 3261 section 18).

Every message is stamped with ``clock_ns()`` the moment the loop reads it, then parsed; a
message that breaks a bound or does not parse goes to ``on_problem`` (over TCP it also ends
the connection: its framing is lost), never as an exception into the loop.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

from ._message import MessageError, SipMessage, StreamFramer, parse_message

logger = logging.getLogger(__name__)

Reply = Callable[[SipMessage], bool]
#: (arrival ns, message, how to answer it: over the connection it came on)
MessageHandler = Callable[[int, SipMessage, Reply], None]
ProblemHandler = Callable[[str, str], None]  # (kind, detail)


#: TCP connections the far end may hold open to our listener at once
MAX_CONNECTIONS = 8


class TransportError(Exception):
    """The far end could not be reached (refused, unresolvable, TCP failed)."""


@dataclass
class _Handlers:
    clock_ns: Callable[[], int]
    on_message: MessageHandler
    on_problem: ProblemHandler
    on_closed: Callable[[str], None]


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, handlers: _Handlers, send: Reply) -> None:
        self._handlers = handlers
        self._send = send

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        received_ns = self._handlers.clock_ns()
        try:
            message = parse_message(data)
        except MessageError as error:
            self._handlers.on_problem(error.kind, str(error))
            return
        self._handlers.on_message(received_ns, message, self._reply)

    def _reply(self, message: SipMessage) -> bool:
        return self._send(message)

    def error_received(self, exc: Exception) -> None:
        # an ICMP error on the connected socket: nobody listens at the far end
        self._handlers.on_closed(str(exc.strerror or exc) if isinstance(exc, OSError)
                                 else str(exc))


class _TcpProtocol(asyncio.Protocol):
    def __init__(self, handlers: _Handlers, owner: SipTransport) -> None:
        self._handlers = handlers
        self._owner = owner
        self._framer = StreamFramer()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport: the standard library's subclass asyncio.Transport, uvloop's are
        # its own classes with the same methods (never checked by class)
        self.transport = cast(asyncio.Transport, transport)
        if len(self._owner.connections) >= MAX_CONNECTIONS:
            self._handlers.on_problem("connection_flood",
                                      f"over {MAX_CONNECTIONS} TCP connections")
            self.transport.abort()
            return
        self._owner.connections.append(self.transport)

    def data_received(self, data: bytes) -> None:
        received_ns = self._handlers.clock_ns()
        try:
            messages = self._framer.feed(data)
        except MessageError as error:
            self._handlers.on_problem(error.kind, str(error))
            if self.transport is not None:
                self.transport.abort()
            return
        for message in messages:
            self._handlers.on_message(received_ns, message, self._reply)

    def _reply(self, message: SipMessage) -> bool:
        if self.transport is None or self.transport.is_closing():
            return False
        self.transport.write(message.to_bytes())
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport in self._owner.connections:
            self._owner.connections.remove(self.transport)
        if self.transport is self._owner.primary:
            self._handlers.on_closed("connection closed" if exc is None else f"{exc}")


class SipTransport:
    """Sends messages to the far end and delivers what arrives to the call's handlers.

    ``local`` is the address to name in Via and Contact: the UDP socket's, or over TCP the
    listener's, so a far end that opens its own connection for a request finds us.
    """

    def __init__(self, kind: Literal["udp", "tcp"], handlers: _Handlers) -> None:
        self.kind = kind
        self._handlers = handlers
        self.local: tuple[str, int] = ("", 0)
        self.remote: tuple[str, int] = ("", 0)
        self._udp: asyncio.DatagramTransport | None = None
        self._server: asyncio.Server | None = None
        self.primary: asyncio.Transport | None = None
        self.connections: list[asyncio.Transport] = []
        self.closed = False

    @property
    def reliable(self) -> bool:
        return self.kind == "tcp"

    @classmethod
    async def open(cls, kind: Literal["udp", "tcp"], *, local_address: str,
                   remote: tuple[str, int], clock_ns: Callable[[], int],
                   on_message: MessageHandler, on_problem: ProblemHandler,
                   on_closed: Callable[[str], None]) -> SipTransport:
        """Resolve the far end and open the socket; raises :class:`TransportError`."""
        transport = cls(kind, _Handlers(clock_ns, on_message, on_problem, on_closed))
        loop = asyncio.get_running_loop()
        try:
            family = socket.AF_INET6 if ":" in local_address else socket.AF_INET
            infos = await loop.getaddrinfo(remote[0], remote[1], family=family,
                                           type=socket.SOCK_DGRAM if kind == "udp"
                                           else socket.SOCK_STREAM)
            address = (str(infos[0][4][0]), int(infos[0][4][1]))
            if kind == "udp":
                await transport._open_udp(local_address, address)
            else:
                await transport._open_tcp(local_address, address)
        except (OSError, IndexError) as error:
            transport.close()
            raise TransportError(f"{remote[0]}:{remote[1]}: {error}") from None
        return transport

    async def _open_udp(self, local_address: str, remote: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        udp, _ = await loop.create_datagram_endpoint(
            lambda: _UdpProtocol(self._handlers, self.send), local_addr=(local_address, 0), remote_addr=remote)
        self._udp = udp
        self.local = udp.get_extra_info("sockname")[:2]
        self.remote = remote

    async def _open_tcp(self, local_address: str, remote: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _TcpProtocol(self._handlers, self), host=local_address, port=0)
        self.local = self._server.sockets[0].getsockname()[:2]
        transport, _ = await loop.create_connection(
            lambda: _TcpProtocol(self._handlers, self), remote[0], remote[1],
            local_addr=(local_address, 0))
        self.primary = transport
        self.remote = remote

    def send(self, message: SipMessage) -> bool:
        """Send one message; False when the transport is gone."""
        if self.closed:
            return False
        data = message.to_bytes()
        if self._udp is not None:
            self._udp.sendto(data)
            return True
        if self.primary is not None and not self.primary.is_closing():
            self.primary.write(data)
            return True
        return False

    def close(self) -> None:
        """Release the sockets; safe to call twice."""
        self.closed = True
        if self._udp is not None:
            self._udp.close()
        for connection in list(self.connections):
            connection.close()
        if self._server is not None:
            self._server.close()
