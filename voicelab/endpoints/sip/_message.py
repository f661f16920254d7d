"""SIP messages (RFC 3261 section 7): parsing within bounds, serializing, TCP framing.

Everything here reads bytes from a far end that may be hostile: a message over
:data:`MAX_MESSAGE_BYTES`, more than :data:`MAX_HEADERS` header lines, a bad start line or a
header line that is not ``name: value`` raises :class:`MessageError` naming what it was, never
another exception. Compact header forms (``i``, ``v``, ``l`` ...) are expanded to their full
names and folded header lines (a line starting with white space continues the one before)
are unfolded, as section 7.3.1 requires of a parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_MESSAGE_BYTES = 64 * 1024
MAX_HEADERS = 200

#: RFC 3261 section 7.3.3 and the IANA registry's compact forms
COMPACT_FORMS = {
    "i": "Call-ID", "m": "Contact", "e": "Content-Encoding", "l": "Content-Length",
    "c": "Content-Type", "f": "From", "s": "Subject", "k": "Supported", "t": "To", "v": "Via",
    "o": "Event", "r": "Refer-To", "b": "Referred-By", "x": "Session-Expires",
    "u": "Allow-Events",
}
_CANONICAL = {name.lower(): name for name in (
    "Call-ID", "CSeq", "Via", "From", "To", "Contact", "Content-Length", "Content-Type",
    "Max-Forwards", "User-Agent", "WWW-Authenticate", "Proxy-Authenticate", "Authorization",
    "Proxy-Authorization", "Allow", "Supported", "Record-Route", "Route", "Server", "Reason",
    "Event", "Subject", "Content-Encoding")}
#: headers whose comma-separated values are separate values (section 7.3.1); others are not
#: split, since an authentication challenge holds commas inside one value
_LIST_HEADERS = frozenset({"via", "route", "record-route", "allow", "supported"})
_TOKEN = re.compile(r"^[A-Za-z0-9\-.!%*_+`'~]{1,64}$")
_STATUS_LINE = re.compile(r"^SIP/2\.0 ([1-6][0-9]{2}) ?(.{0,256})$")
_REQUEST_LINE = re.compile(r"^([A-Za-z0-9\-.!%*_+`'~]{1,32}) (\S{1,1024}) SIP/2\.0$")


class MessageError(ValueError):
    """A message that cannot be taken: ``kind`` is ``oversized_message``,
    ``too_many_headers`` or ``malformed``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def canonical_name(name: str) -> str:
    """The full, conventionally capitalized header name (compact forms expanded)."""
    lower = name.lower()
    if lower in COMPACT_FORMS:
        return COMPACT_FORMS[lower]
    return _CANONICAL.get(lower, "-".join(part.capitalize() for part in name.split("-")))


def valid_header_name(name: str) -> bool:
    """True for a header name that is a SIP token (section 25.1)."""
    return bool(_TOKEN.match(name))


@dataclass
class SipMessage:
    """One request (``method`` set) or response (``status`` set), headers in their order."""

    method: str | None = None
    request_uri: str | None = None
    status: int | None = None
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @property
    def start_line(self) -> str:
        if self.method is not None:
            return f"{self.method} {self.request_uri} SIP/2.0"
        return f"SIP/2.0 {self.status} {self.reason}"

    def header(self, name: str) -> str | None:
        """The first value of ``name`` (any spelling), or None."""
        values = self.headers_named(name)
        return values[0] if values else None

    def headers_named(self, name: str) -> list[str]:
        """Every value of ``name``, list headers split at their commas."""
        wanted = canonical_name(name)
        values: list[str] = []
        for header_name, value in self.headers:
            if header_name == wanted:
                if wanted.lower() in _LIST_HEADERS:
                    values.extend(part.strip() for part in value.split(",") if part.strip())
                else:
                    values.append(value)
        return values

    def cseq(self) -> tuple[int, str]:
        """The CSeq number and method; raises :class:`MessageError` when malformed."""
        parts = (self.header("CSeq") or "").split()
        if len(parts) != 2 or not parts[0].isdigit() or len(parts[0]) > 10:
            raise MessageError("malformed", "bad CSeq")
        return int(parts[0]), parts[1].upper()

    def to_bytes(self) -> bytes:
        """The message on the wire, its Content-Length computed from the body."""
        lines = [self.start_line]
        lines += [f"{name}: {value}" for name, value in self.headers
                  if name != "Content-Length"]
        lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + self.body


def via_params(via: str) -> dict[str, str | None]:
    """The parameters of one Via value (``branch``, ``received``, ``rport`` ...)."""
    params: dict[str, str | None] = {}
    for part in via.split(";")[1:33]:
        name, equals, value = part.strip().partition("=")
        params[name.lower()] = value if equals else None
    return params


def parse_message(data: bytes) -> SipMessage:
    """Parse one complete message (a UDP datagram or one TCP frame)."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise MessageError("oversized_message", f"{len(data)} bytes")
    head, body = _split_head(data)
    lines = _unfold(head.decode("utf-8", errors="replace").split("\n"))
    if not lines:
        raise MessageError("malformed", "empty message")
    message = _start_line(lines[0])
    if len(lines) - 1 > MAX_HEADERS:
        raise MessageError("too_many_headers", f"{len(lines) - 1} header lines")
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not valid_header_name(name):
            raise MessageError("malformed", f"bad header line {line[:60]!r}")
        message.headers.append((canonical_name(name), value.strip()))
    message.body = _body(message, body)
    return message


def _split_head(data: bytes) -> tuple[bytes, bytes]:
    data = data.lstrip(b"\r\n")
    for separator in (b"\r\n\r\n", b"\n\n"):
        index = data.find(separator)
        if index >= 0:
            return data[:index].replace(b"\r\n", b"\n"), data[index + len(separator):]
    return data.rstrip(b"\r\n").replace(b"\r\n", b"\n"), b""


def _unfold(raw_lines: list[str]) -> list[str]:
    lines: list[str] = []
    for raw in raw_lines:
        line = raw.rstrip("\r")
        if line[:1] in (" ", "\t") and lines:
            lines[-1] += " " + line.strip()
        elif line:
            lines.append(line)
        if len(lines) > MAX_HEADERS + 1:
            raise MessageError("too_many_headers", f"over {MAX_HEADERS} header lines")
    return lines


def _start_line(line: str) -> SipMessage:
    status = _STATUS_LINE.match(line)
    if status:
        return SipMessage(status=int(status.group(1)), reason=status.group(2).strip())
    request = _REQUEST_LINE.match(line)
    if request:
        return SipMessage(method=request.group(1).upper(), request_uri=request.group(2))
    raise MessageError("malformed", f"bad start line {line[:60]!r}")


def _body(message: SipMessage, body: bytes) -> bytes:
    length_text = message.header("Content-Length")
    if length_text is None:
        return body
    if not length_text.isdigit() or len(length_text) > 6:
        raise MessageError("malformed", "bad Content-Length")
    length = int(length_text)
    if length > len(body):
        raise MessageError("malformed", "body shorter than its Content-Length")
    return body[:length]


class StreamFramer:
    """Splits a TCP byte stream into messages by their Content-Length (section 18.3).

    The buffer never holds more than one message's bound: a head that has not ended within
    :data:`MAX_MESSAGE_BYTES`, or a Content-Length that would pass it, raises
    :class:`MessageError` (the connection is then to be closed: framing is lost).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[SipMessage]:
        self._buffer += data
        messages: list[SipMessage] = []
        while True:
            while self._buffer[:2] == b"\r\n":  # keep-alive CRLFs between messages
                del self._buffer[:2]
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > MAX_MESSAGE_BYTES:
                    raise MessageError("oversized_message", "a head without an end")
                return messages
            length = _framed_length(bytes(self._buffer[:end]))
            total = end + 4 + length
            if total > MAX_MESSAGE_BYTES:
                raise MessageError("oversized_message", f"{total} bytes")
            if len(self._buffer) < total:
                return messages
            frame = bytes(self._buffer[:total])
            del self._buffer[:total]
            messages.append(parse_message(frame))


def _framed_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:MAX_HEADERS + 2]:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() in (b"content-length", b"l"):
            text = value.strip()
            if not text.isdigit():
                raise MessageError("malformed", "bad Content-Length")
            if len(text) > 6:
                raise MessageError("oversized_message", f"Content-Length of {len(text)} digits")
            return int(text)
    return 0
