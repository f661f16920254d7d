"""Our RTCP reports (RFC 3550 section 6.4): a sender report once our line has sent media,
else a receiver report, each with one report block on the far end's stream (fraction lost
since the last report, cumulative loss, highest sequence, jitter, LSR/DLSR) and an SDES CNAME,
as a compound packet must carry (section 6.1).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ._rtp import CLOCK_RATE_HZ, ReceiveStats

#: seconds between 1900 (NTP's epoch) and 1970 (Unix time's)
NTP_EPOCH_OFFSET = 2_208_988_800
REPORT_INTERVAL_SECONDS = 5.0


@dataclass(frozen=True)
class SenderState:
    """What an SR says of our own stream."""

    ssrc: int
    packets: int
    octets: int
    rtp_timestamp: int  # the RTP timestamp that corresponds to the report's NTP time


def ntp_time(unix_seconds: float) -> tuple[int, int]:
    seconds = int(unix_seconds) + NTP_EPOCH_OFFSET
    fraction = int((unix_seconds % 1) * 2**32) & 0xFFFFFFFF
    return seconds & 0xFFFFFFFF, fraction


class RtcpReporter:
    """Builds our reports; :meth:`sender_report_received` notes the far end's last SR."""

    def __init__(self, cname: str) -> None:
        self._cname = cname.encode("utf-8")[:255]
        self._prior_expected = 0
        self._prior_received = 0
        self._last_sr: tuple[int, int] | None = None  # (NTP middle 32 bits, received ns)

    def sender_report_received(self, ntp_middle: int, received_ns: int) -> None:
        self._last_sr = (ntp_middle & 0xFFFFFFFF, received_ns)

    def build(self, *, ssrc: int, stats: ReceiveStats, now_ns: int, unix_seconds: float,
              sender: SenderState | None) -> bytes:
        """One compound packet: SR or RR, then SDES."""
        blocks = [self._block(stats, now_ns)] if stats.ssrc is not None else []
        if sender is not None:
            msw, lsw = ntp_time(unix_seconds)
            body = struct.pack("!IIIIII", sender.ssrc, msw, lsw,
                               sender.rtp_timestamp & 0xFFFFFFFF, sender.packets & 0xFFFFFFFF,
                               sender.octets & 0xFFFFFFFF)
            report = _header(200, len(blocks), body + b"".join(blocks))
        else:
            report = _header(201, len(blocks), struct.pack("!I", ssrc) + b"".join(blocks))
        return report + self._sdes(ssrc)

    def _block(self, stats: ReceiveStats, now_ns: int) -> bytes:
        received = stats.packets
        expected = received + stats.lost
        expected_interval = expected - self._prior_expected
        lost_interval = expected_interval - (received - self._prior_received)
        self._prior_expected, self._prior_received = expected, received
        fraction = 0 if expected_interval <= 0 or lost_interval <= 0 \
            else min(255, (lost_interval << 8) // expected_interval)
        cumulative = max(-0x800000, min(0x7FFFFF, stats.lost)) & 0xFFFFFF
        lsr, dlsr = 0, 0
        if self._last_sr is not None:
            lsr = self._last_sr[0]
            dlsr = min(0xFFFFFFFF, (now_ns - self._last_sr[1]) * 65536 // 1_000_000_000)
        return struct.pack("!IIIIII", stats.ssrc or 0, (fraction << 24) | cumulative,
                           stats.highest_sequence, int(stats.jitter) & 0xFFFFFFFF, lsr, dlsr)

    def _sdes(self, ssrc: int) -> bytes:
        chunk = struct.pack("!IBB", ssrc, 1, len(self._cname)) + self._cname + b"\x00"
        chunk += b"\x00" * (-len(chunk) % 4)
        return _header(202, 1, chunk)


def _header(packet_type: int, count: int, body: bytes) -> bytes:
    return struct.pack("!BBH", 0x80 | count, packet_type, len(body) // 4) + body


def rtp_timestamp_now(last_timestamp: int, last_sent_ns: int, now_ns: int, *,
                      clock_hz: int = CLOCK_RATE_HZ) -> int:
    """The RTP timestamp of ``now_ns`` on the clock of the packet sent at ``last_sent_ns``."""
    return (last_timestamp + (now_ns - last_sent_ns) * clock_hz // 1_000_000_000) \
        & 0xFFFFFFFF
