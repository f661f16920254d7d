"""SIP messages as the double's server side reads and writes them (RFC 3261 section 7).

Everything here is hostile input: a message is refused before it is parsed when it is over
:data:`MAX_MESSAGE_BYTES`, has more than :data:`MAX_HEADERS` header fields or a line longer
than :data:`MAX_LINE_BYTES`, and every problem is one :class:`SipError` whose text says what
was wrong (the server answers 400 with it, or counts the datagram when it is not a request).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

#: the biggest message the double reads (a request to a UAS is small; a stream is cut off)
MAX_MESSAGE_BYTES = 65_536
MAX_HEADERS = 100
MAX_LINE_BYTES = 8_192
#: RFC 3261 7.3.3: the one-letter forms a sender may use
COMPACT_NAMES = {"v": "via", "f": "from", "t": "to", "i": "call-id", "m": "contact",
                 "l": "content-length", "c": "content-type", "k": "supported", "s": "subject",
                 "e": "content-encoding", "o": "event", "r": "refer-to", "u": "allow-events"}
#: how a header is spelled when the double writes it
CANONICAL_NAMES = {"via": "Via", "from": "From", "to": "To", "call-id": "Call-ID",
                   "cseq": "CSeq", "contact": "Contact", "content-length": "Content-Length",
                   "content-type": "Content-Type", "www-authenticate": "WWW-Authenticate",
                   "max-forwards": "Max-Forwards", "allow": "Allow", "user-agent": "User-Agent"}
REASONS = {100: "Trying", 180: "Ringing", 183: "Session Progress", 200: "OK",
           400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 415: "Unsupported Media Type",
           480: "Temporarily Unavailable", 481: "Call/Transaction Does Not Exist",
           486: "Busy Here", 487: "Request Terminated", 488: "Not Acceptable Here",
           500: "Server Internal Error", 501: "Not Implemented", 503: "Service Unavailable",
           600: "Busy Everywhere", 603: "Decline"}
MAGIC_COOKIE = "z9hG4bK"  # RFC 3261 8.1.1.7: every branch this double makes starts with it
_TOKEN = re.compile(r"^[A-Za-z0-9.!%*_+`'~-]+$")


class SipError(ValueError):
    """A message that is not SIP, or not within the double's limits."""


@dataclass
class SipMessage:
    """A request (``method`` and ``uri``) or a response (``status``), its header fields in
    order with lower-case full names, and its body."""

    method: str | None = None
    uri: str = ""
    status: int | None = None
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of ``name`` (lower case), None when absent."""
        return next((value for key, value in self.headers if key == name), None)

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    @property
    def call_id(self) -> str:
        return self.header("call-id") or ""

    @property
    def cseq(self) -> tuple[int, str]:
        """``(number, method)``; a missing or malformed CSeq is a :class:`SipError`."""
        number, _, method = (self.header("cseq") or "").strip().partition(" ")
        if not number.isdigit() or len(number) > 10 or not method.strip():
            raise SipError("malformed CSeq")
        return int(number), method.strip().upper()

    @property
    def branch(self) -> str:
        return header_parameter(self.header("via") or "", "branch") or ""


def parse_message(data: bytes) -> SipMessage:
    """One SIP message (a whole datagram, or one framed from a stream)."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise SipError(f"message of {len(data)} bytes (at most {MAX_MESSAGE_BYTES})")
    head, separator, body = data.partition(b"\r\n\r\n")
    if not separator:
        raise SipError("no blank line after the header fields")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        raise SipError("header fields are not UTF-8") from None
    lines = _unfolded(text.split("\r\n"))
    message = _start_line(lines[0])
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        name = name.strip().lower()
        if not colon or not _TOKEN.match(name):
            raise SipError("a header line without a name")
        message.headers.append((COMPACT_NAMES.get(name, name), value.strip()))
    message.body = _body(message, body)
    return message


def _unfolded(lines: list[str]) -> list[str]:
    if len(lines) > MAX_HEADERS + 1:
        raise SipError(f"more than {MAX_HEADERS} header lines")
    joined: list[str] = []
    for line in lines:
        if len(line) > MAX_LINE_BYTES:
            raise SipError(f"a line over {MAX_LINE_BYTES} bytes")
        if line[:1] in (" ", "\t") and joined:  # RFC 3261 7.3.1: a continuation line
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def _start_line(line: str) -> SipMessage:
    parts = line.split(" ", 2)
    if len(parts) == 3 and parts[0] == "SIP/2.0":
        if not parts[1].isdigit() or len(parts[1]) != 3:
            raise SipError("a status line without a three-digit status")
        return SipMessage(status=int(parts[1]), reason=parts[2])
    if len(parts) == 3 and parts[2] == "SIP/2.0" and _TOKEN.match(parts[0]) and parts[1]:
        return SipMessage(method=parts[0].upper(), uri=parts[1])
    raise SipError("not a SIP/2.0 request or status line")


def _body(message: SipMessage, body: bytes) -> bytes:
    declared = message.header("content-length")
    if declared is None:
        return body  # allowed over UDP (RFC 3261 18.3): the datagram's end ends the body
    if not declared.strip().isdigit() or int(declared) > len(body):
        raise SipError("Content-Length larger than the body received")
    return body[:int(declared)]


def framed(buffer: bytes) -> tuple[bytes, int] | None:
    """The first whole message at the start of a stream's ``buffer`` and its length, None
    while more bytes are needed; a stream that cannot frame (no Content-Length, too big) is a
    :class:`SipError`."""
    stripped = len(buffer) - len(buffer.lstrip(b"\r\n"))  # keep-alive CRLFs (RFC 5626 4.4.1)
    end = buffer.find(b"\r\n\r\n", stripped)
    if end < 0:
        if len(buffer) - stripped > MAX_MESSAGE_BYTES:
            raise SipError("no end of the header fields within the size limit")
        return None
    match = re.search(rb"(?im)^(?:content-length|l)[ \t]*:[ \t]*(\d{1,9})[ \t]*$",
                      buffer[stripped:end])
    if match is None:
        raise SipError("a message on a stream without Content-Length")
    total = end + 4 + int(match.group(1))
    if total - stripped > MAX_MESSAGE_BYTES:
        raise SipError(f"a message of {total - stripped} bytes (at most {MAX_MESSAGE_BYTES})")
    if len(buffer) < total:
        return None
    return buffer[stripped:total], total


def header_parameter(value: str, name: str) -> str | None:
    """``;name=value`` of a header field value (after its URI), None when absent."""
    for part in value.split(";")[1:]:
        key, _, found = part.partition("=")
        if key.strip().lower() == name:
            return found.strip().strip('"')
    return None


def uri_in(value: str) -> str:
    """The URI of a name-addr (``"Bob" <sip:bob@host>;tag=x``) or an addr-spec."""
    start = value.find("<")
    if start >= 0:
        end = value.find(">", start)
        return value[start + 1:end] if end > start else ""
    return value.split(";", 1)[0].strip()


def host_port(uri: str) -> tuple[str, int] | None:
    """The numeric IPv4 host and port of a ``sip:`` URI (5060 when none), None otherwise."""
    match = re.match(r"^sips?:(?:[^@]*@)?(\d{1,3}(?:\.\d{1,3}){3})(?::(\d{1,5}))?(?:[;?].*)?$",
                     uri.strip())
    if match is None:
        return None
    port = int(match.group(2) or 5060)
    return (match.group(1), port) if 0 < port < 65536 else None


def new_token(prefix: str = "") -> str:
    return prefix + secrets.token_hex(8)


def render(start: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    """A message: its start line, header fields (Content-Length added) and body."""
    lines = [start, *(f"{CANONICAL_NAMES.get(n, n)}: {v}" for n, v in headers),
             f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(lines).encode("utf-8") + body


def response(request: SipMessage, status: int, *, to_tag: str | None = None,
             extra: list[tuple[str, str]] | None = None, body: bytes = b"",
             content_type: str = "application/sdp") -> bytes:
    """The response to ``request`` (RFC 3261 8.2.6.2): its Via fields, From, Call-ID and
    CSeq copied, To with ``to_tag`` added when it has none yet."""
    to = request.header("to") or ""
    if to_tag and header_parameter(to, "tag") is None:
        to = f"{to};tag={to_tag}"
    headers = [("via", via) for via in request.values("via")]
    headers += [("from", request.header("from") or ""), ("to", to),
                ("call-id", request.call_id), ("cseq", request.header("cseq") or ""),
                *(extra or [])]
    if body:
        headers.append(("content-type", content_type))
    return render(f"SIP/2.0 {status} {REASONS.get(status, 'Unknown')}", headers, body)


def dialog_request(invite: SipMessage, *, method: str, cseq: int, to_tag: str, transport: str,
                   local: tuple[str, int], extra: list[tuple[str, str]],
                   body: bytes = b"") -> bytes:
    """A request of the UAS in the dialog an INVITE made (RFC 3261 12.2.1.1): to the caller's
    Contact, From and To swapped, the dialog's Call-ID, a new branch."""
    target = uri_in(invite.header("contact") or "") or uri_in(invite.header("from") or "")
    headers = [("via", f"SIP/2.0/{transport} {local[0]}:{local[1]};branch="
                       f"{new_token(MAGIC_COOKIE)};rport"),
               ("max-forwards", "70"),
               ("from", f"{invite.header('to') or ''};tag={to_tag}"),
               ("to", invite.header("from") or ""), ("call-id", invite.call_id),
               ("cseq", f"{cseq} {method}"), *extra]
    if body:
        headers.append(("content-type", "application/sdp"))
    return render(f"{method} {target} SIP/2.0", headers, body)
