"""The settings of ``adapter: sip``: whom to call and how (docs/adapters/sip.md)."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .._settings import AdapterSettings
from ._codecs import Codec
from ._message import valid_header_name
from ._types import MAX_EXTRA_HEADERS, MAX_HEADER_VALUE_CHARS, RESERVED_HEADERS
from ._uri import UriError, parse_uri

MAX_HEADERS = MAX_EXTRA_HEADERS
DEFAULT_CODECS: tuple[Codec, ...] = ("pcmu", "pcma")


class SipSettings(AdapterSettings):
    """``endpoint.settings`` of a SIP call (see the module docstring)."""

    #: whom to call
    uri: Annotated[str, Field(min_length=5, max_length=512)]
    #: where voicelab's user agent binds its SIP and RTP sockets (an IP address of this machine)
    local_address: str = "127.0.0.1"
    transport: Literal["udp", "tcp"] = "udp"
    #: offered in this order (telephone-event is always offered besides, for rfc4733 keys);
    #: ``opus`` needs the ``telephony`` extra (libopus)
    codecs: Annotated[list[Codec], Field(min_length=1, max_length=3)] = \
        Field(default_factory=lambda: list(DEFAULT_CODECS))
    #: how keys are pressed: RTP telephone-events (RFC 4733) or SIP INFO (dtmf-relay)
    dtmf: Literal["rfc4733", "info"] = "rfc4733"
    #: how long one key is held, and the pause before the next
    dtmf_duration_ms: Annotated[int, Field(ge=40, le=1000)] = 100
    dtmf_gap_ms: Annotated[int, Field(ge=20, le=2000)] = 60
    #: digest credentials, used when the far end challenges (401/407); the password is a
    #: secret: never written to the bundle, the log or an error
    username: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    password: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    #: extra INVITE headers (e.g. ``X-Test-Id``); values are scrubbed like secrets
    headers: dict[str, str] = Field(default_factory=dict)
    #: no final answer by then: the call is cancelled (``no_answer``)
    answer_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 30.0
    #: answered, and no RTP at all for this long: the call fails (``no_rtp``)
    rtp_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 10.0
    #: how much of the live line the runner hands over at a time (RTP carries 20 ms a packet)
    chunk_ms: Annotated[float, Field(gt=0, le=200)] = 20.0

    @field_validator("uri")
    @classmethod
    def _sip_uri(cls, value: str) -> str:
        try:
            uri = parse_uri(value)
        except UriError as error:
            raise ValueError(f"must be a sip: URI such as sip:agent@127.0.0.1:5070 ({error})") \
                from None
        if uri.scheme != "sip":
            raise ValueError("must be a sip: URI (sips:, SIP over TLS, is not supported)")
        if uri.transport not in (None, "udp", "tcp"):
            raise ValueError("names a transport other than udp or tcp")
        return value

    @field_validator("local_address")
    @classmethod
    def _ip_address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError("must be an IP address of this machine, such as 127.0.0.1") \
                from None
        return value

    @field_validator("codecs")
    @classmethod
    def _distinct(cls, codecs: list[Codec]) -> list[Codec]:
        if len(set(codecs)) != len(codecs):
            raise ValueError("names a codec twice")
        return codecs

    @field_validator("headers")
    @classmethod
    def _header_lines(cls, headers: dict[str, str]) -> dict[str, str]:
        if len(headers) > MAX_HEADERS:
            raise ValueError(f"has more than {MAX_HEADERS} headers")
        for name, value in headers.items():
            if not valid_header_name(name):
                raise ValueError("has a header name that is not a SIP token")
            if name.lower() in RESERVED_HEADERS:
                raise ValueError(f"sets {name}, which voicelab writes itself")
            if len(value) > MAX_HEADER_VALUE_CHARS or not value.isprintable():
                raise ValueError(f"has a value for {name} that is too long or spans lines")
        return headers

    @model_validator(mode="after")
    def _credentials_together(self) -> SipSettings:
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together")
        return self
