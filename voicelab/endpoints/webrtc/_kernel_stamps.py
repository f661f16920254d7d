"""The kernel's receive stamp of each RTP datagram, not the moment the event loop read it.

A packet stamped when the loop reads it is late by however long the loop was busy elsewhere (a
busy machine, 20 calls in one loop), and the packets that waited in the socket are stamped
together. On Linux the kernel stamps each datagram as it is received; the socket's
``SIOCGSTAMPNS`` ioctl reads the stamp of the datagram the socket last delivered (on the wall
clock). Unlike ``SO_TIMESTAMPNS`` (a control message, which asyncio's datagram transport never
asks ``recvmsg`` for) it needs no change to how the socket is read: asyncio reads one datagram
and hands it to the protocol at once, so a stamp read inside ``datagram_received`` is that
datagram's. It is turned into the trial clock by the datagram's age (*now on the trial clock*
minus *how long ago the kernel received it*, the two clocks read as a tight pair).

**The seam.** aioice (aiortc's ICE, tested 0.13) owns the UDP socket of each candidate and hands
its datagrams to a ``StunProtocol``; neither it nor aiortc 1.16 names those protocols publicly.
:func:`ice_protocols` reaches them through ``RTCIceGatherer._connection._protocols`` only on the
tested versions (any other: loop stamps, said so); :class:`KernelStamps` then replaces
``datagram_received`` *on those protocol instances only* with one that reads the stamp of an
RTP datagram and keys it by the SSRC and sequence number of its header (SRTP leaves the RTP
header in the clear), then calls the original. The arrival tap (:mod:`._rtp`) takes the stamp of
the packet it is handed by the same key. Where the kernel gives no stamp the datagram keeps the
moment it was read (``read_stamped``), still ahead of any backlog in aiortc's own task; a packet
whose stamp was forgotten is stamped when tapped (``loop_stamped``). Both are counted, and
the tap marks such a packet (``ArrivedPacket.kernel_stamped`` false), so the adapter lists it
among the stamps the loop's lag is charged to. The wrapper also notes when the last datagram of any kind
came (RTP, RTCP, ICE, DTLS): a product whose track is silent still sends RTCP reports and
answers consent checks, one whose transport is gone sends nothing at all.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import socket
import struct
import termios
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from .._kernel_clock import TIMESPEC, on_trial_clock, paired_clocks, timespec_ns

if TYPE_CHECKING:
    from aiortc import RTCRtpReceiver

logger = logging.getLogger(__name__)

#: Linux's ioctl for the last received datagram's stamp (``SIOCGSTAMPNS_OLD``: a ``struct
#: timespec`` of two native longs); Python's modules do not name it
SIOCGSTAMPNS = 0x8907
_INT = struct.Struct("@i")
_RTP_HEADER = struct.Struct("!BBHII")  # flags, marker+type, sequence, timestamp, SSRC
#: the versions whose private names :func:`ice_protocols` reads (pinned by a unit test)
TESTED_VERSIONS = {"aiortc": ("1.16",), "aioice": ("0.13",)}
#: stamps kept for packets the tap has not taken yet: a busy evaluator reads datagrams (I/O
#: callbacks come first) well ahead of aiortc's task that decrypts and routes them (measured:
#: over 500 packets behind at 20 calls on a loaded machine), and a packet whose stamp was
#: forgotten would be stamped when that task got to it. 8192 is 160 s of audio at 50 packets a
#: second, about 1 MB a call at most; a flood's excess is forgotten oldest first
MAX_PENDING = 8192
#: datagrams pending while aiortc has handed none on for this long are not
#: on their way: refused by SRTP or not this track's. A real backlog keeps being handed on,
#: however deep (measured: 12 s behind beside two busy processes), so it is never forgotten
MAX_PENDING_AGE_NS = 10_000_000_000


class _DatagramProtocol(Protocol):
    transport: asyncio.DatagramTransport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None: ...


def versions_tested() -> bool:
    """Whether the installed aiortc and aioice are the versions whose internals are read."""
    import aioice
    import aiortc

    found = {"aiortc": aiortc.__version__, "aioice": aioice.__version__}
    return all(any(found[name] == tested or found[name].startswith(tested + ".")
                   for tested in versions) for name, versions in TESTED_VERSIONS.items())


def ice_protocols(receiver: RTCRtpReceiver) -> list[_DatagramProtocol]:
    """The UDP protocols of the ICE connection ``receiver``'s packets come through (its
    candidates gathered already), or none when aiortc/aioice are not the tested versions."""
    if not versions_tested():
        return []
    gatherer = receiver.transport.transport.iceGatherer
    return list(gatherer._connection._protocols)


def rtp_key(data: bytes) -> tuple[int, int] | None:
    """(SSRC, sequence number) of an SRTP datagram's clear header; None for anything else
    (STUN, DTLS, RTCP: RFC 7983's first byte and RFC 5761's payload types)."""
    if len(data) < _RTP_HEADER.size or not 128 <= data[0] <= 191 or 192 <= data[1] <= 223:
        return None
    _, _, sequence, _, ssrc = _RTP_HEADER.unpack_from(data)
    return ssrc, sequence


class KernelStamps:
    """Kernel receive stamps of a call's RTP datagrams, on the trial clock, by RTP key."""

    def __init__(self, *, clock_ns: Callable[[], int]):
        self._clock_ns = clock_ns
        #: (stamp, read number, whether the kernel stamped it) of RTP datagrams read but not
        #: yet tapped, in the order read
        self._pending: OrderedDict[tuple[int, int], tuple[int, int, bool]] = OrderedDict()
        self._reads = 0
        #: the stamp of the last RTP datagram read, and the sockets watched
        self._last_stamp_ns: int | None = None
        self._last_take_ns = 0
        self._fds: list[int] = []
        self.watching = 0
        self.taken = 0
        #: packets the kernel gave no stamp for: stamped when their datagram was read
        self.read_stamped = 0
        #: packets whose stamp was forgotten (see :data:`MAX_PENDING`): stamped when tapped
        self.loop_stamped = 0
        #: when the last RTP datagram was read (the tap may be far behind on a busy loop)
        self.last_rtp_read_ns: int | None = None
        #: when the last datagram of any kind (RTP, RTCP, STUN, DTLS/SCTP) was read
        self.last_datagram_ns: int | None = None

    @property
    def kernel(self) -> bool:
        """Whether the call's datagrams are stamped by the kernel."""
        return self.watching > 0

    def watch(self, protocols: Sequence[_DatagramProtocol]) -> None:
        """Stamp every RTP datagram ``protocols`` receive from now on (each protocol's socket
        asked to stamp; one that refuses is left as it is)."""
        for protocol in protocols:
            sock = protocol.transport.get_extra_info("socket")
            if sock is None or not _start_stamping(sock):
                continue
            protocol.datagram_received = self._stamping(  # type: ignore[method-assign,assignment]
                protocol.datagram_received, sock.fileno())
            self._fds.append(sock.fileno())
            self.watching += 1
        if protocols and not self.watching:
            logger.debug("no kernel receive stamps here: arrivals are stamped when read")

    def _stamping(self, original: Callable[[bytes, tuple[str, int]], None],
                  fd: int) -> Callable[[bytes, tuple[str, int]], None]:
        def datagram_received(data: bytes, addr: tuple[str, int]) -> None:
            read_ns = self.last_datagram_ns = self._clock_ns()
            key = rtp_key(data)
            if key is not None:
                self.last_rtp_read_ns = read_ns
                stamp = self._stamp_ns(fd)
                if stamp is None:
                    self.read_stamped += 1
                self._reads += 1
                self._last_stamp_ns = read_ns if stamp is None else stamp
                self._pending[key] = (self._last_stamp_ns, self._reads, stamp is not None)
                if len(self._pending) > MAX_PENDING:
                    self._pending.popitem(last=False)
            original(data, addr)
        return datagram_received

    def _stamp_ns(self, fd: int) -> int | None:
        # the kernel answers with the ioctl's own time for a datagram it did not stamp
        began_wall_ns = time.time_ns()
        try:
            stamp_ns = timespec_ns(fcntl.ioctl(fd, SIOCGSTAMPNS, bytes(TIMESPEC.size)))
        except OSError:
            return None
        now_ns, wall_ns = paired_clocks(self._clock_ns)
        return on_trial_clock(stamp_ns, now_ns, wall_ns, began_wall_ns)

    def take(self, ssrc: int, sequence: int) -> int | None:
        """The stamp of the packet with this key (once), or None: stamp it now."""
        taken = self.take_stamp(ssrc, sequence)
        return None if taken is None else taken[0]

    def take_stamp(self, ssrc: int, sequence: int) -> tuple[int, bool] | None:
        """The stamp of the packet with this key (once) and whether the kernel took it (else
        the loop, when it read the datagram: ``read_stamped``), or None: stamp it now.

        aiortc hands packets on in the order their datagrams were read, so the datagrams read
        before this one and still pending never reach the tap (SRTP refused them, or they
        were not this track's): they are forgotten, and :meth:`oldest_pending_ns` is what
        is really still on its way."""
        pending = self._pending.pop((ssrc, sequence), None)
        if pending is None:
            self.loop_stamped += 1
            return None
        self.taken += 1
        self._last_take_ns = self._clock_ns()
        stamp, read, by_kernel = pending
        while self._pending and next(iter(self._pending.values()))[1] < read:
            self._pending.popitem(last=False)
        return stamp, by_kernel

    def oldest_pending_ns(self) -> int | None:
        """The stamp of the oldest RTP datagram read from the socket that aiortc has not yet
        decrypted and handed to the tap (None: none). When aiortc has handed none on for
        :data:`MAX_PENDING_AGE_NS`, those pending are taken to be refused (the product's last
        datagrams, a hostile one's garbage), and forgotten."""
        pending = self._pending
        if pending:
            since = self._last_take_ns or next(iter(pending.values()))[0]
            if self._clock_ns() - since > MAX_PENDING_AGE_NS:
                pending.clear()  # aiortc has handed nothing on for that long: none is coming
        oldest = next(iter(pending.values()))[0] if pending else None
        if self._last_stamp_ns is not None and self._unread():
            # datagrams still in a socket (the loop reads a few per iteration) came after the
            # last one read
            return self._last_stamp_ns if oldest is None else min(oldest, self._last_stamp_ns)
        return oldest

    def _unread(self) -> bool:
        """Whether a watched socket holds a datagram the loop has not read yet."""
        for fd in self._fds:
            try:
                waiting, = _INT.unpack(fcntl.ioctl(fd, termios.FIONREAD, bytes(_INT.size)))
            except OSError:
                continue
            if waiting > 0:
                return True
        return False


def _start_stamping(sock: socket.socket) -> bool:
    """Ask the kernel to stamp this socket's datagrams: the first ``SIOCGSTAMPNS`` turns
    stamping on (and finds no stamp yet: ENOENT)."""
    try:
        fcntl.ioctl(sock.fileno(), SIOCGSTAMPNS, bytes(TIMESPEC.size))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
