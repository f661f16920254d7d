"""SipCall's media against the scripted far end (_sip_uas.py): a whole call with RTP and keys
both ways, early media from a 183, and our RTCP sender reports."""

from __future__ import annotations

import asyncio
import json
import logging
import re

from _sip_uas import Seen, Uas, answer, clock_ns, hang_up, make_call, run, send_rtp

from voicelab.endpoints._kernel_clock import CONVERSION_ERROR_NS
from voicelab.endpoints.sip._rtp import (
    TelephoneEvent,
    is_rtcp,
    pack_event,
    parse_event,
    parse_rtcp,
    parse_rtp,
)

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
