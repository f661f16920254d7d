"""The SDP offer/answer the double takes part in (RFC 4566, RFC 3264), for one audio stream.

The offer is read within limits (:data:`MAX_SDP_BYTES`, :data:`MAX_SDP_LINES`) and reduced to
what the double needs: where to send RTP, the offered payload types in order, and the
telephone-event payload type (RFC 4733: the one on the chosen codec's clock when the offer has
it). The answer picks the first offered codec the double speaks (G.711 mu-law or A-law, or
Opus: ``opus/48000/2``, RFC 7587).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Literal

from ._codec import CLOCK_HZ, Codec, opus_available

MAX_SDP_BYTES = 16_384
MAX_SDP_LINES = 256
MAX_PAYLOAD_TYPES = 32
#: RFC 3551 static payload types the double speaks, by their rtpmap encoding names
STATIC_CODECS = {0: "PCMU", 8: "PCMA"}
#: RFC 7587 7: the answer's Opus parameters (mono voice, in-band FEC)
OPUS_FMTP = "useinbandfec=1;stereo=0;sprop-stereo=0"
Direction = Literal["sendrecv", "sendonly", "recvonly", "inactive"]
_DIRECTIONS: tuple[Direction, ...] = ("sendrecv", "sendonly", "recvonly", "inactive")


class SdpError(ValueError):
    """An offer the double cannot read or answer."""


@dataclass
class SdpOffer:
    """The audio stream an offer describes."""

    address: str
    port: int
    payload_types: list[int]
    encodings: dict[int, str] = field(default_factory=dict)  # rtpmap names, upper case
    clocks: dict[int, int] = field(default_factory=dict)  # rtpmap clock rates
    direction: Direction = "sendrecv"
    rtcp_port: int | None = None  # a=rtcp (RFC 3605); RTP's port + 1 when absent

    @property
    def rtcp(self) -> tuple[str, int]:
        """Where the caller takes RTCP."""
        return self.address, self.rtcp_port or min(self.port + 1, 65535)

    def codec(self) -> tuple[int, Codec] | None:
        """The first offered codec the double speaks: ``(payload type, name)``."""
        for payload_type in self.payload_types:
            codec = self._codec_of(payload_type)
            if codec is not None:
                return payload_type, codec
        return None

    def payload_type_of(self, codec: Codec) -> int | None:
        """The payload type the offer gives ``codec`` (None: not offered)."""
        return next((pt for pt in self.payload_types
                     if self._codec_of(pt) == codec), None)

    def _codec_of(self, payload_type: int) -> Codec | None:
        name = self.encodings.get(payload_type, STATIC_CODECS.get(payload_type, ""))
        clock = self.clocks.get(payload_type, 8000)
        if name in ("PCMU", "PCMA") and clock == 8000:
            return "PCMU" if name == "PCMU" else "PCMA"
        if name == "OPUS" and clock == 48_000 and opus_available():
            return "OPUS"
        return None

    def telephone_event_for(self, codec: Codec) -> tuple[int, int] | None:
        """telephone-event's payload type and clock beside ``codec``: the one on the codec's
        clock (RFC 4733 2.1), else the first offered."""
        events = [pt for pt in self.payload_types if self.encodings.get(pt) == "TELEPHONE-EVENT"]
        found = [(pt, self.clocks.get(pt, 8000)) for pt in events]
        return next((item for item in found if item[1] == CLOCK_HZ[codec]),
                    found[0] if found else None)

    @property
    def telephone_event(self) -> int | None:
        """telephone-event's payload type beside the chosen codec."""
        chosen = self.codec()
        event = self.telephone_event_for(chosen[1] if chosen is not None else "PCMU")
        return None if event is None else event[0]


def parse_offer(body: bytes) -> SdpOffer:
    """The first audio stream of an SDP offer, its connection address and attributes."""
    if len(body) > MAX_SDP_BYTES:
        raise SdpError(f"an SDP of {len(body)} bytes (at most {MAX_SDP_BYTES})")
    try:
        lines = body.decode("utf-8").replace("\r\n", "\n").split("\n")
    except UnicodeDecodeError:
        raise SdpError("an SDP that is not UTF-8") from None
    if len(lines) > MAX_SDP_LINES:
        raise SdpError(f"an SDP of more than {MAX_SDP_LINES} lines")
    session_address: str | None = None
    offer: SdpOffer | None = None
    media_address: str | None = None
    for line in lines:
        kind, _, value = line.strip().partition("=")
        if kind == "m":
            if offer is not None:
                break  # only the first stream matters, and only if it is audio
            offer = _media_line(value)
        elif kind == "c":
            address = _connection(value)
            if offer is None:
                session_address = address
            else:
                media_address = address
        elif kind == "a" and offer is not None:
            _attribute(offer, value)
    if offer is None:
        raise SdpError("an SDP without an audio stream")
    found = media_address or session_address
    if found is None:
        raise SdpError("an SDP without a connection address")
    offer.address = found
    return offer


def _media_line(value: str) -> SdpOffer:
    parts = value.split()
    if len(parts) < 4 or parts[0] != "audio" or not parts[1].isdigit():
        raise SdpError("the first m= line is not an audio stream with a port")
    if parts[2] != "RTP/AVP":
        raise SdpError(f"transport {parts[2][:20]!r}: only RTP/AVP is spoken")
    formats = parts[3:]
    if len(formats) > MAX_PAYLOAD_TYPES or not all(f.isdigit() and int(f) < 128 for f in formats):
        raise SdpError("m= payload types must be at most 32 numbers under 128")
    port = int(parts[1])
    if not 0 < port < 65536:
        raise SdpError("an audio port out of range")
    return SdpOffer(address="", port=port, payload_types=[int(f) for f in formats])


def _connection(value: str) -> str:
    parts = value.split()
    if len(parts) != 3 or parts[0] != "IN" or parts[1] != "IP4" or \
            not re.fullmatch(r"\d{1,3}(?:\.\d{1,3}){3}", parts[2]):
        raise SdpError("c= must be IN IP4 with a numeric address")
    return parts[2]


def _attribute(offer: SdpOffer, value: str) -> None:
    if value in _DIRECTIONS:
        offer.direction = _DIRECTIONS[_DIRECTIONS.index(value)]
        return
    rtcp = re.fullmatch(r"rtcp:(\d{1,5})(?: .*)?", value.strip())
    if rtcp and 0 < int(rtcp.group(1)) < 65536:
        offer.rtcp_port = int(rtcp.group(1))
        return
    match = re.fullmatch(r"rtpmap:(\d{1,3}) ([A-Za-z0-9_.-]{1,32})/(\d{1,6})(?:/\d+)?",
                         value.strip())
    if match and int(match.group(1)) in offer.payload_types:
        offer.encodings[int(match.group(1))] = match.group(2).upper()
        offer.clocks[int(match.group(1))] = int(match.group(3))


def answer(offer: SdpOffer, *, address: str, port: int, payload_type: int, codec: Codec,
           direction: Direction = "sendrecv", padding_bytes: int = 0,
           rtcp_port: int | None = None) -> bytes:
    """The answer: one audio stream on ``address:port`` with the chosen codec and, when
    offered, telephone-event; ``rtcp_port`` is announced with ``a=rtcp``. ``padding_bytes`` > 0 makes it that much bigger (``huge_sdp``)."""
    session = int(time.time())
    formats = [payload_type]
    found = offer.telephone_event_for(codec)
    event, event_clock_hz = found if found is not None else (None, 8000)
    lines = ["v=0", f"o=voicelab-double {session} {session} IN IP4 {address}", "s=voicelab",
             f"c=IN IP4 {address}", "t=0 0"]
    attributes = [f"a=rtpmap:{payload_type} opus/48000/2", f"a=fmtp:{payload_type} {OPUS_FMTP}"] \
        if codec == "OPUS" else [f"a=rtpmap:{payload_type} {codec}/8000"]
    if event is not None:
        formats.append(event)
        attributes += [f"a=rtpmap:{event} telephone-event/{event_clock_hz}",
                       f"a=fmtp:{event} 0-16"]
    lines.append(f"m=audio {port} RTP/AVP {' '.join(map(str, formats))}")
    lines += [*attributes, "a=ptime:20", f"a={direction}"]
    if rtcp_port is not None:
        lines.append(f"a=rtcp:{rtcp_port}")
    text = "\r\n".join(lines) + "\r\n"
    if padding_bytes > 0:
        line = "a=x-voicelab-padding:" + "x" * 1000 + "\r\n"
        text += line * (padding_bytes // len(line) + 1)
    return text.encode("ascii")
