"""The product's RTP, stamped where it arrives, before any jitter buffer.

**The seam.** aiortc 1.16 has no public hook between the network and its audio jitter buffer:
``RTCRtpReceiver`` parses, routes and buffers each packet (a 20 ms frame leaves its buffer only
once 4 later ones have arrived: ~80 ms) before the remote track's ``recv()`` returns decoded
audio, whose stamps no longer say when the packets came. The least invasive place is the one
method each receiver is handed every routed packet through, ``_handle_rtp_packet(packet,
arrival_time_ms)``: :func:`tap_arrivals` replaces it *on one receiver instance* (no class is
changed, nothing else in the process sees it) with a function that stamps the packet on the
trial clock and hands it to the adapter, and nothing else. The packet has by then been read
from the socket, decrypted (SRTP) and parsed in the same step, with no buffer between; aiortc's
own jitter buffer and decoder are never fed, so they hold nothing (the remote track is not
read). This function is the only place that touches aiortc's internals on the receive path.
Where the kernel stamped the packet's datagram (:mod:`._kernel_stamps`), that stamp is used: a
loop busy elsewhere then does not make the stamp late.

:class:`InboundAudio` then follows the stream in arrival order on the consumer's side: it
decodes each packet, counts lost, late and duplicate packets and the interarrival jitter of RFC
3550 (6.4.1), and gives each packet's audio its arrival stamp, so the listener's own documented
jitter buffer places it (docs/channel.md).

**Silence between replies** is counted, not delivered (:mod:`.._silence_gate`, the rule the
streaming wires share).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pydantic import JsonValue

from .._silence_gate import SilenceGate
from .._socket import LOOP_STAMPED_ATTRIBUTE, MAX_LOOP_STAMPED
from ._opus import MAX_OPUS_PACKET_BYTES, OPUS_RATE_HZ, OpusLineDecoder

if TYPE_CHECKING:
    from aiortc import RTCRtpReceiver
    from aiortc.rtp import RtpPacket

    from ._kernel_stamps import KernelStamps

SEQUENCE_MODULO = 1 << 16
#: a jump of the sequence number this large is a new stream (RFC 3550 A.1's MAX_DROPOUT)
MAX_DROPOUT = 3000


@dataclass(frozen=True, slots=True)
class ArrivedPacket:
    """One RTP packet as it arrived: its stamp on the trial clock and what the product put in."""

    arrival_ns: int
    sequence: int
    timestamp: int
    payload: bytes
    #: the stamp is the kernel's receive stamp of its datagram (else the loop took it: when it
    #: read the datagram, or when the packet was tapped)
    kernel_stamped: bool = False


def tap_arrivals(receiver: RTCRtpReceiver, deliver: Callable[[ArrivedPacket], None], *,
                 clock_ns: Callable[[], int], kernel: KernelStamps | None = None) -> None:
    """Every RTP packet routed to ``receiver`` goes to ``deliver``, stamped as it arrives,
    instead of into aiortc's jitter buffer (see the module's docstring): with the kernel's
    receive stamp of its datagram when ``kernel`` has one, else now."""

    async def arrived(packet: RtpPacket, arrival_time_ms: int) -> None:
        taken = kernel.take_stamp(packet.ssrc, packet.sequence_number) if kernel else None
        stamp, by_kernel = (clock_ns(), False) if taken is None else taken
        deliver(ArrivedPacket(stamp, packet.sequence_number, packet.timestamp, packet.payload,
                              by_kernel))

    receiver._handle_rtp_packet = arrived  # type: ignore[method-assign]


class LoopStamped:
    """The stamps of a call's events that the loop took, not the kernel: what a
    kernel-stamped call's ``closed`` event lists (``arrival_stamps: kernel_stream``), so those
    stay charged the loop's lag. Given up past :data:`MAX_LOOP_STAMPED` (then nothing is
    listed, and every arrival is charged)."""

    def __init__(self) -> None:
        self._stamps: list[int] | None = []

    def note(self, stamp_ns: int) -> None:
        stamps = self._stamps
        if stamps is not None:
            if len(stamps) < MAX_LOOP_STAMPED:
                stamps.append(stamp_ns)
            else:
                self._stamps = None

    def record(self, closed_ns: int) -> dict[str, JsonValue]:
        """The ``closed`` event's list: each stamp as [ns before ``closed_ns``, how late it may
        be at most: -1, not known, so the loop's lag bounds it]; nothing once given up."""
        if self._stamps is None:
            return {}
        return {LOOP_STAMPED_ATTRIBUTE: [[closed_ns - stamp, -1] for stamp in self._stamps]}


class RateGuard:
    """At most ``per_second`` in any one-second window (from its first arrival); ``admit``
    says whether one more fits, ``exceeded`` counts the windows that overflowed."""

    def __init__(self, per_second: int):
        self.per_second = per_second
        self._window_ns = 0
        self._count = 0
        self.refused = 0
        self.exceeded = 0

    def admit(self, now_ns: int) -> bool:
        if now_ns - self._window_ns >= 1_000_000_000:
            self._window_ns, self._count = now_ns, 0
        self._count += 1
        if self._count <= self.per_second:
            return True
        if self._count == self.per_second + 1:
            self.exceeded += 1
        self.refused += 1
        return False


class InboundAudio:
    """The product's packets in arrival order -> canonical PCM with their arrival stamps."""

    def __init__(self) -> None:
        self._decoder = OpusLineDecoder()
        self._highest: int | None = None  # extended sequence number
        self._transit: int | None = None
        self.packets = 0
        self.lost = 0
        self.late = 0
        self.undecodable = 0
        self._silence = SilenceGate()
        self.jitter_units = 0.0  # RFC 3550's J, in RTP timestamp units
        self.first_arrival_ns: int | None = None
        self.last_arrival_ns: int | None = None

    def push(self, packet: ArrivedPacket) -> np.ndarray | None:
        """The packet's audio, or None when it is late, a duplicate or not Opus."""
        self.packets += 1
        if self.first_arrival_ns is None:
            self.first_arrival_ns = packet.arrival_ns
        self.last_arrival_ns = packet.arrival_ns
        if not self._in_order(packet.sequence):
            self.late += 1
            return None
        self._jitter(packet)
        if not packet.payload or len(packet.payload) > MAX_OPUS_PACKET_BYTES:
            self.undecodable += 1
            return None
        wide = self._decoder.decode(packet.payload)
        if wide is None:
            self.undecodable += 1
            return None
        if not self._silence.admits(wide, packet.arrival_ns):
            return None  # withheld: not worth halving (the filter costs more than the decode)
        return self._decoder.halve(wide)

    def _in_order(self, sequence: int) -> bool:
        if self._highest is None:
            self._highest = sequence
            return True
        delta = (sequence - self._highest) % SEQUENCE_MODULO
        if delta == 0 or delta >= SEQUENCE_MODULO - MAX_DROPOUT:
            return False  # a duplicate, or older than what was already placed
        if delta < MAX_DROPOUT:
            self.lost += delta - 1
        self._highest += delta
        return True

    def _jitter(self, packet: ArrivedPacket) -> None:
        arrival_units = packet.arrival_ns * OPUS_RATE_HZ // 1_000_000_000
        transit = arrival_units - packet.timestamp
        if self._transit is not None:
            difference = abs(transit - self._transit)
            if difference < OPUS_RATE_HZ * 10:  # a timestamp jump is not jitter
                self.jitter_units += (difference - self.jitter_units) / 16
        self._transit = transit

    @property
    def quiet(self) -> int:
        """Silent packets counted but not delivered."""
        return self._silence.withheld

    def facts(self) -> dict[str, JsonValue]:
        """The RTP-level facts of the call, for the bundle."""
        return {"packets": self.packets, "lost": self.lost, "late_or_duplicate": self.late,
                "undecodable": self.undecodable, "silence_not_delivered": self.quiet,
                "jitter_ms": round(self.jitter_units * 1000 / OPUS_RATE_HZ, 3)}
