"""The SIP double's conversation (_sip_double_caller.py drives it): the agent greets, replies and
stops when talked over, the IVR's keys and early media, a piper prompt heard as words, RTCP
both ways, and the standalone double's command line."""

from __future__ import annotations

import json
import re
import signal
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from _sip_double_caller import (
    IVR,
    SHORT_AGENT,
    Doubles,
    of_call,
    tone,
    wait_for,
)

from voicelab.doubles.sip.__main__ import main as sip_main

# --- the agent ---------------------------------------------------------------------------------

def test_agent_call_over_udp_greets_replies_and_hangs_up(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get({**SHORT_AGENT, "hang_up_after_replies": 1})
    caller = sip_callers(double.port)
    ok = caller.answered(formats="8 0 101")
    call = double.calls_started
    assert re.search(rb"m=audio \d+ RTP/AVP 8 101", ok.body), ok.body  # the first offered codec
    assert b"a=rtpmap:8 PCMA/8000" in ok.body and ok.h("contact")
    answered = wait_for(events, call, "answered")
    wait_for(events, call, "ack_received")
    greeting = wait_for(events, call, "reply_sent", reply=0)
    # the double's own truth: its frames went out one every 20 ms, within its stated lateness
    span_ms = (greeting["last_ns"] - greeting["first_ns"]) / 1e6
    expected_ms = (greeting["frames"] - 1) * 20
    late_ms = greeting["most_late_ms"]  # the clock's own stated lateness (a busy machine)
    assert expected_ms - late_ms - 1 <= span_ms <= expected_ms + late_ms + 25
    assert greeting["first_ns"] > answered["answered_ns"]
    arrivals = [ns for ns, data, _ in caller.rtp_in]
    audio = [data for _, data, _ in caller.rtp_in]
    assert all(len(d) == 12 + 160 and d[1] & 0x7F == 8 for d in audio[:20])
    assert arrivals[0] > greeting["first_ns"]  # a send stamp precedes the arrival stamp
    gaps = np.diff(arrivals[:greeting["frames"]]) / 1e6
    assert 10 < float(np.median(gaps)) < 30  # paced, not a burst
    caller.speak(caller.remote_rtp(ok), tone(), payload_type=8)
    ended = wait_for(events, call, "caller_speech_ended")
    reply = wait_for(events, call, "reply_sent", reply=1)
    assert reply["first_ns"] > ended["ns"]
    bye = caller.expect("BYE")  # the scenario's end: the double hangs up
    caller.respond(bye, 200)
    wait_for(events, call, "bye_sent", why="scenario_ended")
    wait_for(events, call, "bye_answered", status=200)
    wait_for(events, call, "call_ended", why="hung_up")


def test_agent_stops_when_talked_over(sip_doubles: Doubles, sip_callers) -> None:
    long_reply = "This is a long answer that goes on and on so the caller can talk over it."
    double, events = sip_doubles.get({**SHORT_AGENT, "greeting": long_reply})
    caller = sip_callers(double.port)
    ok = caller.answered()
    call = double.calls_started
    wait_for(events, call, "answered")
    time.sleep(0.3)
    caller.speak(caller.remote_rtp(ok), tone(0.8))
    stopped = wait_for(events, call, "barge_in_stopped", reply=0)
    assert stopped["frames_sent"] < stopped["frames"]
    assert not of_call(events, call, "reply_sent") or \
        of_call(events, call, "reply_sent")[0]["reply"] != 0
    caller.request("BYE")
    assert caller.expect(200).h("cseq").endswith("BYE")
    wait_for(events, call, "bye_received")
    wait_for(events, call, "call_ended", why="bye_received")


# --- the standalone double ---------------------------------------------------------------------

def test_main_exit_codes_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    try:
        assert sip_main(["--port", str(taken.getsockname()[1])]) == 1
    finally:
        taken.close()
    assert "cannot listen" in capsys.readouterr().err
    assert sip_main(["--settings", '{"mode": "fax"}']) == 2
    nowhere = '{"menus": {"main": {"prompt": "x", "keys": {"1": "nowhere"}}}}'
    assert sip_main(["--settings", nowhere]) == 2
    error = capsys.readouterr().err
    assert "mode" in error and "no menu 'nowhere'" in error and "Traceback" not in error


def test_main_prints_its_uri_and_serves_a_call_as_json_lines(sip_callers) -> None:
    process = subprocess.Popen([sys.executable, "-m", "voicelab.doubles.sip", "--settings",
                                '{"mode": "agent", "greeting": "Hi.", "ring_ms": 0}'],
                               stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(process.stdout.readline())
        assert first == {"uri": f"sip:agent@127.0.0.1:{first['port']}", "port": first["port"]}
        caller = sip_callers(first["port"])
        caller.answered()
        caller.request("BYE")
        caller.expect(200)
        lines = [json.loads(process.stdout.readline()) for _ in range(3)]
        assert [line["event"] for line in lines] == ["invite_received", "answered",
                                                     "ack_received"]
        assert all(line["call"] == 1 and isinstance(line["ns"], int) for line in lines)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_ivr_keys_by_both_methods_move_the_menu_and_a_key_stops_the_prompt(
        sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get(IVR)
    caller = sip_callers(double.port)
    ok = caller.answered("0 101")
    call = double.calls_started
    media = caller.remote_rtp(ok)
    main = wait_for(events, call, "prompt_started", menu="main")
    time.sleep(0.3)
    caller.key(media, "1")  # while the main prompt plays: a key barge-in
    stopped = wait_for(events, call, "prompt_stopped", menu="main")
    assert stopped["why"] == "key_barge_in" and stopped["frames_sent"] < stopped["frames"]
    key = wait_for(events, call, "key_received", digit="1")
    assert key["method"] == "rfc4733" and key["first_packet_ns"] > main["first_ns"]
    billing = wait_for(events, call, "prompt_started", menu="billing")
    assert billing["first_ns"] > key["first_packet_ns"]
    time.sleep(0.2)
    assert len(of_call(events, call, "key_received")) == 1  # 6 packets, one key
    assert len(of_call(events, call, "key_ended")) == 1  # the end packet's three copies: one
    caller.request("INFO", body=b"Signal=7\r\nDuration=160\r\n",
                   content_type="application/dtmf-relay")
    assert caller.expect(200).h("cseq").endswith("INFO")
    wait_for(events, call, "key_received", digit="7", method="info")
    wait_for(events, call, "key_refused", key="7", menu="billing")
    wait_for(events, call, "prompt_stopped", menu="invalid", why="finished")
    wait_for(events, call, "prompt_started", nth=2, menu="billing")
    caller.request("INFO", body=b"0", content_type="application/dtmf")
    caller.expect(200)
    wait_for(events, call, "agent_reached", menu="billing")
    greeting = wait_for(events, call, "reply_sent", reply=0)
    assert greeting["text"] == "Agent here."
    caller.request("INFO", body=b"Signal=xyz\r\n", content_type="application/dtmf-relay")
    caller.expect(400)
    caller.request("INFO", body=b"5", content_type="text/plain")
    caller.expect(415)
    caller.request("BYE")
    caller.expect(200)
    ended = wait_for(events, call, "call_ended", why="bye_received")
    assert ended["violations"] == 2 and ended["rtp_received"] == 6  # the key's packets
    assert [e["menu"] for e in of_call(events, call, "prompt_started")] == \
        ["main", "billing", "invalid", "billing"]  # the refused key: sorry, then the menu


def test_early_media_starts_the_prompt_before_the_answer(sip_doubles: Doubles,
                                                           sip_callers) -> None:
    double, events = sip_doubles.get({**IVR, "early_media": True, "ring_ms": 600})
    caller = sip_callers(double.port)
    caller.invite()
    progress = caller.expect(183)
    assert b"m=audio" in progress.body
    ok = caller.expect(200)
    call = double.calls_started
    first_packet = caller.rtp_in[0][0]
    started = wait_for(events, call, "prompt_started", menu="main")
    answered = wait_for(events, call, "answered")
    assert started["first_ns"] < answered["answered_ns"] and first_packet < answered["answered_ns"]
    caller.to = ok.h("to")
    caller.request("ACK", cseq=caller.cseq)
    caller.request("BYE")
    caller.expect(200)


def test_a_piper_prompt_is_heard_as_words(sip_doubles: Doubles, sip_callers) -> None:
    """``voice: piper`` gives real words: the caller recognizes the menu's prompt from the
    RTP it received (what the IVR verdict "the expected prompt was heard" reads)."""
    pytest.importorskip("piper")
    pytest.importorskip("pocketsphinx")
    from voicelab.audio import mulaw_decode
    from voicelab.speech import recognize

    prompt = "I recorded your daily plan, and I saved the reminder."
    double, events = sip_doubles.get({
        "voice": "piper", "ring_ms": 0, "greeting": "Hi.", "invalid_key_text": "No.",
        "reply_text": "Yes.", "menus": {"main": {"prompt": prompt, "keys": {"0": "agent"}}}})
    caller = sip_callers(double.port)
    caller.answered("0 101")
    stopped = wait_for(events, double.calls_started, "prompt_stopped", menu="main", timeout=30)
    assert stopped["why"] == "finished"
    time.sleep(0.1)
    payloads = [data[12:] for ns, data, _ in caller.rtp_in if data[1] & 0x7F == 0]
    words = recognize(mulaw_decode(b"".join(payloads)))
    assert "recorded" in words and "reminder" in words, words
    caller.request("BYE")
    caller.expect(200)


def test_rtcp_sender_reports_both_ways(sip_doubles: Doubles, sip_callers) -> None:
    double, events = sip_doubles.get({**SHORT_AGENT, "rtcp_interval_seconds": 0.2})
    caller = sip_callers(double.port)
    ok = caller.answered()
    rtcp_port = int(re.search(rb"a=rtcp:(\d+)", ok.body).group(1))
    caller.rtcp.sendto(struct.pack("!BBHI", 0x80, 201, 1, 0x1234), ("127.0.0.1", rtcp_port))
    time.sleep(0.7)
    reports = list(caller.rtcp_in)
    assert len(reports) >= 2
    first, received = reports[0], len(caller.rtp_in)
    version, kind, length, ssrc = struct.unpack_from("!BBHI", first)
    assert (version >> 6, kind, length) == (2, 200, 6)  # a sender report, RFC 3550 6.4.1
    assert ssrc == struct.unpack_from("!I", caller.rtp_in[0][1], 8)[0]  # the RTP stream's
    packets, octets = struct.unpack_from("!II", first, 20)
    assert 0 < packets <= received and octets == packets * 160
    assert first[28 + 1] == 202 and b"voicelab-double@127.0.0.1" in first  # SDES CNAME
    caller.request("BYE")
    caller.expect(200)
    ended = wait_for(events, double.calls_started, "call_ended")
    assert ended["rtcp_received"] == 1 and ended["rtcp_sent"] >= len(reports)
