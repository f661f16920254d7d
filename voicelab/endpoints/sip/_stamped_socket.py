"""A UDP socket whose datagrams carry the moment the kernel received them, not the moment the
event loop got round to reading them.

An RTP packet's arrival is the figure every latency on a call starts from. A stamp read from the
trial clock when ``datagram_received`` runs is late by however long the loop was busy elsewhere
(a burst of work right after the answer, a busy machine): the packets that waited in the socket
are then stamped together, and a continuous stream never gives the listener's playback a gap to
catch up in, so one stall would shift every later figure of the call. On Linux the kernel stamps
each datagram as it is received (``SO_TIMESTAMPNS``, on the wall clock); the socket reads that
stamp with the datagram and turns it into the trial clock by the datagram's age: *now on the
trial clock* minus *how long ago the kernel received it*, both read together. Where the kernel
gives no stamp (another system, or the option refused) the age is 0 and the stamp is the read's,
as asyncio's own datagram transport would give.

:class:`StampedDatagramSocket` plays the part of an ``asyncio.DatagramTransport`` for what the
call needs (``sendto``, ``close``, ``is_closing``, ``get_extra_info("sockname")``) and hands each
datagram to a :class:`StampedDatagramProtocol` with its stamp.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from typing import Protocol

from .._kernel_clock import (
    STAMP_ANCILLARY_BYTES,
    ancillary_stamp_ns,
    enable_kernel_stamps,
    on_trial_clock,
    paired_clocks,
)

logger = logging.getLogger(__name__)

#: the most one readiness callback reads, so a flood cannot hold the loop
MAX_READS_PER_WAKE = 64
MAX_DATAGRAM_BYTES = 65_535

Address = tuple[str, int]


class StampedDatagramProtocol(Protocol):
    """What receives the socket's datagrams."""

    def stamped_datagram_received(self, data: bytes, addr: Address, received_ns: int) -> None:
        """``data`` from ``addr``, received by the kernel at ``received_ns`` (trial clock)."""

    def error_received(self, exc: Exception) -> None:
        """A send or receive failed (an ICMP port unreachable on UDP, for instance)."""


class StampedDatagramSocket:
    """A bound, non-blocking UDP socket read by the loop (see the module docstring)."""

    def __init__(self, sock: socket.socket, protocol: StampedDatagramProtocol, *,
                 clock_ns: Callable[[], int]):
        self._sock = sock
        self._protocol = protocol
        self._clock_ns = clock_ns
        self._loop = asyncio.get_running_loop()
        self._closing = False
        self.kernel_stamps = enable_kernel_stamps(sock)
        self._ancillary_bytes = STAMP_ANCILLARY_BYTES if self.kernel_stamps else 0
        self.send_failures = 0
        self._loop.add_reader(sock.fileno(), self._readable)

    @classmethod
    def bind(cls, local: Address, protocol: StampedDatagramProtocol, *,
             clock_ns: Callable[[], int]) -> StampedDatagramSocket:
        """A socket bound to ``local`` (port 0: the system picks one), already being read."""
        family = socket.AF_INET6 if ":" in local[0] else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            sock.bind(local)
            return cls(sock, protocol, clock_ns=clock_ns)
        except BaseException:
            sock.close()
            raise

    def _readable(self) -> None:
        for _ in range(MAX_READS_PER_WAKE):
            began_wall_ns = time.time_ns()
            try:
                data, ancillary, _, addr = self._sock.recvmsg(MAX_DATAGRAM_BYTES,
                                                              self._ancillary_bytes)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                self._protocol.error_received(error)
                return
            now_ns, wall_ns = paired_clocks(self._clock_ns)
            kernel_ns = on_trial_clock(ancillary_stamp_ns(ancillary), now_ns, wall_ns,
                                       began_wall_ns) \
                if self.kernel_stamps else None
            received_ns = now_ns if kernel_ns is None else kernel_ns
            self._protocol.stamped_datagram_received(data, (str(addr[0]), int(addr[1])),
                                                     received_ns)
            if self._closing:
                return

    # --- the transport's part ------------------------------------------------------------------

    def sendto(self, data: bytes, addr: Address) -> None:
        """Send one datagram now; one the kernel cannot take at once is dropped and counted
        (a real-time stream has no use for it later)."""
        if self._closing:
            return
        try:
            self._sock.sendto(data, addr)
        except (BlockingIOError, InterruptedError):
            self.send_failures += 1
        except OSError as error:
            self.send_failures += 1
            self._protocol.error_received(error)

    @property
    def local_address(self) -> Address:
        """The (host, port) the socket is bound to."""
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    def get_extra_info(self, name: str) -> object:
        if name == "sockname":
            return self._sock.getsockname()
        if name == "socket":
            return self._sock
        return None

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
