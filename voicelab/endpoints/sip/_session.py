"""The call's media session: its RTP and RTCP sockets, the SDP we offer and answer, what the
far end's SDP settled, and the user's line once the call is answered.

Kept apart from the signalling (:mod:`._call`) so the SDP and the sockets it names have one
owner: a re-INVITE changes the far end's address or codec here, and the line follows.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

from pydantic import JsonValue

from ._codecs import CLOCK_RATE_HZ
from ._line import RtpLine
from ._media import MediaReceiver, MediaTarget, RtcpReceiver
from ._record import CallRecord
from ._rtcp import REPORT_INTERVAL_SECONDS, RtcpReporter, SenderState, rtp_timestamp_now
from ._sdp import ENCODINGS, build_sdp, choose_audio, offer_events, offer_formats, parse_sdp
from ._stamped_socket import StampedDatagramSocket
from ._types import CallOptions, Negotiated, RtpPacket, SipError


class MediaSession:
    """RTP for one call (see the module docstring)."""

    def __init__(self, options: CallOptions, *, clock_ns: Callable[[], int],
                 on_packet: Callable[[RtpPacket], None], record: CallRecord,
                 on_key: Callable[[str, float, int], None]) -> None:
        self._options = options
        self._clock_ns = clock_ns
        self._record = record
        self.receiver = MediaReceiver(clock_ns=clock_ns, on_packet=on_packet, on_dtmf=on_key,
                                      on_hostile=record.hostile, on_rtcp=self._rtcp_received)
        self._reporter = RtcpReporter(cname=f"voicelab@{options.local_address}")
        self._report_timer: asyncio.TimerHandle | None = None
        self._remote_rtcp: tuple[str, int] | None = None
        self.reports_sent = 0
        #: seconds between our RTCP reports (RFC 3550's 5 s minimum, randomized 0.5-1.5x)
        self.report_interval_seconds = REPORT_INTERVAL_SECONDS
        self._rtp: StampedDatagramSocket | None = None
        self._rtcp: StampedDatagramSocket | None = None
        self.negotiated: Negotiated | None = None
        self.line: RtpLine | None = None
        self.held = False  # the far end's SDP wants no media from us
        self.session_id = 0

    async def open(self, session_id: int) -> None:
        """Bind the RTP and RTCP sockets (ports chosen by the OS); raises :class:`SipError`."""
        local = self._options.local_address
        self.session_id = session_id
        try:  # (kernel receive stamps: see ._stamped_socket)
            self._rtp = StampedDatagramSocket.bind((local, 0), self.receiver,
                                                   clock_ns=self._clock_ns)
            self.receiver.transport = self._rtp
            self._rtcp = StampedDatagramSocket.bind(
                (local, 0), RtcpReceiver(self.receiver, self._clock_ns), clock_ns=self._clock_ns)
        except OSError as error:
            raise SipError("unreachable", f"cannot bind RTP on {local}: {error}") from None

    @property
    def kernel_stamps(self) -> bool:
        """Whether the media socket reads the kernel's receive stamps (see ._stamped_socket)."""
        return self._rtp is not None and self._rtp.kernel_stamps

    @property
    def local_rtp(self) -> tuple[str, int]:
        assert self._rtp is not None
        return self._rtp.local_address

    def _sdp(self, formats: list[tuple[int, str]], telephone_events: list[tuple[int, int]],
             direction: str, version: int) -> bytes:
        assert self._rtcp is not None
        host, port = self.local_rtp
        return build_sdp(address=host, port=port,
                         rtcp_port=self._rtcp.local_address[1], formats=formats,
                         telephone_events=telephone_events, direction=direction,
                         session_id=self.session_id, version=version)

    def offer(self) -> bytes:
        """The INVITE's offer: our codecs in order, telephone-event, sendrecv."""
        codecs = self._options.codecs
        return self._sdp(offer_formats(codecs), offer_events(codecs), "sendrecv", 1)

    def answer(self, direction: str, version: int) -> bytes:
        """Our answer to a re-INVITE: the codec it settled, ``direction`` (already reflected)."""
        negotiated = self.negotiated
        assert negotiated is not None
        formats = [(negotiated.payload_type, ENCODINGS[negotiated.codec])]
        events = [] if negotiated.telephone_event is None else \
            [(negotiated.telephone_event, negotiated.event_clock_hz)]
        return self._sdp(formats, events, direction, version)

    def use_sdp(self, body: bytes) -> Negotiated:
        """Take the far end's SDP (an answer, or a re-INVITE's offer); raises ``SdpError``."""
        choice = choose_audio(parse_sdp(body), self._options.codecs)
        self.receiver.set_target(MediaTarget(
            (choice.address, choice.port), choice.payload_type, choice.telephone_event,
            clock_hz=CLOCK_RATE_HZ[choice.codec], event_clock_hz=choice.event_clock_hz))
        self.negotiated = Negotiated(codec=choice.codec, payload_type=choice.payload_type,
                                     telephone_event=choice.telephone_event,
                                     remote_rtp=(choice.address, choice.port),
                                     local_rtp=self.local_rtp,
                                     event_clock_hz=choice.event_clock_hz)
        if self.line is not None:
            self.line.use_codec(choice.codec, choice.payload_type, choice.telephone_event,
                                event_clock_hz=choice.event_clock_hz)
        self._remote_rtcp = (choice.address, choice.rtcp_port or choice.port + 1)
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
                            event_clock_hz=negotiated.event_clock_hz,
                            dtmf=self._options.dtmf, send_info=send_info)
        self.line.muted = self.held
        self._schedule_report(first=True)
        return self.line

    def _rtcp_received(self, received_ns: int, reports: list[dict[str, JsonValue]]) -> None:
        """Sender and receiver reports are recorded; SDES, BYE and APP alone are not news."""
        reports = [r for r in reports if r.get("type") in ("sr", "rr")]
        if not reports:
            return
        for report in reports:
            middle = report.get("ntp_middle")
            if report.get("type") == "sr" and isinstance(middle, int):
                self._reporter.sender_report_received(middle, received_ns)
        self._record.rtcp(received_ns, reports)

    def _schedule_report(self, *, first: bool = False) -> None:
        interval = self.report_interval_seconds * (0.5 if first else 1.0)
        self._report_timer = asyncio.get_running_loop().call_later(
            interval * random.uniform(0.5, 1.5), self._send_report)

    def _send_report(self) -> None:
        """One SR (or RR before we sent media) to the far end's RTCP port, then the next."""
        line = self.line
        if self._rtcp is None or self._rtcp.is_closing() or line is None:
            return
        now_ns = self._clock_ns()
        sender = None
        if line.last_sent is not None:
            timestamp = rtp_timestamp_now(*line.last_sent, now_ns,
                                          clock_hz=CLOCK_RATE_HZ[line.codec])
            sender = SenderState(line.ssrc, line.packets_sent, line.bytes_sent, timestamp)
        if self._remote_rtcp is not None:
            self._rtcp.sendto(self._reporter.build(
                ssrc=line.ssrc, stats=self.receiver.stats, now_ns=now_ns,
                unix_seconds=time.time(), sender=sender), self._remote_rtcp)
            self.reports_sent += 1
        self._schedule_report()

    def facts(self, rtcp: list[JsonValue]) -> dict[str, JsonValue]:
        line = self.line
        sent: dict[str, JsonValue] = {"packets": line.packets_sent if line else 0,
                                      "bytes": line.bytes_sent if line else 0,
                                      "stamps_kept": len(line.sent_ns) if line else 0,
                                      "muted_slots": line.muted_slots if line else 0,
                                      "dropped_by_codec_change":
                                          line.dropped_by_codec_change if line else 0,
                                      "rtcp_reports": self.reports_sent}
        return {"sent": sent, "received": self.receiver.facts(), "rtcp": rtcp}

    def close(self) -> None:
        if self._report_timer is not None:
            self._report_timer.cancel()
        if self.line is not None:
            self.line.stop()
        for udp in (self._rtp, self._rtcp):
            if udp is not None:
                udp.close()
