"""The call's media session: its RTP and RTCP sockets, the SDP we offer and answer, what the
far end's SDP settled, and the user's line once the call is answered.

Kept apart from the signalling (:mod:`._call`) so the SDP and the sockets it names have one
owner: a re-INVITE changes the far end's address or codec here, and the line follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pydantic import JsonValue

from ._line import RtpLine
from ._media import MediaReceiver, MediaTarget, RtcpReceiver
from ._record import CallRecord
from ._sdp import (
    ENCODING_NAMES,
    TELEPHONE_EVENT_TYPE,
    build_sdp,
    choose_audio,
    offer_formats,
    parse_sdp,
)
from ._types import CallOptions, Negotiated, RtpPacket, SipError


class MediaSession:
    """RTP for one call (see the module docstring)."""

    def __init__(self, options: CallOptions, *, clock_ns: Callable[[], int],
                 on_packet: Callable[[RtpPacket], None], record: CallRecord,
                 on_key: Callable[[str, float, int], None]) -> None:
        self._options = options
        self._clock_ns = clock_ns
        self.receiver = MediaReceiver(clock_ns=clock_ns, on_packet=on_packet, on_dtmf=on_key,
                                      on_hostile=record.hostile, on_rtcp=record.rtcp)
        self._rtp: asyncio.DatagramTransport | None = None
        self._rtcp: asyncio.DatagramTransport | None = None
        self.negotiated: Negotiated | None = None
        self.line: RtpLine | None = None
        self.held = False  # the far end's SDP wants no media from us
        self.session_id = 0

    async def open(self, session_id: int) -> None:
        """Bind the RTP and RTCP sockets (ports chosen by the OS); raises :class:`SipError`."""
        loop = asyncio.get_running_loop()
        local = self._options.local_address
        self.session_id = session_id
        try:
            self._rtp, _ = await loop.create_datagram_endpoint(
                lambda: self.receiver, local_addr=(local, 0))
            self.receiver.transport = self._rtp
            self._rtcp, _ = await loop.create_datagram_endpoint(
                lambda: RtcpReceiver(self.receiver, self._clock_ns), local_addr=(local, 0))
        except OSError as error:
            raise SipError("unreachable", f"cannot bind RTP on {local}: {error}") from None

    @property
    def local_rtp(self) -> tuple[str, int]:
        assert self._rtp is not None
        host, port = self._rtp.get_extra_info("sockname")[:2]
        return str(host), int(port)

    def _sdp(self, formats: list[tuple[int, str]], telephone_event: int | None,
             direction: str, version: int) -> bytes:
        assert self._rtcp is not None
        host, port = self.local_rtp
        return build_sdp(address=host, port=port,
                         rtcp_port=self._rtcp.get_extra_info("sockname")[1], formats=formats,
                         telephone_event=telephone_event, direction=direction,
                         session_id=self.session_id, version=version)

    def offer(self) -> bytes:
        """The INVITE's offer: our codecs in order, telephone-event, sendrecv."""
        return self._sdp(offer_formats(self._options.codecs), TELEPHONE_EVENT_TYPE,
                         "sendrecv", 1)

    def answer(self, direction: str, version: int) -> bytes:
        """Our answer to a re-INVITE: the codec it settled, ``direction`` (already reflected)."""
        negotiated = self.negotiated
        assert negotiated is not None
        formats = [(negotiated.payload_type, f"{ENCODING_NAMES[negotiated.codec]}/8000")]
        return self._sdp(formats, negotiated.telephone_event, direction, version)

    def use_sdp(self, body: bytes) -> Negotiated:
        """Take the far end's SDP (an answer, or a re-INVITE's offer); raises ``SdpError``."""
        choice = choose_audio(parse_sdp(body), self._options.codecs)
        self.receiver.set_target(MediaTarget((choice.address, choice.port),
                                             choice.payload_type, choice.telephone_event))
        self.negotiated = Negotiated(codec=choice.codec, payload_type=choice.payload_type,
                                     telephone_event=choice.telephone_event,
                                     remote_rtp=(choice.address, choice.port),
                                     local_rtp=self.local_rtp)
        if self.line is not None:
            self.line.payload_type = choice.payload_type
            self.line.codec = choice.codec
            self.line.telephone_event = choice.telephone_event
        self.held = choice.direction in ("sendonly", "inactive")
        if self.line is not None:
            self.line.muted = self.held
        return self.negotiated

    def start_line(self, send_info: Callable[[str, int], None]) -> RtpLine:
        negotiated = self.negotiated
        assert negotiated is not None
        self.line = RtpLine(send=self.receiver.send, clock_ns=self._clock_ns,
                            codec=negotiated.codec, payload_type=negotiated.payload_type,
                            telephone_event=negotiated.telephone_event,
                            dtmf=self._options.dtmf, send_info=send_info)
        self.line.muted = self.held
        return self.line

    def facts(self, rtcp: list[JsonValue]) -> dict[str, JsonValue]:
        line = self.line
        sent: dict[str, JsonValue] = {"packets": line.packets_sent if line else 0,
                                      "bytes": line.bytes_sent if line else 0,
                                      "stamps_kept": len(line.sent_ns) if line else 0,
                                      "muted_slots": line.muted_slots if line else 0}
        return {"sent": sent, "received": self.receiver.facts(), "rtcp": rtcp}

    def close(self) -> None:
        if self.line is not None:
            self.line.stop()
        for udp in (self._rtp, self._rtcp):
            if udp is not None:
                udp.close()
