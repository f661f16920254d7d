"""The SIP double's signalling (_sip_double_caller.py drives it): TCP, final statuses, CANCEL,
digest, failing modes, hold and resume, retransmissions, refused offers, and sipp against it."""

from __future__ import annotations

import hashlib
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from _sip_double_caller import (
    DATA,
    IVR,
    SHORT_AGENT,
    Doubles,
    of_call,
    wait_for,
)

# --- TCP, failing and hostile far ends ---------------------------------------------------------

def test_a_call_over_tcp(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get(SHORT_AGENT)
    caller = sip_callers(double.port, "tcp")
    ok = caller.answered()
    call = double.calls_started
    assert ok.h("contact").endswith(";transport=tcp>")
    wait_for(events, call, "invite_received", transport="TCP")
    wait_for(events, call, "reply_sent", reply=0)
    caller.request("BYE")
    assert caller.expect(200).h("cseq").endswith("BYE")
    wait_for(events, call, "call_ended", why="bye_received")


@pytest.mark.parametrize("status", [486, 603, 404, 480])
def test_respond_with_a_final_status(sip_doubles: Doubles, sip_callers, status: int) -> None:
    double, events = sip_doubles.get({"respond_with": status})
    caller = sip_callers(double.port)
    branch = caller.invite()
    caller.expect(100)
    assert caller.expect(status).h("to")
    caller.request("ACK", cseq=caller.cseq, branch=branch)  # the ACK of a failure: same branch
    wait_for(events, double.calls_started, "call_ended", why=f"rejected_{status}")


def test_never_answered_then_cancelled(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get({"never_answer": True})
    caller = sip_callers(double.port)
    branch = caller.invite()
    caller.expect(180)
    caller.request("CANCEL", cseq=caller.cseq, branch=branch)
    assert caller.expect(200).h("cseq").endswith("CANCEL")
    assert caller.expect(487).h("cseq").endswith("INVITE")
    caller.request("ACK", cseq=caller.cseq, branch=branch)
    wait_for(events, double.calls_started, "call_ended", why="cancelled")


def digest(challenge: str, *, password: str, algorithm: str, port: int) -> str:
    def h(text: str) -> str:
        return hashlib.new("sha256" if algorithm == "SHA-256" else "md5",
                           text.encode()).hexdigest()

    realm = re.search(r'realm="([^"]+)"', challenge).group(1)
    nonce = re.search(r'nonce="([^"]+)"', challenge).group(1)
    uri, cnonce = f"sip:agent@127.0.0.1:{port}", "0a4f113b"
    ha1, ha2 = h(f"caller:{realm}:{password}"), h(f"INVITE:{uri}")
    response = h(f"{ha1}:{nonce}:00000001:{cnonce}:auth:{ha2}")
    return (f'Authorization: Digest username="caller", realm="{realm}", nonce="{nonce}", '
            f'uri="{uri}", response="{response}", algorithm={algorithm}, qop=auth, '
            f'nc=00000001, cnonce="{cnonce}"\n')


@pytest.mark.parametrize("algorithm", ["MD5", "SHA-256"])
def test_digest_authentication(sip_doubles: Doubles, sip_callers, algorithm: str) -> None:
    auth = {"username": "caller", "password": "s3cret", "algorithm": algorithm}
    double, events = sip_doubles.get({**SHORT_AGENT, "require_auth": auth})
    for password, final in (("wrong", 403), ("s3cret", 200)):
        caller = sip_callers(double.port)
        branch = caller.invite()
        challenge = caller.expect(401).h("www-authenticate")
        assert f"algorithm={algorithm}" in challenge and 'qop="auth"' in challenge
        caller.request("ACK", cseq=caller.cseq, branch=branch)
        caller.invite(extra=digest(challenge, password=password, algorithm=algorithm,
                                   port=double.port))
        assert caller.expect(final).h("cseq") == "2 INVITE"
        caller.request("ACK", cseq=caller.cseq)
    call = double.calls_started
    wait_for(events, call - 1, "auth_refused", reason="wrong response hash")
    wait_for(events, call, "auth_accepted")
    assert not [e for e in events if "s3cret" in repr(e)]  # the password is never reported


def test_no_media_after_answer(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get({**SHORT_AGENT, "no_media_after_answer": True})
    caller = sip_callers(double.port)
    caller.answered()
    wait_for(events, double.calls_started, "ack_received")
    time.sleep(0.5)
    assert caller.rtp_in == []
    caller.request("BYE")
    caller.expect(200)


def test_hang_up_and_hold(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get({**SHORT_AGENT, "reinvite_after_seconds": 0.2,
                                      "hang_up_after_seconds": 0.6})
    caller = sip_callers(double.port)
    caller.answered()
    call = double.calls_started
    hold = caller.expect("INVITE")
    assert b"a=sendonly" in hold.body and hold.h("call-id") == caller.call_id
    caller.respond(hold, 200, caller.offer())
    assert caller.expect("ACK").h("cseq") == hold.h("cseq").replace("INVITE", "ACK")
    wait_for(events, call, "reinvite_answered", status=200)
    bye = caller.expect("BYE")
    assert bye.h("from").endswith(caller.to.split(";tag=")[1])  # the dialog's tags, swapped
    caller.respond(bye, 200)
    wait_for(events, call, "bye_sent", why="hang_up_after_seconds")
    wait_for(events, call, "bye_answered", status=200)


def test_the_caller_holds_and_resumes(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get(SHORT_AGENT)
    caller = sip_callers(double.port)
    caller.answered()
    call = double.calls_started
    wait_for(events, call, "ack_received")
    hold = caller.offer().replace(b"a=sendrecv", b"a=sendonly")
    caller.request("INVITE", body=hold, content_type="application/sdp")
    assert b"a=recvonly" in caller.expect(200).body
    caller.request("ACK", cseq=caller.cseq)
    wait_for(events, call, "reinvite_received", direction="sendonly", answer_direction="recvonly")
    time.sleep(0.2)  # packets sent before the hold have arrived
    held_from = len(caller.rtp_in)
    time.sleep(0.4)
    assert len(caller.rtp_in) == held_from  # a held caller is sent nothing
    caller.request("INVITE", body=caller.offer("8 101"), content_type="application/sdp")
    resumed = caller.expect(200)
    assert b"a=sendrecv" in resumed.body and b"RTP/AVP 8 101" in resumed.body
    caller.request("ACK", cseq=caller.cseq)
    time.sleep(0.3)
    assert len(caller.rtp_in) > held_from + 5 and caller.rtp_in[-1][1][1] & 0x7F == 8
    caller.request("INVITE", body=b"v=0\r\n", content_type="application/sdp")
    assert caller.expect(488)
    caller.request("BYE")
    caller.expect(200)


def test_retransmissions_over_udp(sip_doubles: Doubles, sip_callers) -> None:
    """A retransmitted INVITE gets the same answer (not a second call); the 200 is sent again
    (T1 = 500 ms) until the ACK comes."""
    double, events = sip_doubles.get(SHORT_AGENT)
    caller = sip_callers(double.port)
    before = double.calls_started
    branch = caller.invite()
    first = caller.expect(200)
    caller.cseq -= 1
    caller.request("INVITE", body=caller.offer(), content_type="application/sdp", branch=branch)
    assert caller.expect(200).h("to") == first.h("to")  # the same dialog, the same tag
    again = caller.expect(200, timeout=3)  # no ACK yet: the 200 again
    assert again.raw == first.raw and double.calls_started == before + 1
    caller.to = first.h("to")
    caller.request("ACK", cseq=caller.cseq)
    wait_for(events, double.calls_started, "ack_received")
    time.sleep(1.2)
    assert all(m.status != 200 for m in list(caller.inbox.queue))  # acknowledged: no more
    caller.request("BYE")
    caller.expect(200)


def test_unanswerable_offers_and_too_many_calls_are_refused(sip_doubles: Doubles,
                                                            sip_callers) -> None:
    double, events = sip_doubles.get({**SHORT_AGENT, "max_calls": 1})
    g722 = sip_callers(double.port)
    g722.invite(formats="9 101")  # no codec the double speaks
    assert g722.expect(488)
    wait_for(events, double.calls_started, "call_ended", why="rejected_488")
    offerless = sip_callers(double.port)
    offerless.request("INVITE")  # no SDP: the double needs the offer in the INVITE
    assert offerless.expect(488)
    first = sip_callers(double.port)
    first.answered()
    second = sip_callers(double.port)
    second.invite()
    assert second.expect(503)  # over max_calls calls in progress
    first.request("BYE")
    first.expect(200)


# --- real SIP software -------------------------------------------------------------------------

def free_udp_port() -> int:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.mark.skipif(shutil.which("sipp") is None, reason="sipp (Debian's sip-tester) is not "
                                                         "installed")
@pytest.mark.parametrize("transport", ["u1", "t1"])
def test_sipp_completes_a_call_against_the_double(sip_doubles: Doubles, tmp_path: Path,
                                                  transport: str) -> None:
    double, events = sip_doubles.get({**SHORT_AGENT, "greeting": "Hello from the double."})
    before = double.calls_started
    run = subprocess.run(
        ["sipp", "-sf", str(DATA / "sipp_uac_hold_bye.xml"), "-m", "1", "-s", "agent",
         f"127.0.0.1:{double.port}", "-i", "127.0.0.1", "-p", str(free_udp_port()),
         "-mp", str(free_udp_port()), "-t", transport, "-nostdin", "-timeout", "20s",
         "-timeout_error", "-trace_err", "-error_file", str(tmp_path / "errors.log")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    errors = (tmp_path / "errors.log").read_text() if (tmp_path / "errors.log").exists() else ""
    assert run.returncode == 0, run.stdout[-2000:] + errors
    call = double.calls_started
    assert call == before + 1
    wait_for(events, call, "invite_received", transport="TCP" if transport == "t1" else "UDP")
    wait_for(events, call, "ack_received")
    wait_for(events, call, "bye_received")
    ended = wait_for(events, call, "call_ended", why="bye_received")
    assert ended["rtp_sent"] > 25 and ended["violations"] == 0  # it spoke through the pause


@pytest.mark.skipif(shutil.which("sipp") is None, reason="sipp (Debian's sip-tester) is not "
                                                         "installed")
def test_sipp_presses_through_the_ivr_by_rfc4733_and_info(sip_doubles: Doubles,
                                                          tmp_path: Path) -> None:
    """sipp plays its own RFC 4733 capture of key 1 from its media port, then sends key 0 by
    INFO: the double's menu moves to billing, then to the agent."""
    if not Path("/usr/share/sip-tester/dtmf_2833_1.pcap").exists():
        pytest.skip("sipp's dtmf_2833_1.pcap is not installed")
    double, events = sip_doubles.get({**IVR, "ring_ms": 0})
    run = subprocess.run(
        ["sipp", "-sf", str(DATA / "sipp_uac_ivr_keys.xml"), "-m", "1", "-s", "agent",
         f"127.0.0.1:{double.port}", "-i", "127.0.0.1", "-p", str(free_udp_port()),
         "-mp", str(free_udp_port()), "-nostdin", "-timeout", "20s", "-timeout_error"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:]
    call = double.calls_started
    wait_for(events, call, "key_received", digit="1", method="rfc4733")
    wait_for(events, call, "menu_entered", menu="billing")
    wait_for(events, call, "key_received", digit="0", method="info")
    wait_for(events, call, "agent_reached", menu="billing")
    wait_for(events, call, "call_ended", why="bye_received")
    assert len(of_call(events, call, "key_received")) == 2  # the capture's packets: one key


def test_the_double_tries_another_port_when_its_udp_port_is_taken_for_tcp(monkeypatch):
    # SIP listens on one port for UDP and TCP: the port the OS picked for UDP may already be
    # another TCP connection's (CI saw "address already in use"); the double picks again
    import asyncio
    import errno

    from voicelab.doubles.sip import SipDouble

    real = asyncio.start_server
    refused: list[int] = []

    async def taken_once(*args, **kwargs):
        if not refused:
            refused.append(args[2])
            raise OSError(errno.EADDRINUSE, "address already in use")
        return await real(*args, **kwargs)

    monkeypatch.setattr(asyncio, "start_server", taken_once)

    async def scenario() -> tuple[int, str]:
        double = SipDouble(SHORT_AGENT)
        uri = await double.start()
        try:
            return double.port, uri
        finally:
            await double.stop()

    port, uri = asyncio.run(scenario())
    assert refused and port > 0 and uri.endswith(f":{port}")
