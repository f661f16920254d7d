"""The scripted far end the SipCall tests answer with: a minimal user agent server over
real sockets on 127.0.0.1 (UDP or TCP, and an RTP socket), and the helpers a scenario uses.

Each test scripts the far end: the UAS puts every message it receives into a queue, and the
test's scenario answers them in order, sends RTP, keys, BYEs and re-INVITEs. Nothing asserts a
wall-clock duration: orderings, counts and the far end's own record are checked instead.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import NamedTuple

from voicelab.endpoints.sip._call import SipCall
from voicelab.endpoints.sip._message import SipMessage, StreamFramer, parse_message
from voicelab.endpoints.sip._rtp import (
    pack_rtp,
)
from voicelab.endpoints.sip._sdp import parse_sdp
from voicelab.endpoints.sip._types import CallOptions

PASSWORD = "s3cret-Pa55word"
clock_ns = time.perf_counter_ns


def run(coroutine, *, loop_factory=None):
    """``coroutine`` to its end (20 s at most) on a new loop (``loop_factory``: uvloop's)."""
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(asyncio.wait_for(coroutine, 20))


class Uas:
    """A scripted far end: UDP or TCP on 127.0.0.1, an RTP socket, a queue of what arrived."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[SipMessage] = asyncio.Queue()
        self.all: list[SipMessage] = []
        self.peer: tuple[str, int] | None = None
        self.tcp: asyncio.Transport | None = None
        self.udp: asyncio.DatagramTransport | None = None
        self.rtp_in: list[tuple[int, bytes]] = []
        self.rtp: asyncio.DatagramTransport | None = None
        self.tag = secrets.token_hex(4)
        self.cseq = 100

    async def start(self, kind: str = "udp") -> int:
        loop = asyncio.get_running_loop()
        uas = self

        class Udp(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                uas.peer = addr
                uas._got(parse_message(data))

        class Tcp(asyncio.Protocol):
            def connection_made(self, transport):
                uas.tcp = transport
                self.framer = StreamFramer()

            def data_received(self, data):
                for message in self.framer.feed(data):
                    uas._got(message)

        class Rtp(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                uas.rtp_in.append((clock_ns(), data))

        self.rtp, _ = await loop.create_datagram_endpoint(Rtp, local_addr=("127.0.0.1", 0))
        if kind == "udp":
            self.udp, _ = await loop.create_datagram_endpoint(Udp, local_addr=("127.0.0.1", 0))
            return self.udp.get_extra_info("sockname")[1]
        self.server = await loop.create_server(Tcp, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    def _got(self, message: SipMessage) -> None:
        self.all.append(message)
        self.inbox.put_nowait(message)

    async def next(self, method: str | None = None, timeout: float = 5) -> SipMessage:
        while True:
            message = await asyncio.wait_for(self.inbox.get(), timeout)
            if method is None or message.method == method or (
                    method == "response" and message.status is not None):
                return message

    def send(self, message: SipMessage | bytes) -> None:
        data = message if isinstance(message, bytes) else message.to_bytes()
        if self.udp is not None:
            self.udp.sendto(data, self.peer)
        else:
            self.tcp.write(data)

    def respond(self, request, status, reason, *, body=b"", extra=()):
        to = request.header("To")
        if "tag=" not in to and status > 100:
            to += f";tag={self.tag}"
        headers = [("Via", v) for v in request.headers_named("Via")]
        headers += [("From", request.header("From")), ("To", to),
                    ("Call-ID", request.header("Call-ID")), ("CSeq", request.header("CSeq")),
                    ("Contact", f"<sip:uas@127.0.0.1:{self.port}>"), *extra]
        if body:
            headers.append(("Content-Type", "application/sdp"))
        response = SipMessage(status=status, reason=reason, headers=headers, body=body)
        self.send(response)
        return response

    def request(self, invite, method, *, body=b"", content_type=None):
        """An in-dialog request from this side (the caller's From is our To)."""
        self.cseq += 1
        contact = invite.header("Contact").strip("<>").split(";")[0]
        headers = [("Via", f"SIP/2.0/UDP 127.0.0.1:{self.port};branch=z9hG4bK{secrets.token_hex(6)}"),
                   ("From", f"{invite.header('To')};tag={self.tag}"),
                   ("To", invite.header("From")), ("Call-ID", invite.header("Call-ID")),
                   ("CSeq", f"{self.cseq} {method}"), ("Max-Forwards", "70")]
        if content_type:
            headers.append(("Content-Type", content_type))
        message = SipMessage(method=method, request_uri=contact, headers=headers, body=body)
        self.send(message)
        return message

    @property
    def port(self) -> int:
        if self.udp is not None:
            return self.udp.get_extra_info("sockname")[1]
        return self.server.sockets[0].getsockname()[1]

    @property
    def rtp_port(self) -> int:
        return self.rtp.get_extra_info("sockname")[1]

    def answer_sdp(self, formats="0 101", direction="sendrecv") -> bytes:
        lines = ["v=0", "o=uas 1 1 IN IP4 127.0.0.1", "s=-", "c=IN IP4 127.0.0.1", "t=0 0",
                 f"m=audio {self.rtp_port} RTP/AVP {formats}",
                 "a=rtpmap:101 telephone-event/8000", f"a={direction}"]
        return ("\r\n".join(lines) + "\r\n").encode()

    def caller_rtp(self, invite) -> tuple[str, int]:
        audio = parse_sdp(invite.body).audio()
        return "127.0.0.1", audio.port

    def close(self):
        for t in (self.udp, self.rtp, self.tcp):
            if t is not None:
                t.close()


class Seen:
    def __init__(self):
        self.packets = []
        self.events = []

    def packet(self, packet):
        self.packets.append(packet)

    def event(self, event):
        self.events.append(event)

    def kinds(self):
        return [e.kind for e in self.events]


def make_call(port, seen, **options):
    options.setdefault("uri", f"sip:agent@127.0.0.1:{port}")
    return SipCall(CallOptions(**options), clock_ns=clock_ns, on_packet=seen.packet,
                   on_event=seen.event)


class Dialled(NamedTuple):
    """A scripted far end and a call placed to it, from the moment its INVITE arrived: where
    most scenarios start (``uas, call, seen, start, invite = await dial()``, ``connected``)."""

    uas: Uas
    call: SipCall
    seen: Seen
    start: asyncio.Task
    invite: SipMessage


async def dial(kind: str = "udp", **options) -> Dialled:
    """A far end on ``kind`` (udp or tcp) and a call to it (``make_call`` ``options``) whose
    INVITE has arrived, not yet answered."""
    uas = Uas()
    port = await uas.start(kind)
    seen = Seen()
    call = make_call(port, seen, transport=kind, **options)
    start = asyncio.create_task(call.start())
    invite = await uas.next("INVITE")
    return Dialled(uas, call, seen, start, invite)


async def connected(kind: str = "udp", *, body: bytes | None = None, **options) -> Dialled:
    """``dial``, then answered (with ``body`` as the SDP answer, else the far end's default)
    and acknowledged; the call's start has returned (``start.result()``: what it negotiated)."""
    dialled = await dial(kind, **options)
    await answer(dialled.uas, dialled.invite, body=body)
    await dialled.start
    return dialled


async def answer(uas, invite, *, body=None):
    uas.respond(invite, 100, "Trying")
    uas.respond(invite, 180, "Ringing")
    uas.respond(invite, 200, "OK", body=body or uas.answer_sdp())
    return await uas.next("ACK")


async def hang_up(call, uas):
    """Our BYE, answered by the far end; returns the BYE it received."""
    ending = asyncio.create_task(call.hang_up())
    bye = await uas.next("BYE")
    uas.respond(bye, 200, "OK")
    await ending
    return bye


def send_rtp(uas, target, sequence, *, payload_type=0, timestamp=None, payload=b"\xff" * 160,
             marker=False):
    uas.rtp.sendto(pack_rtp(payload_type=payload_type, sequence=sequence,
                            timestamp=160 * sequence if timestamp is None else timestamp,
                            ssrc=99, payload=payload, marker=marker), target)
