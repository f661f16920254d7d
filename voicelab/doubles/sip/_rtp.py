"""RTP packets (RFC 3550 5.1), telephone-event payloads (RFC 4733 2.3), both directions, and
the RTCP sender report the double sends (RFC 3550 6.4.1, with the SDES CNAME 6.5.1 that every
compound packet carries).

A received packet is hostile: :func:`parse_rtp` returns None for anything that is not a
version-2 packet whose CSRC list, extension and padding fit inside it, or whose payload is
over :data:`MAX_PAYLOAD_BYTES`; the caller counts it and moves on.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from ._settings import KEYS

MAX_PAYLOAD_BYTES = 1500
_HEADER = struct.Struct("!BBHII")
_EVENT = struct.Struct("!BBH")


@dataclass(frozen=True, slots=True)
class RtpPacket:
    payload_type: int
    marker: bool
    sequence: int
    timestamp: int
    ssrc: int
    payload: bytes


def parse_rtp(data: bytes) -> RtpPacket | None:
    """The packet in ``data``, or None when it is not a well-formed RTP packet."""
    if len(data) < _HEADER.size:
        return None
    first, second, sequence, timestamp, ssrc = _HEADER.unpack_from(data)
    if first >> 6 != 2:
        return None
    offset = _HEADER.size + 4 * (first & 0x0F)
    if first & 0x10:  # a header extension: 16-bit profile, 16-bit length in words
        if len(data) < offset + 4:
            return None
        offset += 4 + 4 * struct.unpack_from("!H", data, offset + 2)[0]
    end = len(data)
    if first & 0x20:
        end -= data[-1]
    if end < offset or end - offset > MAX_PAYLOAD_BYTES or (first & 0x20 and data[-1] == 0):
        return None
    return RtpPacket(payload_type=second & 0x7F, marker=bool(second & 0x80),
                     sequence=sequence, timestamp=timestamp, ssrc=ssrc,
                     payload=bytes(data[offset:end]))


def build_rtp(packet: RtpPacket) -> bytes:
    return _HEADER.pack(0x80, (0x80 if packet.marker else 0) | packet.payload_type,
                        packet.sequence & 0xFFFF, packet.timestamp & 0xFFFFFFFF,
                        packet.ssrc) + packet.payload


@dataclass(frozen=True, slots=True)
class KeyEvent:
    """One telephone-event payload: the key, whether it is an end packet, its duration in
    timestamp units (8 kHz samples)."""

    key: str
    end: bool
    volume: int
    duration: int


def parse_key_event(payload: bytes) -> KeyEvent | None:
    """A DTMF event payload (events 0-15), None for anything else."""
    if len(payload) != _EVENT.size:
        return None
    event, flags, duration = _EVENT.unpack(payload)
    if event >= len(KEYS):
        return None
    return KeyEvent(key=KEYS[event], end=bool(flags & 0x80), volume=flags & 0x3F,
                    duration=duration)


def build_key_event(key: str, *, end: bool, duration: int, volume: int = 10) -> bytes:
    return _EVENT.pack(KEYS.index(key), (0x80 if end else 0) | (volume & 0x3F),
                       duration & 0xFFFF)


#: seconds from the NTP epoch (1900) to the Unix epoch (1970)
NTP_OFFSET_SECONDS = 2_208_988_800
RTCP_SENDER_REPORT, RTCP_SDES = 200, 202
CNAME = b"voicelab-double@127.0.0.1"


def sender_report(*, ssrc: int, rtp_timestamp: int, packets: int, octets: int) -> bytes:
    """A compound RTCP packet: a sender report stamped with the wall clock, then SDES CNAME."""
    now = time.time() + NTP_OFFSET_SECONDS
    seconds = int(now)
    fraction = int((now - seconds) * 2**32) & 0xFFFFFFFF
    report = struct.pack("!BBHIIIIII", 0x80, RTCP_SENDER_REPORT, 6, ssrc, seconds & 0xFFFFFFFF,
                         fraction, rtp_timestamp & 0xFFFFFFFF, packets & 0xFFFFFFFF,
                         octets & 0xFFFFFFFF)
    item = bytes([1, len(CNAME)]) + CNAME + b"\x00"  # CNAME, then the end of the list
    item += b"\x00" * (-(4 + len(item)) % 4)
    chunk = struct.pack("!I", ssrc) + item
    sdes = struct.pack("!BBH", 0x81, RTCP_SDES, len(chunk) // 4) + chunk
    return report + sdes


def is_rtcp(data: bytes) -> bool:
    """Whether ``data`` starts like an RTCP packet (version 2, types 200-204)."""
    return len(data) >= 8 and data[0] >> 6 == 2 and 200 <= data[1] <= 204
