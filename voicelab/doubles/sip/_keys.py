"""Keys the caller presses, by either method, and the audio packets beside them.

RFC 4733: an event is one RTP timestamp; its first packet is the key (stamped with that
packet's arrival), the rest of its packets, and its end packet sent three times, are the same
key and are not counted again (one ``key_ended`` with the event's duration). SIP INFO: an
``application/dtmf-relay`` body (``Signal=5`` and ``Duration=160`` lines) or an
``application/dtmf`` one (the key alone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import JsonValue

from ._media import FRAME_BYTES
from ._rtp import RtpPacket, parse_key_event, parse_rtp
from ._settings import KEYS

MAX_INFO_BODY_BYTES = 1024
INFO_TYPES = ("application/dtmf-relay", "application/dtmf")


class Note(Protocol):
    """How a key is reported (the call's ``note``)."""

    def __call__(self, kind: str, **details: JsonValue) -> None: ...


class KeyReader:
    """One call's keys: :meth:`rtp` for each media packet, :meth:`info_key` for an INFO."""

    def __init__(self, note: Note):
        self.note = note
        self.event_timestamp: int | None = None
        self.ended_timestamp: int | None = None
        self.count = 0
        #: telephone-event's clock (8000, or 48000 beside Opus): its durations' unit
        self.event_clock_hz = 8000
        #: the audio codec's packet length when it is fixed (160 bytes of G.711); None: Opus
        self.frame_bytes: int | None = FRAME_BYTES

    def rtp(self, data: bytes, *, audio_type: int, event_type: int | None, arrived_ns: int,
            hear: Callable[[bytes], None], violation: Callable[[str], None]) -> str | None:
        """Read one packet: audio goes to ``hear``; returns a key when one was pressed."""
        packet = parse_rtp(data)
        if packet is None:
            violation("a datagram that is not an RTP packet")
            return None
        if packet.payload_type == audio_type:
            if self.frame_bytes is not None and len(packet.payload) != self.frame_bytes:
                violation(f"an audio packet of {len(packet.payload)} bytes, not 20 ms")
            hear(packet.payload)
            return None
        if event_type is not None and packet.payload_type == event_type:
            return self._event(packet, arrived_ns, violation)
        violation(f"RTP payload type {packet.payload_type}, not in the answer")
        return None

    def _event(self, packet: RtpPacket, arrived_ns: int,
               violation: Callable[[str], None]) -> str | None:
        event = parse_key_event(packet.payload)
        if event is None:
            violation("a telephone-event payload that is not a key")
            return None
        pressed = None
        if packet.timestamp != self.event_timestamp:
            self.event_timestamp = packet.timestamp
            self.received(event.key, "rfc4733", arrived_ns)
            pressed = event.key
        if event.end and packet.timestamp != self.ended_timestamp:
            self.ended_timestamp = packet.timestamp
            self.note("key_ended", digit=event.key, duration_ms=event.duration * 1000 / self.event_clock_hz)
        return pressed

    def received(self, key: str, method: str, first_ns: int) -> None:
        self.count += 1
        details: dict[str, JsonValue] = {"digit": key, "method": method,
                                         "first_packet_ns": first_ns}
        self.note("key_received", **details)

    @staticmethod
    def info_key(content_type: str, body: bytes) -> str:
        """The key an INFO carries; a ValueError says what is wrong with it."""
        if content_type not in INFO_TYPES:
            raise ValueError(f"content type {content_type[:60]!r} carries no key")
        if len(body) > MAX_INFO_BODY_BYTES:
            raise ValueError(f"a body over {MAX_INFO_BODY_BYTES} bytes")
        try:
            text = body.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError("a body that is not ASCII") from None
        signal = text.strip()
        if content_type == "application/dtmf-relay":
            fields: dict[str, str] = {}
            for line in text.splitlines()[:16]:
                name, _, value = line.partition("=")
                fields[name.strip().lower()] = value.strip()
            signal = fields.get("signal", "")
            duration = fields.get("duration")
            if duration is not None and not (duration.isdigit() and len(duration) <= 6):
                raise ValueError("Duration is not a number of milliseconds")
        if len(signal) != 1 or signal.upper() not in KEYS:
            raise ValueError("the signal is not one key (0-9 * # A-D)")
        return signal.upper()
