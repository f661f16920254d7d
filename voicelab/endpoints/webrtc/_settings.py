"""``endpoint.settings`` of ``adapter: webrtc``."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, field_validator

from .._settings import AdapterSettings
from ._ice import check_host_address

Signalling = Literal["smallwebrtc", "whip", "fastrtc"]
#: where each signalling flavour posts its offer when ``url`` names only the server
DEFAULT_PATHS: dict[str, str] = {"smallwebrtc": "/api/offer", "whip": "/whip",
                                 "fastrtc": "/webrtc/offer"}


class IceServer(AdapterSettings):
    """A STUN or TURN server (``stun:host:port``, ``turn:host:port?transport=udp``)."""

    urls: list[str] | str
    username: str | None = None
    credential: str | None = None


class WebRtcLimits(AdapterSettings):
    """What the product may send (a product is hostile input too): past a limit the call ends
    with ``error{resource_limit}`` naming it (exit 4)."""

    #: the answer to the offer (an SDP is a few kB)
    max_answer_bytes: Annotated[int, Field(ge=1024)] = 256 * 1024
    #: RTP packets a second on the audio track (20 ms Opus is 50)
    max_rtp_packets_per_second: Annotated[int, Field(gt=0)] = 250
    #: one data-channel message, and their rate
    max_data_message_bytes: Annotated[int, Field(ge=256)] = 64 * 1024
    max_data_messages_per_second: Annotated[int, Field(gt=0)] = 200
    #: data-channel messages kept in all
    max_data_messages: Annotated[int, Field(gt=0)] = 20_000


class WebRtcSettings(AdapterSettings):
    """A WebRTC product: where to signal, how ICE gathers, what the product may send."""

    #: the signalling URL: ``http(s)://host:port`` (the flavour's default path is added) or
    #: the full offer URL
    url: Annotated[str, Field(min_length=1)]
    signalling: Signalling = "smallwebrtc"
    #: WHIP's bearer token (a secret: scrubbed everywhere)
    token: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    #: host addresses ICE gathers on (``[127.0.0.1]`` for a product on this machine: aioice
    #: never gathers loopback otherwise); empty: every interface but loopback
    ice_host_addresses: list[str] = Field(default_factory=list)
    #: STUN/TURN servers (``[]``: none; aiortc's default would be a public STUN server)
    ice_servers: list[IceServer] = Field(default_factory=list)
    #: fastrtc's ``webrtc_id`` (generated per trial when not given)
    webrtc_id: str | None = None
    #: open a data channel for text events (pipecat's RTVI messages)
    data_channel: bool = True
    data_channel_label: str = "rtvi"
    #: send RTVI's ``client-ready`` once the data channel opens (pipecat bots wait for it)
    rtvi: bool = True
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 15.0
    #: the longest the product's track may send no RTP at all while the call is up
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 20.0
    limits: WebRtcLimits = Field(default_factory=WebRtcLimits)

    @field_validator("url")
    @classmethod
    def _http_scheme(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("ice_host_addresses")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        try:
            return [check_host_address(address) for address in value]
        except ValueError:
            raise ValueError("must be IP addresses (e.g. 127.0.0.1)") from None

    @property
    def offer_url(self) -> str:
        """``url``, with the flavour's default path when it names only the server."""
        parts = urlsplit(self.url)
        if parts.path in ("", "/"):
            parts = parts._replace(path=DEFAULT_PATHS[self.signalling])
        return urlunsplit(parts)
