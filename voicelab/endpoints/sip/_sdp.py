"""SDP (RFC 4566) for one audio stream and the offer/answer rules of RFC 3264 a caller needs.

The far end's SDP is hostile input: over :data:`MAX_SDP_BYTES`, more than :data:`MAX_LINES`
lines or :data:`MAX_MEDIA` media sections, it is refused with :class:`SdpError`; a line that is
not ``x=value`` is refused too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._codecs import CLOCK_RATE_HZ, Codec

MAX_SDP_BYTES = 16 * 1024
MAX_LINES = 256
MAX_MEDIA = 64
MAX_FORMATS = 64

#: the payload types we offer (RFC 3551's static ones for G.711, a dynamic one for Opus) and
#: the rtpmap encodings of the codecs we speak (RFC 7587: Opus always says 48000/2)
OFFER_TYPES: dict[Codec, int] = {"pcmu": 0, "pcma": 8, "opus": 111}
STATIC_TYPES: dict[Codec, int] = {"pcmu": 0, "pcma": 8}
ENCODINGS: dict[Codec, str] = {"pcmu": "PCMU/8000", "pcma": "PCMA/8000", "opus": "opus/48000/2"}
#: RFC 7587 6.1: mono voice, in-band FEC, the 24 kHz voicelab codes at
OPUS_FMTP = "useinbandfec=1;maxplaybackrate=24000;stereo=0;sprop-stereo=0"
TELEPHONE_EVENT_TYPE = 101
#: telephone-event on the Opus clock (RFC 4733 2.1: an event's clock is its audio's)
TELEPHONE_EVENT_48K_TYPE = 102
DIRECTIONS = ("sendrecv", "sendonly", "recvonly", "inactive")
_REFLECTED = {"sendrecv": "sendrecv", "sendonly": "recvonly", "recvonly": "sendonly",
              "inactive": "inactive"}


class SdpError(ValueError):
    """An SDP that cannot be used; ``hostile`` is True when it broke a bound."""

    def __init__(self, detail: str, *, hostile: bool = False) -> None:
        super().__init__(detail)
        self.hostile = hostile


@dataclass
class MediaDescription:
    """One ``m=`` section: its port, formats in order, rtpmaps, connection and direction."""

    media: str
    port: int
    proto: str
    formats: list[int]
    rtpmap: dict[int, str] = field(default_factory=dict)  # pt -> "pcmu/8000" (lower case)
    fmtp: dict[int, str] = field(default_factory=dict)  # pt -> its a=fmtp parameters
    connection: str | None = None
    direction: str = "sendrecv"
    rtcp_port: int | None = None


@dataclass
class SessionDescription:
    connection: str | None
    media: list[MediaDescription]

    def audio(self) -> MediaDescription | None:
        """The first audio stream that was not rejected (port 0), if any."""
        for media in self.media:
            if media.media == "audio" and media.port != 0:
                return media
        return None


@dataclass(frozen=True)
class AudioChoice:
    """What one side's SDP settles for the audio stream."""

    codec: Codec
    payload_type: int
    telephone_event: int | None
    #: the clock of telephone-event's durations (8000, or 48000 beside Opus)
    event_clock_hz: int
    address: str
    port: int
    direction: str
    rtcp_port: int | None


def parse_sdp(data: bytes) -> SessionDescription:
    """Parse an SDP body; raises :class:`SdpError`."""
    if len(data) > MAX_SDP_BYTES:
        raise SdpError(f"SDP of {len(data)} bytes", hostile=True)
    lines = data.decode("utf-8", errors="replace").splitlines()
    if len(lines) > MAX_LINES:
        raise SdpError(f"SDP of {len(lines)} lines", hostile=True)
    session = SessionDescription(connection=None, media=[])
    for line in lines:
        if not line.strip():
            continue
        kind, equals, value = line.partition("=")
        if not equals or len(kind) != 1:
            raise SdpError(f"bad SDP line {line[:60]!r}")
        _line(session, kind, value.strip())
    return session


def _line(session: SessionDescription, kind: str, value: str) -> None:
    current = session.media[-1] if session.media else None
    if kind == "m":
        if len(session.media) >= MAX_MEDIA:
            raise SdpError("too many media sections", hostile=True)
        session.media.append(_media(value))
    elif kind == "c":
        address = _connection(value)
        if current is None:
            session.connection = address
        else:
            current.connection = address
    elif kind == "a" and current is not None:
        _attribute(current, value)


def _media(value: str) -> MediaDescription:
    parts = value.split()
    if len(parts) < 3 or not parts[1].split("/")[0].isdigit():
        raise SdpError(f"bad m= line {value[:60]!r}")
    port = int(parts[1].split("/")[0])
    if port > 65535 or len(parts) - 3 > MAX_FORMATS:
        raise SdpError(f"bad m= line {value[:60]!r}", hostile=len(parts) - 3 > MAX_FORMATS)
    formats = [int(p) for p in parts[3:] if p.isdigit() and int(p) < 128]
    return MediaDescription(media=parts[0].lower(), port=port, proto=parts[2], formats=formats)


def _connection(value: str) -> str:
    parts = value.split()
    if len(parts) != 3 or parts[0] != "IN" or parts[1] not in ("IP4", "IP6"):
        raise SdpError(f"bad c= line {value[:60]!r}")
    return parts[2].split("/")[0]


def _attribute(media: MediaDescription, value: str) -> None:
    name, _, rest = value.partition(":")
    name = name.lower()
    if name in DIRECTIONS:
        media.direction = name
    elif name == "rtpmap":
        pt_text, _, encoding = rest.partition(" ")
        if pt_text.isdigit() and int(pt_text) < 128 and len(media.rtpmap) < MAX_FORMATS:
            media.rtpmap[int(pt_text)] = encoding.strip().lower()
    elif name == "fmtp":
        pt_text, _, parameters = rest.partition(" ")
        if pt_text.isdigit() and int(pt_text) < 128 and len(media.fmtp) < MAX_FORMATS:
            media.fmtp[int(pt_text)] = parameters.strip()[:256]
    elif name == "rtcp":
        port_text = rest.split()[0] if rest.split() else ""
        if port_text.isdigit() and 0 < int(port_text) < 65536:
            media.rtcp_port = int(port_text)


def codec_of(media: MediaDescription, payload_type: int) -> Codec | None:
    """The codec of ``payload_type`` in ``media`` (by rtpmap, else by its static number)."""
    encoding = media.rtpmap.get(payload_type)
    if encoding is None:
        return next((codec for codec, pt in STATIC_TYPES.items() if pt == payload_type), None)
    name, _, rate = encoding.partition("/")
    if name == "opus":  # RFC 7587 4: always 48000/2, whatever the audio's bandwidth
        return "opus" if rate.split("/")[0] == "48000" else None
    for codec in STATIC_TYPES:
        if name == codec and rate.split("/")[0] in ("8000", ""):
            return codec
    return None


def telephone_event_of(media: MediaDescription, clock_hz: int = 8000) -> tuple[int, int] | None:
    """The telephone-event payload type and its clock: the one on ``clock_hz`` (the audio
    codec's, RFC 4733 2.1) when there is one, else the first."""
    found: list[tuple[int, int]] = []
    for payload_type in media.formats:
        name, _, rate = media.rtpmap.get(payload_type, "").partition("/")
        if name == "telephone-event" and rate.isdigit() and int(rate) in (8000, 48_000):
            found.append((payload_type, int(rate)))
    return next((item for item in found if item[1] == clock_hz), found[0] if found else None)


def choose_audio(session: SessionDescription, codecs: tuple[Codec, ...], *,
                 prefer_theirs: bool = True) -> AudioChoice:
    """The codec both sides have, the far end's address and port; raises :class:`SdpError`.

    For an answer the first of the answer's formats we offered wins (it is the answerer's
    choice); for a far end's offer too (RFC 3264 section 6.1 lets the answerer pick; taking
    the offerer's preference keeps what the far end wanted)."""
    media = session.audio()
    if media is None:
        raise SdpError("no audio stream")
    address = media.connection or session.connection
    if address is None:
        raise SdpError("no connection address")
    candidates = [(pt, codec_of(media, pt)) for pt in media.formats]
    usable = [(pt, codec) for pt, codec in candidates if codec is not None and codec in codecs]
    if not prefer_theirs:
        usable.sort(key=lambda item: codecs.index(item[1]))
    if not usable:
        raise SdpError("no codec in common")
    payload_type, codec = usable[0]
    event = telephone_event_of(media, CLOCK_RATE_HZ[codec])
    return AudioChoice(codec=codec, payload_type=payload_type,
                       telephone_event=None if event is None else event[0],
                       event_clock_hz=8000 if event is None else event[1], address=address,
                       port=media.port, direction=media.direction, rtcp_port=media.rtcp_port)


def build_sdp(*, address: str, port: int, rtcp_port: int | None,
              formats: list[tuple[int, str]], telephone_events: list[tuple[int, int]],
              direction: str = "sendrecv", session_id: int, version: int = 1) -> bytes:
    """One audio stream's SDP: ``formats`` are (payload type, rtpmap encoding) in order,
    ``telephone_events`` (payload type, clock) after them."""
    family = "IP6" if ":" in address else "IP4"
    types = [pt for pt, _ in formats] + [pt for pt, _ in telephone_events]
    lines = ["v=0", f"o=voicelab {session_id} {version} IN {family} {address}", "s=voicelab",
             f"c=IN {family} {address}", "t=0 0",
             f"m=audio {port} RTP/AVP {' '.join(str(pt) for pt in types)}"]
    for pt, encoding in formats:
        lines.append(f"a=rtpmap:{pt} {encoding}")
        if encoding.startswith("opus/"):
            lines.append(f"a=fmtp:{pt} {OPUS_FMTP}")
    for pt, clock_hz in telephone_events:
        lines += [f"a=rtpmap:{pt} telephone-event/{clock_hz}", f"a=fmtp:{pt} 0-16"]
    if rtcp_port is not None:
        lines.append(f"a=rtcp:{rtcp_port}")
    lines += ["a=ptime:20", f"a={direction}"]
    return ("\r\n".join(lines) + "\r\n").encode("ascii")


def offer_formats(codecs: tuple[Codec, ...]) -> list[tuple[int, str]]:
    return [(OFFER_TYPES[codec], ENCODINGS[codec]) for codec in codecs]


def offer_events(codecs: tuple[Codec, ...]) -> list[tuple[int, int]]:
    """telephone-event on 8 kHz, and on 48 kHz too when Opus is offered."""
    events = [(TELEPHONE_EVENT_TYPE, 8000)]
    if "opus" in codecs:
        events.append((TELEPHONE_EVENT_48K_TYPE, 48_000))
    return events


def reflect_direction(direction: str) -> str:
    """Our answer's direction for the far end's offered one (RFC 3264 section 6.1)."""
    return _REFLECTED.get(direction, "sendrecv")
