"""SipCall's signalling against the scripted far end (_sip_uas.py): digest authentication,
failures and cancelling, re-INVITEs, retransmissions over UDP and requests over TCP."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re

import pytest
from _sip_uas import PASSWORD, Seen, Uas, answer, connected, dial, make_call, run

from voicelab.endpoints.sip._message import SipMessage, StreamFramer
from voicelab.endpoints.sip._types import SipError

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
        uas, call, _, start, invite = await dial()
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
        uas, call, _, start, invite = await dial()
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


def test_reinvites_are_answered_or_refused():
    async def scenario():
        uas, call, seen, start, invite = await dial(codecs=("pcma", "pcmu"))
        await answer(uas, invite, body=uas.answer_sdp("8 101"))
        negotiated = await start
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


def test_udp_retransmits_our_bye_and_our_200_to_a_reinvite_until_answered():
    async def scenario():
        uas, call, _, _, invite = await connected()
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


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_request_on_a_new_tcp_connection_is_answered_on_it(loop):
    # uvloop's stream transports are not asyncio.Transport subclasses; the command line runs
    # uvloop when installed, so TCP calls must work on both loops
    loop_factory = None if loop == "asyncio" else pytest.importorskip("uvloop").new_event_loop

    async def scenario():
        uas, call, seen, _, invite = await connected("tcp")
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

    response, seen = run(scenario(), loop_factory=loop_factory)
    assert (response.status, response.cseq()) == (200, (7, "BYE"))
    assert seen.kinds()[-1] == "bye"
