"""The SIP double's hostile modes and its bounds on a hostile caller (_sip_double_caller.py drives
it): an RTP flood, foreign RTP, key and BYE storms, a huge SDP."""

from __future__ import annotations

import socket
import time

from _sip_double_caller import (
    SHORT_AGENT,
    Doubles,
    of_call,
    wait_for,
)


def test_rtp_flood_and_foreign_rtp(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get({**SHORT_AGENT, "rtp_flood": True, "foreign_rtp": True})
    caller = sip_callers(double.port)
    ok = caller.answered()
    time.sleep(0.6)
    caller.request("BYE")
    caller.expect(200)
    ended = wait_for(events, double.calls_started, "call_ended")
    assert ended["rtp_sent"] > 500  # 5000 a second of flood beside 50 of media
    assert len(caller.rtp_in) > 200
    answered_port = caller.remote_rtp(ok)[1]
    assert {source[1] for _, _, source in caller.rtp_in} - {answered_port}  # another port


def test_dtmf_storm_and_bye_storm(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get({**SHORT_AGENT, "dtmf_storm": True, "bye_storm": True,
                                      "storm_count": 1000, "hang_up_after_seconds": 1.0})
    caller = sip_callers(double.port)
    caller.answered()
    call = double.calls_started
    wait_for(events, call, "dtmf_storm_sent", events=1000)
    wait_for(events, call, "bye_storm_sent", requests=1000)
    time.sleep(0.2)
    keys = [d for _, d, _ in caller.rtp_in if d[1] & 0x7F == 101]
    assert len(keys) > 200  # four packets an event, some may overflow the socket buffer
    byes = []
    while not caller.inbox.empty():
        message = caller.inbox.get()
        if message.method == "BYE":
            byes.append(message.h("cseq"))
    assert len(set(byes)) > 50
    for bye in byes[:50]:  # answers to the storm: only the first BYE's is reported
        cseq = bye.split()[0]
        caller.send(f"SIP/2.0 481 No\nVia: SIP/2.0/UDP 127.0.0.1:{double.port};branch=z9hG4bKx\n"
                    f"From: <sip:agent@127.0.0.1>;tag=x\nTo: <sip:caller@127.0.0.1>;tag={caller.tag}"
                    f"\nCall-ID: {caller.call_id}\nCSeq: {cseq} BYE\nContent-Length: 0\n\n")
    time.sleep(0.3)
    assert len(of_call(events, call, "bye_answered")) <= 1


def test_huge_sdp_over_tcp(sip_doubles: Doubles, sip_callers) -> None:
    double, _ = sip_doubles.get({**SHORT_AGENT, "huge_sdp": True, "huge_sdp_bytes": 3_000_000})
    caller = sip_callers(double.port, "tcp")
    ok = caller.answered()
    assert len(ok.body) > 3_000_000 and b"m=audio" in ok.body
    udp = sip_callers(double.port)
    assert 50_000 < len(udp.answered().body) < 65_000  # as big as one datagram may be


def test_hostile_callers_are_bounded(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get(SHORT_AGENT)
    caller = sip_callers(double.port)
    caller.sip.sendto(b"\x00garbage" * 100, ("127.0.0.1", double.port))
    caller.sip.sendto(b"OPTIONS sip:a SIP/2.0\r\n" + b"X-A: b\r\n" * 150 + b"\r\n",
                      ("127.0.0.1", double.port))
    caller.request("BYE")  # outside any call
    assert caller.expect(481)
    reasons = [e["reason"] for e in events if e["call"] == 0 and e["event"] == "violation"]
    assert any("no blank line after the header fields" in r for r in reasons)
    assert any("more than 100 header lines" in r for r in reasons)
    ok = caller.answered()
    to = caller.remote_rtp(ok)
    packet = caller.rtp_packet(0, b"\xff" * 160)
    for index in range(2000):  # ~20 000 a second, far over the 400 the double reads
        caller.rtp.sendto(packet, to)
        if index % 100 == 99:
            time.sleep(0.005)
    time.sleep(0.3)
    caller.request("BYE")
    caller.expect(200)
    ended = wait_for(events, double.calls_started, "call_ended")
    # what the kernel delivered (a busy machine may drop some) was read up to the rate only
    assert ended["rtp_received"] <= 400 < ended["rtp_received"] + ended["rtp_over_rate"], \
        repr(ended)
    wait_for(events, double.calls_started, "violation", reason="RTP over 400 packets a second")
    stream = socket.create_connection(("127.0.0.1", double.port))
    stream.sendall(b"OPTIONS sip:a SIP/2.0\r\nVia: x\r\n\r\n")  # no Content-Length on TCP
    assert stream.recv(100) == b""  # the double closes a stream it cannot frame
    stream.close()
