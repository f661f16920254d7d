"""RTP (RFC 3550) and telephone-event (RFC 4733) packets, receive statistics and RTCP reports.

Parsers take any bytes: a packet that is not RTP version 2, is truncated, or whose padding or
extension runs past its end yields None (the caller counts and drops it), never an exception.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pydantic import JsonValue

RTP_HEADER = struct.Struct("!BBHII")
EVENT_PAYLOAD = struct.Struct("!BBH")
CLOCK_RATE_HZ = 8000
MAX_RTCP_BLOCKS = 31
#: a sequence jump this large starts the count again (RFC 3550 A.1's MAX_DROPOUT)
MAX_DROPOUT = 3000
_SEEN_WINDOW = 1024

DTMF_EVENTS = "0123456789*#ABCD"


@dataclass(frozen=True, slots=True)
class RtpHeader:
    sequence: int
    timestamp: int
    payload_type: int
    marker: bool
    ssrc: int
    payload: bytes


def pack_rtp(*, payload_type: int, sequence: int, timestamp: int, ssrc: int, payload: bytes,
             marker: bool = False) -> bytes:
    first = 0x80
    second = (0x80 if marker else 0) | (payload_type & 0x7F)
    return RTP_HEADER.pack(first, second, sequence & 0xFFFF, timestamp & 0xFFFFFFFF,
                           ssrc & 0xFFFFFFFF) + payload


def parse_rtp(data: bytes) -> RtpHeader | None:
    """One RTP packet, or None when ``data`` is not a well-formed version 2 packet."""
    if len(data) < RTP_HEADER.size or data[0] >> 6 != 2:
        return None
    first, second, sequence, timestamp, ssrc = RTP_HEADER.unpack_from(data)
    offset = RTP_HEADER.size + 4 * (first & 0x0F)
    if first & 0x10:  # a header extension: 4 bytes then its length in words
        if len(data) < offset + 4:
            return None
        offset += 4 + 4 * struct.unpack_from("!H", data, offset + 2)[0]
    end = len(data)
    if first & 0x20:
        if end == 0 or data[-1] == 0:
            return None
        end -= data[-1]
    if offset > end:
        return None
    return RtpHeader(sequence=sequence, timestamp=timestamp, payload_type=second & 0x7F,
                     marker=bool(second & 0x80), ssrc=ssrc, payload=bytes(data[offset:end]))


def is_rtcp(data: bytes) -> bool:
    """An RTCP packet multiplexed on the RTP port (RFC 5761 section 4)."""
    return len(data) >= 8 and data[0] >> 6 == 2 and 192 <= data[1] <= 223


@dataclass(frozen=True, slots=True)
class TelephoneEvent:
    event: int
    end: bool
    volume: int
    duration: int  # timestamp units (8 kHz)

    @property
    def digit(self) -> str | None:
        return DTMF_EVENTS[self.event] if self.event < len(DTMF_EVENTS) else None


def pack_event(event: TelephoneEvent) -> bytes:
    flags = (0x80 if event.end else 0) | (event.volume & 0x3F)
    return EVENT_PAYLOAD.pack(event.event & 0xFF, flags, min(event.duration, 0xFFFF))


def parse_event(payload: bytes) -> TelephoneEvent | None:
    if len(payload) < EVENT_PAYLOAD.size:
        return None
    event, flags, duration = EVENT_PAYLOAD.unpack_from(payload)
    return TelephoneEvent(event=event, end=bool(flags & 0x80), volume=flags & 0x3F,
                          duration=duration)


def event_code(digit: str) -> int:
    """The RFC 4733 event code of a DTMF key; raises ValueError for anything else."""
    index = DTMF_EVENTS.find(digit.upper())
    if index < 0 or len(digit) != 1:
        raise ValueError(f"not a DTMF key: {digit!r}")
    return index


class ReceiveStats:
    """Loss, duplicates, late packets and interarrival jitter of one received stream.

    Jitter is RFC 3550 section 6.4.1 / A.8: the transit time's change between consecutive
    packets, smoothed with gain 1/16, in timestamp units; arrivals are the packets' own
    receive stamps. A packet older than the highest sequence seen is late; one whose sequence
    was already seen (within the last :data:`_SEEN_WINDOW`) is a duplicate and is dropped.
    A new SSRC, or a sequence jump over :data:`MAX_DROPOUT`, starts a new count (the loss of
    the streams before is kept).
    """

    def __init__(self) -> None:
        #: the stream's RTP clock (8000 for G.711, 48000 for Opus)
        self.clock_hz = CLOCK_RATE_HZ
        self.packets = 0
        self.bytes = 0
        self.duplicates = 0
        self.late = 0
        self.jitter = 0.0
        self.ssrc: int | None = None
        self._base = 0  # first extended sequence of the current stream
        self._highest = -1  # highest extended sequence of the current stream (-1: none yet)
        self._stream_packets = 0
        self._lost_before = 0
        self._seen: set[int] = set()
        self._transit: float | None = None

    def accept(self, header: RtpHeader, received_ns: int) -> bool:
        """Account for a packet; False when it is a duplicate (to be dropped)."""
        if self._highest < 0 or self.ssrc != header.ssrc:
            self._restart(header)
        else:
            delta = (header.sequence - self._highest) & 0xFFFF
            if MAX_DROPOUT < delta < 0x10000 - MAX_DROPOUT:
                self._restart(header)
        extended = self._extend(header.sequence)
        if extended in self._seen:
            self.duplicates += 1
            return False
        if extended < self._highest:
            self.late += 1
        self._seen.add(extended)
        if len(self._seen) > 2 * _SEEN_WINDOW:
            floor = self._highest - _SEEN_WINDOW
            self._seen = {s for s in self._seen if s > floor}
        self._highest = max(self._highest, extended)
        self._stream_packets += 1
        self.packets += 1
        self.bytes += len(header.payload)
        self._jitter(header.timestamp, received_ns)
        return True

    def use_clock(self, clock_hz: int) -> None:
        """The codec changed: jitter is kept in the new clock's units from here on."""
        if clock_hz != self.clock_hz:
            self.jitter = self.jitter * clock_hz / self.clock_hz
            self.clock_hz, self._transit = clock_hz, None

    def _restart(self, header: RtpHeader) -> None:
        self._lost_before = self.lost
        self.ssrc = header.ssrc
        self._base = self._highest = 0x10000 + header.sequence
        self._stream_packets = 0
        self._seen.clear()
        self._transit = None

    def _extend(self, sequence: int) -> int:
        candidate = (self._highest & ~0xFFFF) | sequence
        if candidate - self._highest > 0x8000:
            candidate -= 0x10000
        elif self._highest - candidate > 0x8000:
            candidate += 0x10000
        return candidate

    def _jitter(self, timestamp: int, received_ns: int) -> None:
        transit = received_ns * self.clock_hz / 1e9 - timestamp
        if self._transit is not None:
            d = abs(transit - self._transit)
            if d < self.clock_hz * 10:  # a timestamp jump (a new clock) is not jitter
                self.jitter += (d - self.jitter) / 16
        self._transit = transit

    @property
    def lost(self) -> int:
        """Packets expected and never received (RFC 3550 A.3), late arrivals counted in."""
        if self._highest < 0:
            return self._lost_before
        expected = self._highest - self._base + 1
        return self._lost_before + max(0, expected - self._stream_packets)

    @property
    def jitter_ms(self) -> float:
        return self.jitter * 1000 / self.clock_hz

    @property
    def highest_sequence(self) -> int:
        """The extended highest sequence received (cycles << 16 | sequence), as RTCP reports
        it."""
        return max(0, self._highest - 0x10000) & 0xFFFFFFFF


def parse_rtcp(data: bytes, *, clock_hz: int = CLOCK_RATE_HZ) -> list[dict[str, JsonValue]]:
    """The sender and receiver reports of a compound RTCP packet (RFC 3550 section 6.4).

    Other packet types (SDES, BYE, APP) are named only; a truncated packet ends the list."""
    reports: list[dict[str, JsonValue]] = []
    offset = 0
    while offset + 8 <= len(data) and len(reports) < 8:
        first, packet_type, words = struct.unpack_from("!BBH", data, offset)
        end = offset + 4 * (words + 1)
        if first >> 6 != 2 or end > len(data):
            break
        count = first & 0x1F
        if packet_type in (200, 201):
            reports.append(_report(data[offset:end], packet_type, count, clock_hz))
        else:
            reports.append({"type": packet_type})
        offset = end
    return reports


def _report(packet: bytes, packet_type: int, count: int,
            clock_hz: int) -> dict[str, JsonValue]:
    ssrc = struct.unpack_from("!I", packet, 4)[0]
    report: dict[str, JsonValue] = {"type": "sr" if packet_type == 200 else "rr", "ssrc": ssrc}
    offset = 8
    if packet_type == 200 and len(packet) >= 28:
        ntp_msw, ntp_lsw, rtp_ts, packets, octets = struct.unpack_from("!IIIII", packet, 8)
        report.update(rtp_timestamp=rtp_ts, packets_sent=packets, octets_sent=octets,
                      ntp_middle=((ntp_msw & 0xFFFF) << 16) | (ntp_lsw >> 16))
        offset = 28
    blocks: list[JsonValue] = []
    for _ in range(min(count, MAX_RTCP_BLOCKS)):
        if offset + 24 > len(packet):
            break
        source, lost_word, highest, jitter, _lsr, _dlsr = struct.unpack_from(
            "!IIIIII", packet, offset)
        cumulative = lost_word & 0xFFFFFF
        if cumulative & 0x800000:
            cumulative -= 0x1000000
        blocks.append({"ssrc": source, "fraction_lost": (lost_word >> 24) / 256,
                       "cumulative_lost": cumulative, "highest_sequence": highest,
                       "jitter_ms": jitter * 1000 / clock_hz})
        offset += 24
    report["blocks"] = blocks
    return report
