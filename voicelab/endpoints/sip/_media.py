"""The receiving side of the call's RTP: one UDP socket for media (RTP, and RTCP multiplexed
on it), one for RTCP, both stamping each datagram with ``clock_ns()`` before anything else.

Symmetric RTP: media is taken only from the address the far end's SDP gave; datagrams from
elsewhere are counted (``foreign_packets``; what arrives before the SDP that names the far end's
address is kept, up to :data:`MAX_EARLY_PACKETS`, and judged once it is known) and, past :data:`FOREIGN_LIMIT`, reported once as
hostile. Over :data:`MAX_PACKETS_PER_SECOND` datagrams in one second the rest of that second is
dropped and an ``rtp_flood`` reported once. Media of the negotiated payload type goes to
``on_packet`` in arrival order (duplicates dropped); a telephone-event becomes one key press
per event; other payload types are counted and dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import JsonValue

from ._rtp import CLOCK_RATE_HZ, ReceiveStats, is_rtcp, parse_event, parse_rtcp, parse_rtp
from ._stamped_socket import StampedDatagramSocket
from ._types import RtpPacket

logger = logging.getLogger(__name__)

MAX_PACKETS_PER_SECOND = 1000
FOREIGN_LIMIT = 50
#: datagrams kept, with their stamps, until the answer says where media comes from
MAX_EARLY_PACKETS = 64
MAX_RTCP_RECORDS = 100
_RECENT_EVENTS = 16

Address = tuple[str, int]


@dataclass
class MediaTarget:
    """What the negotiation settled: where media comes from and which payload types matter."""

    remote: Address
    payload_type: int
    telephone_event: int | None
    clock_hz: int = CLOCK_RATE_HZ  # the media's RTP clock
    event_clock_hz: int = CLOCK_RATE_HZ  # telephone-event's


class MediaReceiver(asyncio.DatagramProtocol):
    """Counts, checks and delivers what arrives on the RTP socket (see the module docstring).

    ``on_hostile(what, received_ns, detail)`` and ``on_dtmf(digit, duration_ms, received_ns)``
    go to the call, which reports them; ``on_rtcp`` gets each parsed report.
    """

    def __init__(self, *, clock_ns: Callable[[], int], on_packet: Callable[[RtpPacket], None],
                 on_dtmf: Callable[[str, float, int], None],
                 on_hostile: Callable[[str, int, str], None],
                 on_rtcp: Callable[[int, list[dict[str, JsonValue]]], None]) -> None:
        self._clock_ns = clock_ns
        self._on_packet = on_packet
        self._on_dtmf = on_dtmf
        self._on_hostile = on_hostile
        self._on_rtcp = on_rtcp
        #: the RTP socket, set by the call once it is bound (it sends from it: symmetric RTP)
        self.transport: StampedDatagramSocket | None = None
        self.target: MediaTarget | None = None
        self.stats = ReceiveStats()
        self.foreign_packets = 0
        self.malformed = 0
        self.flood_dropped = 0
        self.other_payload_types: dict[int, int] = {}
        self.first_ns: int | None = None
        self._window_start = 0
        self._window_count = 0
        self._ended_events: deque[tuple[int, int]] = deque(maxlen=_RECENT_EVENTS)
        self._open_event: tuple[int, int, str, float] | None = None  # ssrc, ts, digit, ms
        self._early: list[tuple[int, bytes, tuple[object, object]]] = []
        self.early_dropped = 0

    def send(self, data: bytes) -> bool:
        """Send one packet to the far end's media address; False when that cannot be."""
        if self.transport is None or self.transport.is_closing() or self.target is None:
            return False
        self.transport.sendto(data, self.target.remote)
        return True

    def set_target(self, target: MediaTarget) -> None:
        """Take media from ``target`` from now on, and what it sent before we knew it."""
        self.target = target
        self.stats.use_clock(target.clock_hz)
        early, self._early = list(self._early), []
        for received_ns, data, source in early:
            self._take(received_ns, data, source)

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        self.stamped_datagram_received(data, (str(addr[0]), int(str(addr[1]))),
                                       self._clock_ns())

    def stamped_datagram_received(self, data: bytes, addr: tuple[str, int],
                                  received_ns: int) -> None:
        """One datagram, received (by the kernel, where it says) at ``received_ns``."""
        if not self.within_rate(received_ns):
            return
        source = (addr[0], addr[1])
        if self.target is None:
            # the far end's media can overtake the answer that says where it comes from: kept
            # (a few) until the answer is read; past that, dropped and counted, not "foreign"
            if len(self._early) < MAX_EARLY_PACKETS:
                self._early.append((received_ns, data, source))
            else:
                self.early_dropped += 1
                if self.early_dropped == FOREIGN_LIMIT:
                    self._on_hostile("media_before_answer", received_ns,
                                     f"over {MAX_EARLY_PACKETS + FOREIGN_LIMIT} packets before "
                                     "the answer said where media comes from")
            return
        self._take(received_ns, data, source)

    def _take(self, received_ns: int, data: bytes, source: tuple[object, object]) -> None:
        target = self.target
        if target is None or source != target.remote:
            self.foreign_packets += 1
            if self.foreign_packets == 1:
                logger.debug("media from %s, expected from %s: %s", source,
                             None if target is None else target.remote, data[:2].hex())
            if self.foreign_packets == FOREIGN_LIMIT:
                self._on_hostile("foreign_source", received_ns,
                                 f"{FOREIGN_LIMIT} packets from addresses the SDP did not give")
            return
        if self.first_ns is None:
            self.first_ns = received_ns
        if is_rtcp(data):
            self.rtcp_received(received_ns, data)
            return
        header = parse_rtp(data)
        if header is None:
            self.malformed += 1
        elif header.payload_type == target.payload_type:
            if self.stats.accept(header, received_ns):
                self._on_packet(RtpPacket(received_ns, header.sequence, header.timestamp,
                                          header.payload_type, header.marker, header.ssrc,
                                          header.payload))
        elif header.payload_type == target.telephone_event:
            self._telephone_event(header.ssrc, header.timestamp, header.payload, received_ns)
        else:
            count = self.other_payload_types.get(header.payload_type, 0)
            self.other_payload_types[header.payload_type] = count + 1

    def within_rate(self, received_ns: int) -> bool:
        if received_ns - self._window_start >= 1_000_000_000:
            self._window_start, self._window_count = received_ns, 0
        self._window_count += 1
        if self._window_count <= MAX_PACKETS_PER_SECOND:
            return True
        self.flood_dropped += 1
        if self.flood_dropped == 1:
            self._on_hostile("rtp_flood", received_ns,
                             f"over {MAX_PACKETS_PER_SECOND} packets in a second")
        return False

    def _telephone_event(self, ssrc: int, timestamp: int, payload: bytes,
                         received_ns: int) -> None:
        """One key press per event (RFC 4733 2.5.2): the event's timestamp names it, its end
        packet (sent three times) reports it once; an event whose end never came is
        reported when the next one starts."""
        event = parse_event(payload)
        if event is None or event.digit is None:
            self.malformed += 1
            return
        key = (ssrc, timestamp)
        if key in self._ended_events:
            return
        clock_hz = self.target.event_clock_hz if self.target is not None else CLOCK_RATE_HZ
        duration_ms = event.duration * 1000 / clock_hz
        if self._open_event is not None and self._open_event[:2] != key:
            _, _, digit, open_ms = self._open_event
            self._ended_events.append(self._open_event[:2])
            self._on_dtmf(digit, open_ms, received_ns)
        self._open_event = None
        if event.end:
            self._ended_events.append(key)
            self._on_dtmf(event.digit, duration_ms, received_ns)
        else:
            self._open_event = (ssrc, timestamp, event.digit, duration_ms)

    def rtcp_received(self, received_ns: int, data: bytes) -> None:
        clock_hz = self.target.clock_hz if self.target is not None else CLOCK_RATE_HZ
        reports = parse_rtcp(data[:1500], clock_hz=clock_hz)
        if reports:
            self._on_rtcp(received_ns, reports)

    def facts(self) -> dict[str, JsonValue]:
        return {"packets": self.stats.packets, "bytes": self.stats.bytes,
                "lost": self.stats.lost, "duplicates": self.stats.duplicates,
                "late": self.stats.late, "jitter_ms": round(self.stats.jitter_ms, 3),
                "foreign_packets": self.foreign_packets, "malformed": self.malformed,
                "flood_dropped": self.flood_dropped, "early_dropped": self.early_dropped,
                "other_payload_types": {str(pt): n for pt, n in
                                        sorted(self.other_payload_types.items())}}


class RtcpReceiver(asyncio.DatagramProtocol):
    """The RTCP port (``a=rtcp:``): each datagram stamped, then handed to the media receiver
    when it comes from the far end's host (or before the answer named it: a report carries
    no media, and baresip sends its first one with its answer)."""

    def __init__(self, media: MediaReceiver, clock_ns: Callable[[], int]) -> None:
        self._media = media
        self._clock_ns = clock_ns

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        self.stamped_datagram_received(data, (str(addr[0]), int(str(addr[1]))),
                                       self._clock_ns())

    def stamped_datagram_received(self, data: bytes, addr: tuple[str, int],
                                  received_ns: int) -> None:
        if not self._media.within_rate(received_ns):
            return
        target = self._media.target
        if target is None or addr[0] == target.remote[0]:  # a report can overtake the answer
            self._media.rtcp_received(received_ns, data)
        else:
            self._media.foreign_packets += 1
