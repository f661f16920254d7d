"""SipCall against a hostile far end (_sip_uas.py): every bound is counted and reported once, and
an oversized answer or message fails the call as hostile."""

from __future__ import annotations

import asyncio

import pytest
from _sip_uas import connected, dial, run, send_rtp

from voicelab.endpoints.sip._rtp import (
    TelephoneEvent,
    pack_event,
    pack_rtp,
)
from voicelab.endpoints.sip._types import SipError

# --- hostile far ends ------------------------------------------------------------------------------

def test_a_hostile_far_end_is_counted_and_reported_once_each(caplog):
    async def scenario():
        uas, call, seen, _, invite = await connected(rtp_timeout_seconds=0.2)
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
        uas, call, _, start, invite = await dial()
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
        uas, call, seen, _, invite = await connected("tcp")
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


def test_a_megabyte_answer_over_tcp_fails_the_call_as_hostile():
    async def scenario():
        uas, call, _, start, invite = await dial("tcp")
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
