"""A TCP transport whose reads carry the moment the kernel received their last bytes.

A WebSocket message is stamped when the event loop reads it. A loop busy with other trials reads
late, and its stamp is late by as much: the loop-lag watch can only bound that error, and a
bound near a late tick easily exceeds the 3 ms a first-audio figure promises. On Linux a TCP
socket with ``SO_TIMESTAMPNS`` returns, with each ``recvmsg``, the receive stamp of the last
socket buffer the read consumed (``tcp_recv_timestamp``; on the wall clock). The kernel merges
segments that queue up unread into one buffer and gives it the stamp of the *last* segment
merged, so the stamp is exact only for the last bytes of a read that emptied the queue: a
message whose last byte ends such a read was complete at that stamp, whatever the loop was
doing. Any other message of the read (several messages queued up while the loop was busy)
arrived somewhere between the previous read and that stamp, which the kernel cannot tell; it
keeps the loop's own stamp and its loop-lag bound (:mod:`._socket` decides, per message).

:class:`StampedStreamTransport` reads the socket itself (``loop.add_reader``, ``recvmsg``) on any
event loop (the standard library's, uvloop), and plays the stream transport for
:class:`._socket.WebSocketConnection`: ``write`` with a buffer and ``pause_writing`` past a high
mark, ``write_eof``, ``pause_reading``/``resume_reading``, ``close`` once the buffer is written,
``abort``. Only plain TCP (``ws://`` without a proxy): TLS and proxy tunnels keep the loop's own
transport and its stamps.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import time
from collections.abc import Callable
from typing import Protocol

from ._kernel_clock import STAMP_ANCILLARY_BYTES, enable_kernel_stamps, read_stamps

logger = logging.getLogger(__name__)

#: one read takes at most this much; a read that fills it did not empty the queue
READ_BYTES = 256 * 1024
#: the most reads one readiness callback makes, so a flood cannot hold the loop
MAX_READS_PER_WAKE = 16
#: writes past this many buffered bytes pause the writer until the buffer drains to a quarter
WRITE_HIGH_WATER_BYTES = 64 * 1024


class StampedStreamProtocol(Protocol):
    """What the transport feeds: asyncio's stream-protocol callbacks, with each read's stamps."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...

    def stamped_data_received(self, data: bytes, read_ns: int, kernel_ns: int,
                              since_ns: int) -> None:
        """``data`` read at ``read_ns`` (trial clock); ``kernel_ns``: when its last byte was
        received (trial clock), or -1 when the read did not empty the queue or the kernel gave
        no stamp; ``since_ns``: the queue was empty then (a read that emptied it began then),
        so every byte of ``data`` arrived after it."""

    def eof_received(self) -> bool | None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...

    def pause_writing(self) -> None: ...

    def resume_writing(self) -> None: ...


def kernel_stamps_available() -> bool:
    """Whether this system's TCP sockets can give receive stamps (Linux)."""
    return sys.platform.startswith("linux")


async def connect_stamped(host: str, port: int, protocol: StampedStreamProtocol, *,
                          clock_ns: Callable[[], int]) -> StampedStreamTransport:
    """Connect to ``host:port`` over TCP (each address the resolver gives, in turn) and start
    reading with kernel stamps; raises the last connection error (``OSError``)."""
    loop = asyncio.get_running_loop()
    addresses = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    last: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
        except OSError as error:
            sock.close()
            last = error
            continue
        except BaseException:
            sock.close()
            raise
        return StampedStreamTransport(sock, protocol, clock_ns=clock_ns)
    raise last


class StampedStreamTransport:
    """A connected, non-blocking TCP socket read and written on the running loop (see the
    module docstring). ``kernel_stamps`` says whether the kernel accepted the option."""

    def __init__(self, sock: socket.socket, protocol: StampedStreamProtocol, *,
                 clock_ns: Callable[[], int]):
        self._sock = sock
        self._fd = sock.fileno()
        self._protocol = protocol
        self._clock_ns = clock_ns
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._writing_paused = False
        self._reading = True
        self._eof_pending = False
        self._eof = False
        self._closing = False
        self._lost = False
        self._emptied_ns = clock_ns()  # the queue was empty then: before anything was sent
        self.kernel_stamps = enable_kernel_stamps(sock)
        self._ancillary_bytes = STAMP_ANCILLARY_BYTES if self.kernel_stamps else 0
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio's own
        except OSError:
            pass
        protocol.connection_made(self)  # type: ignore[arg-type]
        if not self._closing:
            self._loop.add_reader(self._fd, self._readable)

    # --- reading -------------------------------------------------------------------------

    def _readable(self) -> None:
        # one read per wake-up, nearly always (a read that does not fill the buffer empties the
        # queue): its clocks, the stamp's conversion and the delivery in as few Python calls
        # as asyncio's own transport makes, so the stamps cost (nearly) no throughput
        # recvmsg reads into a new bytes object of READ_BYTES that it shrinks to the size read,
        # as asyncio's transport does with recv: one connection-long buffer read with
        # recvmsg_into cost a copy of every read's bytes into the bytes the parser takes
        sock, ancillary_bytes = self._sock, self._ancillary_bytes
        clock_ns, protocol = self._clock_ns, self._protocol
        for _ in range(MAX_READS_PER_WAKE):
            began_ns = clock_ns()
            began_wall_ns = time.time_ns()
            try:
                data, ancillary, _, _ = sock.recvmsg(READ_BYTES, ancillary_bytes)
            except (BlockingIOError, InterruptedError):
                self._emptied_ns = began_ns
                return
            except OSError as error:
                self._fail(error)
                return
            if not data:
                self._end_of_stream()
                return
            since_ns = self._emptied_ns
            if len(data) < READ_BYTES:  # the read emptied the queue: its last byte's stamp is exact
                self._emptied_ns = began_ns
                read_ns, kernel_ns = read_stamps(ancillary, clock_ns, began_wall_ns)
                protocol.stamped_data_received(data, read_ns, kernel_ns, since_ns)
                return
            read_ns = clock_ns()
            protocol.stamped_data_received(data, read_ns, -1, since_ns)
            if self._closing or not self._reading:
                return

    def _end_of_stream(self) -> None:
        self._loop.remove_reader(self._fd)
        self._reading = False
        self._eof = True  # nothing more to read: resume_reading leaves it so
        if not self._protocol.eof_received():
            self.close()

    def pause_reading(self) -> None:
        if self._reading and not self._closing:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._reading and not self._closing and not self._eof:
            self._reading = True
            self._loop.add_reader(self._fd, self._readable)

    # --- writing -------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._closing or self._eof_pending or not data:
            return
        if not self._buffer:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as error:
                self._fail(error)
                return
            data = data[sent:]
            if not data:
                return
            self._loop.add_writer(self._fd, self._writable)
        self._buffer += data
        if not self._writing_paused and len(self._buffer) > WRITE_HIGH_WATER_BYTES:
            self._writing_paused = True
            self._protocol.pause_writing()

    def _writable(self) -> None:
        try:
            sent = self._sock.send(self._buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._fail(error)
            return
        del self._buffer[:sent]
        if self._writing_paused and len(self._buffer) <= WRITE_HIGH_WATER_BYTES // 4:
            self._writing_paused = False
            self._protocol.resume_writing()
        if self._buffer:
            return
        self._loop.remove_writer(self._fd)
        if self._eof_pending:
            self._shut_write()
        if self._closing:
            self._finish(None)

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if self._eof_pending or self._closing:
            return
        self._eof_pending = True
        if not self._buffer:
            self._shut_write()

    def _shut_write(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the peer is gone: the read side says so

    # --- ending --------------------------------------------------------------------------

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Stop reading and close once the write buffer is written."""
        if self._closing:
            return
        self._closing = True
        if self._reading:
            self._loop.remove_reader(self._fd)
        if not self._buffer:
            self._finish(None)

    def abort(self) -> None:
        """Close at once, dropping what is still to be written."""
        self._closing = True
        self._finish(None)

    def _fail(self, error: OSError) -> None:
        self._closing = True
        self._finish(error)

    def _finish(self, error: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._buffer.clear()
        self._sock.close()
        self._loop.call_soon(self._protocol.connection_lost, error)

    def get_extra_info(self, name: str, default: object = None) -> object:
        if name == "socket":
            return self._sock
        if name == "peername" and not self._lost:
            return self._sock.getpeername()
        return default
