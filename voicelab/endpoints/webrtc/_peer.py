"""The aiortc side of a call: the peer connection, the user's outbound track, the data
channel, and every callback turned into an item of the adapter's inbox.

Imported only once aiortc is known to be installed (``voicelab[webrtc]``). Callbacks run on
the event loop inside aiortc's own tasks; each one only stamps and enqueues (the adapter's
``events()`` decodes), and what a product may send is bounded here, before it is queued: RTP
packets a second, data-channel message size and rate.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
from collections.abc import Callable
from dataclasses import dataclass

from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCDataChannel,
    RTCIceServer,
    RTCPeerConnection,
    RTCRtpSender,
    RTCSessionDescription,
)
from av import Packet
from pydantic import JsonValue

from .._protocol import EndpointError
from ._ice import gathering_on
from ._kernel_stamps import KernelStamps, ice_protocols
from ._line import CallerLine
from ._opus import RTP_TIME_BASE
from ._rtp import ArrivedPacket, RateGuard, tap_arrivals
from ._rtvi import client_ready
from ._settings import WebRtcSettings
from ._signalling import Answer, Signalling

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DataMessage:
    received_ns: int
    message: str | bytes


@dataclass(frozen=True, slots=True)
class ConnectionState:
    received_ns: int
    state: str
    ice_state: str


@dataclass(frozen=True, slots=True)
class Problem:
    """Something the product did that ends the call (exit 4), named."""

    received_ns: int
    code: str
    message: str


InboxItem = ArrivedPacket | DataMessage | ConnectionState | Problem


class _LineTrack(MediaStreamTrack):
    """The user's line as aiortc's outbound audio track: pre-encoded Opus packets, which the
    sender packs and sends in the step that took them (no encoding thread in between)."""

    kind = "audio"

    def __init__(self, line: CallerLine):
        super().__init__()
        self._line = line

    async def recv(self) -> Packet:
        payload, units = await self._line.next_packet()
        packet = Packet(payload)
        packet.pts, packet.time_base = units, fractions.Fraction(RTP_TIME_BASE)
        return packet


class Peer:
    """One call's peer connection; every inbound thing goes to ``enqueue`` stamped."""

    def __init__(self, settings: WebRtcSettings, line: CallerLine, *,
                 enqueue: Callable[[InboxItem], None], clock_ns: Callable[[], int]):
        self._settings, self._enqueue, self._clock_ns = settings, enqueue, clock_ns
        servers = [RTCIceServer(urls=server.urls, username=server.username,
                                credential=server.credential) for server in settings.ice_servers]
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=servers))
        self._track = _LineTrack(line)
        self._rtp_guard = RateGuard(settings.limits.max_rtp_packets_per_second)
        self._data_guard = RateGuard(settings.limits.max_data_messages_per_second)
        self._data_messages = 0
        self._finished = False
        self.connected = asyncio.Event()
        self.channel: RTCDataChannel | None = None
        self.stamps = KernelStamps(clock_ns=clock_ns)

    def _stop_receiving(self, code: str, message: str) -> None:
        if not self._finished:
            self._finished = True
            self._enqueue(Problem(self._clock_ns(), code, message))

    async def open(self, signalling: Signalling) -> Answer:
        """Offer, hand the offer to the product, take its answer; returns once the call is
        connected (ICE and DTLS), or raises :class:`EndpointError` naming what failed."""
        pc = self.pc
        transceiver = pc.addTransceiver(self._track, direction="sendrecv")
        opus = [codec for codec in RTCRtpSender.getCapabilities("audio").codecs
                if codec.mimeType.lower() == "audio/opus"]
        transceiver.setCodecPreferences(opus)
        tap_arrivals(transceiver.receiver, self._arrived, clock_ns=self._clock_ns,
                     kernel=self.stamps)
        if self._settings.data_channel:
            self._open_channel(pc.createDataChannel(self._settings.data_channel_label))
        pc.on("connectionstatechange", self._state_changed)
        with gathering_on(self._settings.ice_host_addresses):
            await pc.setLocalDescription(await pc.createOffer())
        self.stamps.watch(ice_protocols(transceiver.receiver))  # gathered: its sockets exist
        answer = await signalling.offer(pc.localDescription.sdp)
        try:
            await pc.setRemoteDescription(RTCSessionDescription(answer.sdp, "answer"))
        except (ValueError, KeyError, IndexError) as error:
            raise EndpointError(f"the product's answer SDP cannot be used: {error}",
                                code="signalling_failed") from None
        await self.connected.wait()
        if pc.connectionState != "connected":
            raise EndpointError(self.failure(), code=self.failure_code())
        return answer

    def failure_code(self) -> str:
        return "ice_failed" if self.pc.iceConnectionState == "failed" else "dtls_failed"

    def failure(self) -> str:
        if self.pc.iceConnectionState == "failed":
            return "ICE failed: no candidate pair with the product could be connected"
        return ("the DTLS handshake with the product failed (its certificate does not match the "
                "answer's a=fingerprint, or it refused the handshake)")

    def transport_silent_ns(self, now_ns: int) -> int | None:
        """How long nothing at all (RTP, RTCP, ICE, DTLS) has come from the product (None: not
        known, the sockets are not watched)."""
        last = self.stamps.last_datagram_ns
        return None if last is None else now_ns - last

    def _state_changed(self) -> None:
        pc = self.pc
        state = pc.connectionState
        logger.debug("connection %s (ICE %s)", state, pc.iceConnectionState)
        if state in ("connected", "failed", "closed"):
            self.connected.set()
        self._enqueue(ConnectionState(self._clock_ns(), state, pc.iceConnectionState))

    def _arrived(self, packet: ArrivedPacket) -> None:
        if self._finished:
            return
        if self._rtp_guard.admit(packet.arrival_ns):
            self._enqueue(packet)
        elif self._rtp_guard.exceeded >= 2:
            limit = self._settings.limits.max_rtp_packets_per_second
            self._stop_receiving("rtp_flood", f"the product sent more than {limit} RTP packets "
                                 f"a second, twice (endpoint.settings.limits."
                                 f"max_rtp_packets_per_second)")

    def _open_channel(self, channel: RTCDataChannel) -> None:
        self.channel = channel
        limits = self._settings.limits

        @channel.on("open")
        def _open() -> None:
            if self._settings.rtvi:
                channel.send(client_ready())

        @channel.on("message")
        def _message(message: str | bytes) -> None:
            now = self._clock_ns()
            if self._finished:
                return
            self._data_messages += 1
            if len(message) > limits.max_data_message_bytes:
                self._stop_receiving("resource_limit", f"the product sent a data-channel "
                                     f"message of {len(message):,} bytes (endpoint.settings."
                                     f"limits.max_data_message_bytes: "
                                     f"{limits.max_data_message_bytes:,})")
            elif not self._data_guard.admit(now) or \
                    self._data_messages > limits.max_data_messages:
                self._stop_receiving("resource_limit", f"the product flooded the data channel "
                                     f"(more than {limits.max_data_messages_per_second} messages"
                                     f" a second or {limits.max_data_messages:,} in all: "
                                     f"endpoint.settings.limits)")
            else:
                self._enqueue(DataMessage(now, message))

    async def round_trip_ms(self) -> float | None:
        """RTCP's round trip to the product (from its receiver reports), when it has one."""
        from aiortc import RTCRemoteInboundRtpStreamStats

        try:
            report = await self.pc.getSenders()[0].getStats()
        except (IndexError, AttributeError, RuntimeError):
            return None
        for stats in report.values():
            if isinstance(stats, RTCRemoteInboundRtpStreamStats) and \
                    stats.roundTripTime is not None:
                return round(stats.roundTripTime * 1000, 3)
        return None

    def facts(self) -> dict[str, JsonValue]:
        return {"rtp_packets_refused": self._rtp_guard.refused,
                "arrival_stamps": "kernel" if self.stamps.kernel else "loop",
                "read_stamped_packets": self.stamps.read_stamped,
                "loop_stamped_packets": self.stamps.loop_stamped,
                "data_messages": self._data_messages,
                "ice_state": self.pc.iceConnectionState,
                "connection_state": self.pc.connectionState}

    async def close(self) -> None:
        self._finished = True
        await self.pc.close()
