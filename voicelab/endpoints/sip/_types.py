"""The names the SIP adapter builds on: call options, errors, received packets and call events.

Options are validated once, when made (:meth:`CallOptions.__post_init__`), so a bad URI, header
or codec fails before any socket opens, and the password is never part of a message or repr.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from pydantic import JsonValue

from ._codecs import Codec
from ._message import valid_header_name
from ._uri import UriError, parse_uri

#: headers a caller may not set: the call itself owns them
RESERVED_HEADERS = frozenset({
    "via", "from", "to", "call-id", "cseq", "contact", "content-length", "content-type",
    "max-forwards", "authorization", "proxy-authorization", "v", "f", "t", "i", "m", "l", "c"})
MAX_EXTRA_HEADERS = 32
MAX_HEADER_VALUE_CHARS = 1024
_SAFE_VALUE = re.compile(r"^[\x20-\x7e\t]*$")

ErrorCode = Literal["busy", "declined", "not_found", "no_answer", "auth_refused", "rejected",
                    "unreachable", "protocol_error", "hostile"]


class SipError(Exception):
    """Why a call could not be placed; ``str()`` names it, e.g. ``busy: 486 Busy Here``."""

    def __init__(self, code: ErrorCode, detail: str, *, status: int | None = None) -> None:
        super().__init__(f"{code}: {detail}")
        self.code: ErrorCode = code
        self.status = status


def error_for_status(status: int, reason: str) -> SipError:
    """The error a final failure response means (RFC 3261 section 21)."""
    code: ErrorCode
    if status in (486, 600):
        code = "busy"
    elif status == 603:
        code = "declined"
    elif status in (404, 604):
        code = "not_found"
    elif status in (408, 480):
        code = "no_answer"
    elif status in (401, 407):
        code = "auth_refused"
    else:
        code = "rejected"
    return SipError(code, f"{status} {reason}".strip(), status=status)


@dataclass(frozen=True)
class CallOptions:
    """Whom to call and how; ``password`` is a secret (never logged, repr or in facts)."""

    uri: str
    local_address: str = "127.0.0.1"
    transport: Literal["udp", "tcp"] = "udp"
    codecs: tuple[Codec, ...] = ("pcmu", "pcma")
    dtmf: Literal["rfc4733", "info"] = "rfc4733"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    user_agent: str = "voicelab-evaluator"
    answer_timeout_seconds: float = 30.0
    rtp_timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        try:
            uri = parse_uri(self.uri)
        except UriError as error:
            raise ValueError(f"uri: {error}") from None
        if uri.transport not in (None, "udp", "tcp"):
            raise ValueError(f"uri: transport {uri.transport!r} is not udp or tcp")
        try:
            ipaddress.ip_address(self.local_address)
        except ValueError:
            raise ValueError(f"local_address: {self.local_address[:60]!r} is not an IP address"
                             ) from None
        if not self.codecs or any(c not in ("pcmu", "pcma", "opus") for c in self.codecs):
            raise ValueError("codecs: each one pcmu, pcma or opus, at least one")
        if len(self.headers) > MAX_EXTRA_HEADERS:
            raise ValueError(f"headers: more than {MAX_EXTRA_HEADERS}")
        for name, value in self.headers.items():
            _check_header(name, value)
        _check_header("User-Agent", self.user_agent)
        if self.answer_timeout_seconds <= 0 or self.rtp_timeout_seconds <= 0:
            raise ValueError("timeouts must be > 0")

    @property
    def effective_transport(self) -> Literal["udp", "tcp"]:
        """The URI's ``;transport=`` when it has one, else :attr:`transport`."""
        named = parse_uri(self.uri).transport
        return "tcp" if named == "tcp" else "udp" if named == "udp" else self.transport


def _check_header(name: str, value: str) -> None:
    if not valid_header_name(name) or name.lower() in RESERVED_HEADERS:
        raise ValueError(f"headers: {name[:40]!r} is not a header a caller may set")
    if len(value) > MAX_HEADER_VALUE_CHARS or not _SAFE_VALUE.match(value):
        raise ValueError(f"headers: the value of {name!r} has control characters or is too long")


@dataclass(frozen=True, slots=True)
class RtpPacket:
    """One received media packet of the negotiated codec, stamped before it was parsed."""

    received_ns: int
    sequence: int
    timestamp: int
    payload_type: int
    marker: bool
    ssrc: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class CallEvent:
    """Something the far end did: see the adapter's documentation of each ``kind``."""

    kind: str
    received_ns: int
    data: Mapping[str, JsonValue]


@dataclass(frozen=True)
class Negotiated:
    codec: Codec
    payload_type: int
    telephone_event: int | None
    remote_rtp: tuple[str, int]
    local_rtp: tuple[str, int]
    #: the clock of telephone-event's timestamps and durations (8000, or 48000 beside Opus)
    event_clock_hz: int = 8000
