"""SipCall against a minimal user agent server written here, over real sockets on 127.0.0.1.

Each test scripts the far end: the UAS puts every message it receives into a queue, and the
test's scenario answers them in order, sends RTP, keys, BYEs and re-INVITEs. Nothing asserts a
wall-clock duration: orderings, counts and the far end's own record are checked instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import secrets
import time

import pytest

from voicelab.endpoints.sip._call import SipCall
from voicelab.endpoints.sip._message import SipMessage, StreamFramer, parse_message
from voicelab.endpoints.sip._rtp import (
    TelephoneEvent,
    is_rtcp,
    pack_event,
    pack_rtp,
    parse_event,
    parse_rtcp,
    parse_rtp,
)
from voicelab.endpoints.sip._sdp import parse_sdp
from voicelab.endpoints.sip._stamped_socket import CONVERSION_ERROR_NS
from voicelab.endpoints.sip._types import CallOptions, SipError

PASSWORD = "s3cret-Pa55word"
clock_ns = time.perf_counter_ns


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


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


# --- a whole call ----------------------------------------------------------------------------

async def _full_call():
    uas = Uas()
    port = await uas.start()
    seen = Seen()
    call = make_call(port, seen, headers={"X-Test-Id": "t1"})
    sent_truth = []

    async def far_end():
        invite = await uas.next("INVITE")
        target = uas.caller_rtp(invite)
        for n in (65534, 65535):  # media that overtakes the answer is kept, not foreign
            send_rtp(uas, target, n)
        await asyncio.sleep(0.05)
        await answer(uas, invite)
        for n in range(30):
            sent_truth.append(clock_ns())
            send_rtp(uas, target, n)
            if n == 10:
                send_rtp(uas, target, n)  # a duplicate
                send_rtp(uas, target, 1000, payload_type=13, payload=b"\x40")  # comfort noise
            await asyncio.sleep(0.005)
        for update in range(3):  # key 7: two updates, then the end three times
            end = update == 2
            for _ in range(3 if end else 1):
                payload = pack_event(TelephoneEvent(7, end, 10, 160 * (update + 1)))
                send_rtp(uas, target, 40 + update, payload_type=101, timestamp=9000,
                         payload=payload)
        await asyncio.sleep(0.05)  # the sockets are read in turn: the key first, then INFO
        uas.request(invite, "INFO", body=b"Signal=9\r\nDuration=160\r\n",
                    content_type="application/dtmf-relay")
        assert (await uas.next("response")).status == 200
        uas.request(invite, "OPTIONS")
        assert (await uas.next("response")).status == 200
        uas.request(invite, "SUBSCRIBE")
        assert (await uas.next("response")).status == 501
        stranger = uas.request(invite, "NOTIFY")  # in the dialog: not implemented
        assert (await uas.next("response")).status == 501
        foreign = {"Call-ID": "other@x", "Via": f"SIP/2.0/UDP 127.0.0.1:{uas.port}"
                                                ";branch=z9hG4bKforeign"}
        stranger.headers = [(n, foreign.get(n, v)) for n, v in stranger.headers]
        uas.send(stranger)
        assert (await uas.next("response")).status == 481
        stranger.method = "OPTIONS"
        stranger.headers = [(n, "1 OPTIONS" if n == "CSeq" else v) for n, v in stranger.headers]
        uas.send(stranger)
        assert (await uas.next("response")).status == 200  # a keep-alive ping
        return invite

    task = asyncio.create_task(far_end())
    negotiated = await call.start()
    call.line.queue_frames([bytes([n]) * 160 for n in range(20)])
    call.line.queue_digits("1#", duration_ms=100, gap_ms=40)
    invite = await task
    while call.line.pending:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.05)
    uas.request(invite, "BYE")
    assert (await uas.next("response")).status == 200
    await call.hang_up()  # the far end already hung up: nothing more is sent
    facts = call.facts()
    await call.close()
    await call.close()
    uas.close()
    return uas, invite, seen, call, negotiated, facts, sent_truth


def test_a_call_is_answered_and_media_and_keys_flow_both_ways(caplog):
    caplog.set_level(logging.DEBUG)
    uas, invite, seen, call, negotiated, facts, sent_truth = run(_full_call())
    assert invite.header("X-Test-Id") == "t1" and invite.header("User-Agent")
    assert re.search(r"branch=z9hG4bK", invite.header("Via"))
    assert negotiated.codec == "pcmu" and negotiated.telephone_event == 101
    # media in arrival order, duplicates and other payload types dropped, stamps causal
    assert [p.sequence for p in seen.packets] == [65534, 65535, *range(30)]
    stamps = [p.received_ns for p in seen.packets]
    assert stamps == sorted(stamps)
    # (a kernel stamp is turned into the trial clock within CONVERSION_ERROR_NS)
    assert all(received >= sent - CONVERSION_ERROR_NS
               for received, sent in zip(stamps[2:], sent_truth, strict=True))
    received = facts["rtp"]["received"]
    assert (received["packets"], received["duplicates"], received["lost"]) == (32, 1, 0)
    assert received["foreign_packets"] == 0
    assert received["other_payload_types"] == {"13": 1}
    # keys from the far end: once each, by both methods
    keys = [(e.data["digit"], e.data["method"]) for e in seen.events if e.kind == "dtmf"]
    assert keys == [("7", "rfc4733"), ("9", "info")]
    kinds = seen.kinds()
    assert kinds.index("provisional") < kinds.index("answered") < kinds.index("dtmf")
    assert kinds[-1] == "bye" and kinds.count("bye") == 1
    assert call.setup_ms is not None and call.setup_ms > 0
    # what the far end received: 20 audio frames, then two keys by RFC 4733
    packets = [parse_rtp(data) for _, data in uas.rtp_in]
    audio = [p for p in packets if p.payload_type == 0]
    events = [p for p in packets if p.payload_type == 101]
    assert [p.payload[0] for p in audio[:20]] == list(range(20))
    sequences = [p.sequence for p in packets]
    assert sequences == [(sequences[0] + i) & 0xFFFF for i in range(len(packets))]
    for code in (1, 11):
        own = [p for p in events if parse_event(p.payload).event == code]
        decoded = [parse_event(p.payload) for p in own]
        assert len({p.timestamp for p in own}) == 1 and own[0].marker
        assert [d.duration for d in decoded] == [160, 320, 480, 640, 800, 800, 800]
        assert [d.end for d in decoded] == [False] * 4 + [True] * 3
    first_key_ts = [p.timestamp for p in events][0]
    assert first_key_ts == (audio[0].timestamp + 20 * 160) & 0xFFFFFFFF  # continuous
    gap_audio = audio[20:]  # the silence after each key carries on the timestamps
    assert gap_audio and gap_audio[0].timestamp == (first_key_ts + 5 * 160) & 0xFFFFFFFF
    assert facts["rtp"]["sent"]["packets"] == len(packets) == len(call.line.sent_ns)
    assert [d["digit"] for d in facts["dtmf"]["sent"]] == ["1", "#"]
    assert [d["digit"] for d in facts["dtmf"]["received"]] == ["7", "9"]
    assert facts["sip"]["setup_ms"] == call.setup_ms
    lines = [m["start_line"] for m in facts["sip"]["messages"]]
    assert lines[0].startswith("INVITE ") and "SIP/2.0 200 OK" in lines
    json.dumps(facts)


# --- authentication ----------------------------------------------------------------------------

def _expected_response(authorization, method, password, hash_name):
    fields = dict(re.findall(r'(\w+)="?([^",]*)"?', authorization))
    h = lambda text: hashlib.new(hash_name, text.encode()).hexdigest()  # noqa: E731
    ha1 = h(f"{fields['username']}:{fields['realm']}:{password}")
    ha2 = h(f"{method}:{fields['uri']}")
    return fields["response"] == h(f"{ha1}:{fields['nonce']}:{fields['nc']}:{fields['cnonce']}"
                                   f":auth:{ha2}")


@pytest.mark.parametrize(("status", "challenge_header", "answer_header"), [
    (401, "WWW-Authenticate", "Authorization"),
    (407, "Proxy-Authenticate", "Proxy-Authorization")])
def test_a_digest_challenge_is_answered_once_and_the_password_is_never_written(
        caplog, status, challenge_header, answer_header):
    caplog.set_level(logging.DEBUG)

    async def scenario():
        uas = Uas()
        port = await uas.start()
        seen = Seen()
        call = make_call(port, seen, username="caller", password=PASSWORD)

        async def far_end():
            invite = await uas.next("INVITE")
            uas.respond(invite, status, "Unauthorized", extra=[
                (challenge_header, 'Digest realm="voicelab", nonce="abc", qop="auth", '
                                   'algorithm=MD5'),
                (challenge_header, 'Digest realm="voicelab", nonce="abc", qop="auth", '
                                   'algorithm=SHA-256')])
            ack = await uas.next("ACK")
            second = await uas.next("INVITE")
            await answer(uas, second)
            return invite, ack, second

        task = asyncio.create_task(far_end())
        await call.start()
        first, ack, second = await task
        ending = asyncio.create_task(call.hang_up())
        challenged_bye = await uas.next("BYE")  # the BYE is challenged too
        uas.respond(challenged_bye, status, "Unauthorized", extra=[
            (challenge_header, 'Digest realm="voicelab", nonce="def", qop="auth"')])
        bye = await uas.next("BYE")
        uas.respond(bye, 200, "OK")
        await ending
        facts = call.facts()
        await call.close()
        uas.close()
        return first, ack, second, bye, facts, repr(call.options)

    first, ack, second, bye, facts, options_repr = run(scenario())
    assert ack.cseq() == (first.cseq()[0], "ACK") and ack.header("Via") == first.header("Via")
    assert second.cseq()[0] == first.cseq()[0] + 1
    assert second.header("Call-ID") == first.header("Call-ID")
    credentials = second.header(answer_header)
    assert "algorithm=SHA-256" in credentials
    assert _expected_response(credentials, "INVITE", PASSWORD, "sha256")
    assert bye.cseq()[0] > first.cseq()[0] + 1 and bye.cseq()[1] == "BYE"
    assert _expected_response(bye.header(answer_header), "BYE", PASSWORD, "md5")
    text = json.dumps(facts) + caplog.text + options_repr
    assert PASSWORD not in text and "(credentials removed)" in json.dumps(facts)
    assert credentials.split('response="')[1][:20] not in json.dumps(facts)


def test_a_second_challenge_is_auth_refused():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        call = make_call(port, Seen(), username="caller", password=PASSWORD)

        async def far_end():
            for _ in range(2):
                invite = await uas.next("INVITE")
                uas.respond(invite, 401, "Unauthorized", extra=[
                    ("WWW-Authenticate", 'Digest realm="r", nonce="n"')])
                await uas.next("ACK")

        task = asyncio.create_task(far_end())
        with pytest.raises(SipError) as raised:
            await call.start()
        await task
        await call.close()
        uas.close()
        return raised.value

    error = run(scenario())
    assert (error.code, error.status) == ("auth_refused", 401)


# --- failures ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "reason", "code"), [
    (486, "Busy Here", "busy"), (603, "Decline", "declined"), (404, "Not Found", "not_found"),
    (480, "Temporarily Unavailable", "no_answer"), (500, "Server Error", "rejected")])
def test_final_failures_are_acked_and_named(status, reason, code):
    async def scenario():
        uas = Uas()
        port = await uas.start("tcp" if status == 603 else "udp")
        call = make_call(port, Seen(), transport="tcp" if status == 603 else "udp")

        async def far_end():
            invite = await uas.next("INVITE")
            uas.respond(invite, 180, "Ringing")
            response = uas.respond(invite, status, reason)
            ack = await uas.next("ACK")
            return response, ack

        task = asyncio.create_task(far_end())
        with pytest.raises(SipError) as raised:
            await call.start()
        response, ack = await task
        await call.close()
        uas.close()
        return raised.value, response, ack

    error, response, ack = run(scenario())
    assert (error.code, error.status) == (code, status)
    assert str(error) == f"{code}: {status} {reason}"
    assert ack.header("To") == response.header("To")  # with the far end's tag


def test_no_answer_in_time_sends_cancel_and_acks_the_487():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        call = make_call(port, Seen(), answer_timeout_seconds=1.0)

        async def far_end():
            invite = await uas.next("INVITE")
            uas.respond(invite, 180, "Ringing")
            cancel = await uas.next("CANCEL")
            uas.respond(cancel, 200, "OK")
            uas.respond(invite, 487, "Request Terminated")
            ack = await uas.next("ACK")
            return invite, cancel, ack

        task = asyncio.create_task(far_end())
        with pytest.raises(SipError) as raised:
            await call.start()
        invite, cancel, ack = await task
        await call.close()
        uas.close()
        return raised.value, invite, cancel, ack

    error, invite, cancel, ack = run(scenario())
    assert error.code == "no_answer" and error.status is None
    assert cancel.header("Via") == invite.header("Via")
    assert cancel.cseq() == (invite.cseq()[0], "CANCEL")
    assert ack.cseq() == (invite.cseq()[0], "ACK")


def test_cancelling_start_while_ringing_sends_cancel():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        call = make_call(port, Seen())
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        uas.respond(invite, 180, "Ringing")
        await asyncio.sleep(0.05)
        start.cancel()
        cancel = await uas.next("CANCEL")
        uas.respond(cancel, 200, "OK")
        uas.respond(invite, 487, "Request Terminated")
        ack = await uas.next("ACK")  # nobody waits for the 487 any more: still ACKed
        await call.close()
        uas.close()
        return start, cancel, ack

    start, cancel, ack = run(scenario())
    assert start.cancelled() and cancel.method == "CANCEL"
    assert ack.cseq()[1] == "ACK"


def test_an_answer_racing_our_cancel_is_acked_and_hung_up():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        call = make_call(port, Seen())
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        uas.respond(invite, 180, "Ringing")
        await asyncio.sleep(0.05)
        ending = asyncio.create_task(call.hang_up())
        cancel = await uas.next("CANCEL")
        uas.respond(cancel, 200, "OK")
        uas.respond(invite, 200, "OK", body=uas.answer_sdp())  # it answered meanwhile
        ack = await uas.next("ACK")
        bye = await uas.next("BYE")
        uas.respond(bye, 200, "OK")
        await ending
        with pytest.raises(SipError) as raised:
            await start
        await call.close()
        uas.close()
        return raised.value, ack, bye

    error, ack, bye = run(scenario())
    assert error.code == "no_answer" and error.status == 200
    assert "tag=" in ack.header("To") and bye.cseq()[1] == "BYE"


@pytest.mark.parametrize("kind", ["udp", "tcp"])
def test_nobody_listening_is_unreachable(kind):
    async def scenario():
        import socket
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if kind == "udp"
                             else socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        call = make_call(port, Seen(), transport=kind, answer_timeout_seconds=5)
        with pytest.raises(SipError) as raised:
            await call.start()
        await call.close()
        return raised.value

    assert run(scenario()).code == "unreachable"


# --- early media, retransmissions, re-INVITEs ----------------------------------------------------

def test_early_media_from_a_183_reaches_on_packet_before_the_answer():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        seen = Seen()
        call = make_call(port, seen)

        async def far_end():
            invite = await uas.next("INVITE")
            assert len([m for m in uas.all if m.method == "INVITE"]) == 1
            # the first INVITE is left unanswered: its retransmission (Timer A) is answered
            again = await uas.next("INVITE")
            uas.respond(again, 183, "Session Progress", body=uas.answer_sdp())
            target = uas.caller_rtp(invite)
            for n in range(5):
                send_rtp(uas, target, n)
            await asyncio.sleep(0.1)
            final = uas.respond(again, 200, "OK", body=uas.answer_sdp())
            await uas.next("ACK")
            uas.send(final)  # a retransmitted 200: ACKed again
            await uas.next("ACK")
            return invite, again

        task = asyncio.create_task(far_end())
        await call.start()
        invite, again = await task
        await hang_up(call, uas)
        await call.close()
        uas.close()
        return seen, invite, again

    seen, invite, again = run(scenario())
    assert again.header("Via") == invite.header("Via")  # the same transaction, retransmitted
    provisional = [e for e in seen.events if e.kind == "provisional"]
    assert provisional[0].data == {"status": 183, "reason": "Session Progress",
                                   "early_media": True}
    answered = next(e for e in seen.events if e.kind == "answered")
    assert len(seen.packets) == 5
    assert all(p.received_ns < answered.received_ns for p in seen.packets)


def test_reinvites_are_answered_or_refused():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        seen = Seen()
        call = make_call(port, seen, codecs=("pcma", "pcmu"))
        invite_task = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        await answer(uas, invite, body=uas.answer_sdp("8 101"))
        negotiated = await invite_task
        uas.request(invite, "INVITE", body=uas.answer_sdp("0 101", "sendonly"),
                    content_type="application/sdp")
        hold = await uas.next("response")
        before = len(uas.rtp_in)
        call.line.queue_frames([b"\xff" * 160] * 3)  # on hold: the slots pass unsent
        while call.line.pending:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.02)
        held = (len(uas.rtp_in) - before, call.facts()["rtp"]["sent"]["muted_slots"])
        uas.request(invite, "INVITE", body=uas.answer_sdp("18"), content_type="application/sdp")
        refused = await uas.next("response")
        facts_negotiated = call.negotiated
        await call.close()  # still up: close() says BYE
        bye = await uas.next("BYE")
        assert bye.header("Call-ID") == invite.header("Call-ID")
        await call.close()
        uas.close()
        return seen, negotiated, hold, refused, facts_negotiated, held

    seen, negotiated, hold, refused, after, held = run(scenario())
    assert held == (0, 3)
    assert negotiated.codec == "pcma"
    assert hold.status == 200 and b"a=recvonly" in hold.body and b"PCMU/8000" in hold.body
    assert refused.status == 488
    assert after.codec == "pcmu"
    reinvites = [e.data for e in seen.events if e.kind == "reinvite"]
    assert [r["accepted"] for r in reinvites] == [True, False]
    assert reinvites[0]["direction"] == "sendonly"


# --- hostile far ends ------------------------------------------------------------------------------

def test_a_hostile_far_end_is_counted_and_reported_once_each(caplog):
    async def scenario():
        uas = Uas()
        port = await uas.start()
        seen = Seen()
        call = make_call(port, seen, rtp_timeout_seconds=0.2)
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        await answer(uas, invite)
        await start
        await asyncio.sleep(0.3)  # no RTP yet: no_rtp
        target = uas.caller_rtp(invite)
        loop = asyncio.get_running_loop()
        foreign, _ = await loop.create_datagram_endpoint(asyncio.DatagramProtocol,
                                                         local_addr=("127.0.0.1", 0))
        for n in range(60):
            foreign.sendto(pack_rtp(payload_type=0, sequence=n, timestamp=0, ssrc=5,
                                    payload=b"x"), target)
        for n in range(150):  # a key storm: 150 events, each ended
            send_rtp(uas, target, 2000 + n, payload_type=101, timestamp=50_000 + n,
                     payload=pack_event(TelephoneEvent(1, True, 10, 160)))
        for n in range(1200):  # a flood (the loop reads one datagram a turn)
            send_rtp(uas, target, n)
            await asyncio.sleep(0)
        uas.send(b"SIP/2.0 200 OK\r\n" + b"X: y\r\n" * 250 + b"\r\n")
        uas.send(b"BYE sip:x SIP/2.0\r\nVia: SIP/2.0/UDP 10.9.9.9;branch=z9hG4bKx\r\n\r\n")
        uas.send(b"SIP/2.0 200 OK\r\nCSeq: x INVITE\r\n\r\n")
        uas.send(b"INFO sip:x SIP/2.0\r\nCSeq: 1 BYE\r\nVia: SIP/2.0/UDP a\r\n\r\n")
        for _ in range(25):
            uas.request(invite, "BYE")
        for _ in range(25):
            await uas.next("response")
        await asyncio.sleep(0.05)
        facts = call.facts()
        await call.close()
        foreign.close()
        uas.close()
        return seen, facts

    seen, facts = run(scenario())
    hostile = [e.data["what"] for e in seen.events if e.kind == "hostile"]
    assert sorted(hostile) == ["bye_storm", "dtmf_storm", "foreign_source", "rtp_flood",
                               "too_many_headers"]
    assert seen.kinds().count("no_rtp") == 1 and seen.kinds().count("bye") == 1
    assert len([e for e in seen.events if e.kind == "dtmf"]) == 100
    received = facts["rtp"]["received"]
    assert received["foreign_packets"] == 60 and received["flood_dropped"] > 0
    assert received["packets"] + received["flood_dropped"] + 150 >= 1200
    assert len(facts["sip"]["messages"]) <= 200
    assert facts["sip"]["hostile"]["bye_storm"] == 5
    assert facts["sip"]["problems"] == {"too_many_headers": 1, "malformed": 3}
    assert "Traceback" not in caplog.text and "Exception in callback" not in caplog.text


def test_an_answer_with_a_huge_sdp_is_hostile():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        call = make_call(port, Seen())
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        uas.respond(invite, 200, "OK", body=uas.answer_sdp() + b"a=x\r\n" * 3000)
        await uas.next("ACK")
        with pytest.raises(SipError) as raised:
            await start
        bye = await uas.next("BYE")
        await call.close()
        uas.close()
        return raised.value, bye

    error, bye = run(scenario())
    assert error.code == "hostile" and bye.method == "BYE"


def test_an_oversized_message_over_tcp_is_hostile_and_ends_the_connection():
    async def scenario():
        uas = Uas()
        port = await uas.start("tcp")
        seen = Seen()
        call = make_call(port, seen, transport="tcp")
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        await answer(uas, invite)
        await start
        uas.send(b"SIP/2.0 200 OK\r\nContent-Length: 70000\r\n\r\n" + b"x" * 70_000)
        for _ in range(100):
            if "transport_closed" in seen.kinds():
                break
            await asyncio.sleep(0.01)
        await call.close()
        uas.close()
        return seen

    seen = run(scenario())
    assert [e.data["what"] for e in seen.events if e.kind == "hostile"] == ["oversized_message"]
    assert seen.kinds().index("hostile") < seen.kinds().index("transport_closed")


def test_udp_retransmits_our_bye_and_our_200_to_a_reinvite_until_answered():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        call = make_call(port, Seen())
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        await answer(uas, invite)
        await start
        uas.request(invite, "INVITE", body=uas.answer_sdp(), content_type="application/sdp")
        first_ok = await uas.next("response")
        again_ok = await uas.next("response")  # no ACK yet: Timer G sends it again
        ack = SipMessage(method="ACK", request_uri="sip:x", headers=[
            ("Via", "SIP/2.0/UDP 127.0.0.1:1;branch=z9hG4bKack"),
            ("Call-ID", invite.header("Call-ID")),
            ("CSeq", f"{first_ok.cseq()[0]} ACK")])
        uas.send(ack)
        ending = asyncio.create_task(call.hang_up())
        bye = await uas.next("BYE")  # left unanswered: retransmitted (Timer E)
        bye_again = await uas.next("BYE")
        uas.respond(bye_again, 200, "OK")
        await ending
        await asyncio.sleep(0.6)
        late = [m for m in uas.all if m.status == 200 and m.cseq()[1] == "INVITE"]
        await call.close()
        uas.close()
        return first_ok, again_ok, bye, bye_again, late

    first_ok, again_ok, bye, bye_again, late = run(scenario())
    assert again_ok.status == 200 and again_ok.cseq() == first_ok.cseq()
    assert bye_again.header("Via") == bye.header("Via")
    assert len(late) == 2  # once acknowledged, the 200 is not sent again


def test_a_request_on_a_new_tcp_connection_is_answered_on_it():
    async def scenario():
        uas = Uas()
        port = await uas.start("tcp")
        seen = Seen()
        call = make_call(port, seen, transport="tcp")
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        await answer(uas, invite)
        await start
        contact = invite.header("Contact")
        assert contact.endswith(";transport=tcp>")
        host, contact_port = contact.strip("<>").split("@")[1].split(";")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(contact_port))
        bye = SipMessage(method="BYE", request_uri=contact.strip("<>"), headers=[
            ("Via", "SIP/2.0/TCP 127.0.0.1:9;branch=z9hG4bKnew"),
            ("From", f"{invite.header('To')};tag={uas.tag}"), ("To", invite.header("From")),
            ("Call-ID", invite.header("Call-ID")), ("CSeq", "7 BYE")])
        writer.write(bye.to_bytes())
        framer = StreamFramer()
        responses = []
        while not responses:
            responses = framer.feed(await asyncio.wait_for(reader.read(4096), 5))
        writer.close()
        await call.close()
        uas.close()
        return responses[0], seen

    response, seen = run(scenario())
    assert (response.status, response.cseq()) == (200, (7, "BYE"))
    assert seen.kinds()[-1] == "bye"


def test_a_megabyte_answer_over_tcp_fails_the_call_as_hostile():
    async def scenario():
        uas = Uas()
        port = await uas.start("tcp")
        call = make_call(port, Seen(), transport="tcp")
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        uas.respond(invite, 180, "Ringing")
        uas.send(b"SIP/2.0 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"v=0\r\n" * 20_000)
        with pytest.raises(SipError) as raised:
            await start
        facts = call.facts()
        await call.close()
        uas.close()
        return raised.value, facts

    error, facts = run(scenario())
    assert error.code == "hostile" and "oversized_message" in str(error), str(error)
    assert facts["sip"]["hostile"] == {"oversized_message": 1}


def test_we_send_rtcp_sender_reports_to_the_port_the_answer_names():
    async def scenario():
        uas = Uas()
        port = await uas.start()
        call = make_call(port, Seen())
        call.media.report_interval_seconds = 0.05
        start = asyncio.create_task(call.start())
        invite = await uas.next("INVITE")
        body = uas.answer_sdp() + f"a=rtcp:{uas.rtp_port}\r\n".encode()
        await answer(uas, invite, body=body)
        await start
        call.line.queue_frames([b"\xff" * 160] * 10)
        while call.line.pending:
            await asyncio.sleep(0.02)
        after_media = call.media.reports_sent
        while call.media.reports_sent < max(3, after_media + 1):
            await asyncio.sleep(0.02)
        await hang_up(call, uas)
        await call.close()
        uas.close()
        return uas, call

    uas, call = run(scenario())
    reports = [parse_rtcp(data)[0] for _, data in uas.rtp_in if is_rtcp(data)]
    assert len(reports) >= 3 and {r["ssrc"] for r in reports} == {call.line.ssrc}
    assert reports[-1]["type"] == "sr" and reports[-1]["packets_sent"] == 10
