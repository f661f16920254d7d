"""The double's RTP: one UDP socket per call, a paced sender and a bounded receiver.

The sender is a media clock, as a phone's is: from the first packet on, one 20 ms packet
(160 bytes of G.711, or an Opus packet) every 20 ms, the next frame of what is being said or silence between
utterances. Each packet is stamped with ``time.perf_counter_ns`` just before ``sendto``, and
an :class:`Utterance` keeps the stamps of its first and last packet and how far behind its
pace the clock fell (a busy machine stalls the double, and the caller really hears that).
Stopping an utterance (a barge-in, a key) takes effect at the next packet.

Every ``rtcp_interval_seconds`` it sends an RTCP sender report (on its own port, announced
with ``a=rtcp``) to the caller's RTCP address; the caller's RTCP packets are counted.

The receiver stamps each datagram as it arrives and hands it on; packets over
``max_packets_per_second`` in any one-second window are counted and dropped unread, so an
RTP flood costs the double almost nothing.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ._codec import Codec, silence, timestamp_step
from ._rtp import RtpPacket, build_rtp, is_rtcp, sender_report

FRAME_BYTES = 160  # a G.711 frame (an Opus packet's length varies)
FRAME_SECONDS = 0.02
NS_PER_SAMPLE = 125_000  # 8 kHz
#: a clock this far behind skips ahead rather than bursting packets to catch up
RESYNC_SECONDS = 0.2


@dataclass
class Utterance:
    """One thing the double says: a menu prompt or an agent reply, and its send stamps."""

    kind: str  # "prompt" | "reply"
    label: str  # the menu's name, or the reply's number ("0": the greeting)
    text: str
    frames: list[bytes]
    sent: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    #: where its first audible sample is: (frame, sample in the frame); None: nothing audible
    speech_at: tuple[int, int] | None = None
    #: when that sample was sent: the stamp of the packet holding it plus its place in the
    #: packet (None: not sent yet) -- the truth of the utterance's speech onset
    speech_start_ns: int | None = None
    most_late_ms: float = 0.0
    stopped: str | None = None  # why it ended: finished, key_barge_in, barge_in, hang_up
    on_start: Callable[[Utterance], None] | None = field(default=None, repr=False)
    on_end: Callable[[Utterance], None] | None = field(default=None, repr=False)

    @property
    def playing(self) -> bool:
        return self.stopped is None


class _RtpProtocol(asyncio.DatagramProtocol):
    def __init__(self, on_datagram: Callable[[bytes, tuple[str, int], int], None]):
        self.on_datagram = on_datagram

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.on_datagram(data, addr, time.perf_counter_ns())

    def error_received(self, exc: Exception) -> None:
        pass  # ICMP port unreachable: the caller's socket closed; the call ends by SIP


class RateLimit:
    """At most ``per_second`` events in each one-second window; counts the rest."""

    def __init__(self, per_second: int):
        self.per_second, self.window_start, self.count, self.dropped = per_second, 0, 0, 0

    def allow(self, now_ns: int) -> bool:
        if now_ns - self.window_start >= 1_000_000_000:
            self.window_start, self.count = now_ns, 0
        self.count += 1
        if self.count > self.per_second:
            self.dropped += 1
            return False
        return True


class MediaStream:
    """A call's RTP socket: receives into ``on_datagram``; sends paced utterances to
    ``remote`` once :meth:`start_clock` runs (from ``sender``'s socket when given: foreign)."""

    def __init__(self, *, host: str, on_datagram: Callable[[bytes, tuple[str, int], int], None],
                 max_packets_per_second: int):
        self.host = host
        self.on_datagram = on_datagram
        self.rate = RateLimit(max_packets_per_second)
        self.received = self.foreign = 0
        self.transport: asyncio.DatagramTransport | None = None
        self.sender: asyncio.DatagramTransport | None = None
        self.remote: tuple[str, int] = ("127.0.0.1", 9)
        self.payload_type = 0
        self.codec: Codec = "PCMU"
        self.ssrc = secrets.randbits(32)
        self.sequence = secrets.randbits(16)
        self.timestamp = secrets.randbits(32)
        self.queue: list[Utterance] = []
        self.packets_sent = self.octets_sent = 0
        self.rtcp: asyncio.DatagramTransport | None = None
        self.rtcp_remote: tuple[str, int] = ("127.0.0.1", 9)
        self.rtcp_every_ticks = 0  # a sender report every this many packets (0: none)
        self.rtcp_received = self.reports_sent = 0
        #: the caller holds the call (its offer is sendonly or inactive): no packets, and what
        #: is being said waits
        self.paused = False
        self._clock: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        assert self.transport is not None
        return int(self.transport.get_extra_info("sockname")[1])

    @property
    def rtcp_port(self) -> int | None:
        return int(self.rtcp.get_extra_info("sockname")[1]) if self.rtcp is not None else None

    async def open(self, *, foreign: bool = False, rtcp: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self.transport, _ = await loop.create_datagram_endpoint(
            lambda: _RtpProtocol(self.on_datagram), local_addr=(self.host, 0))
        if rtcp:
            self.rtcp, _ = await loop.create_datagram_endpoint(
                lambda: _RtpProtocol(self._rtcp_datagram), local_addr=(self.host, 0))
        if foreign:  # media from another port than the one the SDP answer names
            self.sender, _ = await loop.create_datagram_endpoint(
                asyncio.DatagramProtocol, local_addr=(self.host, 0))

    def _rtcp_datagram(self, data: bytes, source: tuple[str, int], arrived_ns: int) -> None:
        """The caller's RTCP is counted, not read: the double reports, the client measures."""
        if is_rtcp(data):
            self.rtcp_received += 1

    def send_report(self) -> None:
        if self.rtcp is not None and self.packets_sent:
            self.rtcp.sendto(sender_report(ssrc=self.ssrc, rtp_timestamp=self.timestamp,
                                           packets=self.packets_sent, octets=self.octets_sent),
                             self.rtcp_remote)
            self.reports_sent += 1

    def accept(self, source: tuple[str, int], arrived_ns: int,
               violation: Callable[[str], None]) -> bool:
        """Whether to read a packet that came from ``source``: within the rate, and from the
        address the offer named (symmetric RTP)."""
        if not self.rate.allow(arrived_ns):
            violation(f"RTP over {self.rate.per_second} packets a second")
            return False
        if (source[0], source[1]) != self.remote:
            self.foreign += 1
            violation(f"RTP from {source[0]}:{source[1]}, not the offered address")
            return False
        self.received += 1
        return True

    def send_packet(self, payload_type: int, payload: bytes, *, marker: bool = False,
                    timestamp: int | None = None) -> int:
        """Send one packet now; returns the stamp taken just before ``sendto``."""
        transport = self.sender or self.transport
        assert transport is not None
        self.sequence = (self.sequence + 1) & 0xFFFF
        data = build_rtp(RtpPacket(payload_type, marker, self.sequence,
                                   self.timestamp if timestamp is None else timestamp,
                                   self.ssrc, payload))
        sent_ns = time.perf_counter_ns()
        transport.sendto(data, self.remote)
        self.packets_sent += 1
        self.octets_sent += len(payload)
        return sent_ns

    def start_clock(self) -> None:
        if self._clock is None:
            self._clock = asyncio.create_task(self._run_clock())

    def say(self, utterance: Utterance) -> None:
        self.queue.append(utterance)

    @property
    def speaking(self) -> Utterance | None:
        return self.queue[0] if self.queue else None

    def stop(self, why: str) -> list[Utterance]:
        """Stop what is being said and drop what waits; returns them (each told why)."""
        stopped, self.queue = self.queue, []
        for utterance in stopped:
            self._end(utterance, why)
        return stopped

    def _end(self, utterance: Utterance, why: str) -> None:
        utterance.stopped = why
        if utterance.on_end is not None:
            utterance.on_end(utterance)

    async def _run_clock(self) -> None:
        loop = asyncio.get_running_loop()
        begin = loop.time()
        tick = 0
        while True:
            due = begin + tick * FRAME_SECONDS
            await asyncio.sleep(max(0.0, due - loop.time()))
            late = loop.time() - due
            if late > RESYNC_SECONDS:
                begin += late
            self._tick(late)
            tick += 1
            if self.rtcp_every_ticks and tick % self.rtcp_every_ticks == 0:
                self.send_report()

    def _tick(self, late_s: float) -> None:
        if self.paused:
            return
        utterance = self.speaking
        self.timestamp = (self.timestamp + timestamp_step(self.codec)) & 0xFFFFFFFF
        if utterance is None:
            self.send_packet(self.payload_type, silence(self.codec))
            return
        frame = utterance.frames[utterance.sent]
        sent_ns = self.send_packet(self.payload_type, frame, marker=utterance.sent == 0)
        if utterance.speech_at is not None and utterance.speech_at[0] == utterance.sent:
            utterance.speech_start_ns = sent_ns + utterance.speech_at[1] * NS_PER_SAMPLE
        utterance.most_late_ms = max(utterance.most_late_ms, round(late_s * 1000, 3))
        if utterance.first_ns is None:
            utterance.first_ns = sent_ns
            if utterance.on_start is not None:
                utterance.on_start(utterance)
        utterance.last_ns = sent_ns
        utterance.sent += 1
        if utterance.sent >= len(utterance.frames):
            self.queue.pop(0)
            self._end(utterance, "finished")

    async def close(self) -> None:
        clock, self._clock = self._clock, None
        if clock is not None:
            clock.cancel()
            await asyncio.gather(clock, return_exceptions=True)
        self.queue = []
        for transport in (self.transport, self.sender, self.rtcp):
            if transport is not None:
                transport.close()
