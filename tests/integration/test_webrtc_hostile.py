"""Connection life and hostile products on ``adapter: webrtc``, in-process against the WebRTC
bot double on 127.0.0.1: each failure becomes a named :class:`EndpointError` at connect, or an
``error`` then ``closed`` during the call (the runner's exit 4), never an exception that escapes
or memory that grows without bound."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from typing import Any

import pytest

from voicelab.audio import PcmAudio
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent

pytest.importorskip("aiortc")

from voicelab.doubles.webrtc import WebRtcBot  # noqa: E402
from voicelab.endpoints.webrtc import WebRtcEndpoint  # noqa: E402

LOOPBACK = {"ice_host_addresses": ["127.0.0.1"]}


def endpoint(url: str, **settings: object) -> WebRtcEndpoint:
    return WebRtcEndpoint({"url": url, **LOOPBACK, "connect_timeout_seconds": 5.0, **settings},
                          EndpointContext(session_id="hostile"))


async def call(bot_settings: Mapping[str, Any], *, seconds: float = 6.0,
               **settings: object) -> tuple[list[EndpointEvent], WebRtcBot]:
    """Connect, stream silence, collect events until ``closed`` (or ``seconds``)."""
    async with WebRtcBot(bot_settings) as bot:
        adapter = endpoint(bot.url, **settings)
        await adapter.connect()
        events: list[EndpointEvent] = []

        async def line() -> None:
            while True:
                await adapter.send_audio(PcmAudio.silence(0.02))
                await asyncio.sleep(0.02)

        async def collect() -> None:
            async for event in adapter.events():
                if event.type != "audio_delta":
                    events.append(event)

        feeder = asyncio.create_task(line())
        collector = asyncio.create_task(collect())
        await asyncio.wait([collector], timeout=seconds)
        feeder.cancel()
        await adapter.close()
        await asyncio.wait_for(collector, 5.0)  # the closing events follow the close
        return events, bot


def ending(events: list[EndpointEvent]) -> EndpointEvent:
    errors = [e for e in events if e.type == "error"]
    assert errors and events[-1].type == "closed", [e.type for e in events]
    return errors[0]


async def connect_error(bot_settings: Mapping[str, Any], **settings: object) -> EndpointError:
    async with WebRtcBot(bot_settings) as bot:
        adapter = endpoint(bot.url, **settings)
        with pytest.raises(EndpointError) as caught:
            await adapter.connect()
        await adapter.close()
        return caught.value


def test_an_answer_sdp_of_megabytes_is_refused_before_it_is_held():
    error = asyncio.run(connect_error({"hostile": "huge_answer"}))
    assert error.code == "resource_limit" and "max_answer_bytes" in str(error)


def test_an_answer_whose_candidates_lead_nowhere_is_a_connect_failure():
    error = asyncio.run(connect_error({"hostile": "bad_ice"}, connect_timeout_seconds=3.0))
    assert error.code in ("ice_failed", "connect_timeout"), error
    assert "ICE" in str(error)


def test_whip_without_the_token_is_rejected_naming_the_status():
    error = asyncio.run(connect_error({"token": "right"}, signalling="whip", token="wrong"))
    assert error.code == "handshake_rejected" and "401" in str(error)
    assert "wrong" not in str(error)


def test_a_fastrtc_refusal_names_its_reason():
    error = asyncio.run(connect_error({"max_calls": 0, "hostile": "refuse"},
                                      signalling="fastrtc"))
    assert error.code == "call_refused" and "concurrency_limit_reached" in str(error)


def test_nobody_listening_is_connection_refused():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    adapter = endpoint(f"http://127.0.0.1:{port}")
    with pytest.raises(EndpointError) as caught:
        asyncio.run(adapter.connect())
    assert caught.value.code == "connection_refused"


def test_a_track_that_never_sends_ends_the_call():
    events, _ = asyncio.run(call({"hostile": "silent_track"}, receive_timeout_seconds=1.0))
    error = ending(events)
    assert error.data["code"] == "receive_timeout" and "no RTP" in str(error.text)


def test_a_flooded_data_channel_ends_the_call():
    # a limit an in-process flood passes even on a loaded machine (its pace is the CPU's)
    events, _ = asyncio.run(call({"hostile": "data_flood"},
                                 limits={"max_data_messages_per_second": 20}))
    error = ending(events)
    assert error.data["code"] == "resource_limit" and "flooded the data channel" in str(error.text)
    kept = [e for e in events if e.type == "raw" and e.data.get("rtvi") == "server-message"]
    assert len(kept) <= 20  # refused past the rate: the rest never reached the events


def test_a_data_channel_message_of_megabytes_ends_the_call():
    events, _ = asyncio.run(call({"hostile": "big_data_message"}))
    error = ending(events)
    assert error.data["code"] == "resource_limit" and "data-channel message" in str(error.text)


def test_the_evaluator_closing_keeps_the_calls_rtp_facts():
    events, _ = asyncio.run(call({"greeting": "Hi."}, seconds=1.5))
    # the evaluator closed it: closed by the evaluator, with the call's RTP facts before it
    assert events[-1].type == "closed" and events[-1].data["initiated_by"] == "evaluator"
    [facts] = [e.data["webrtc"] for e in events if e.type == "raw" and "webrtc" in e.data]
    assert facts["received"]["packets"] > 0 and facts["sent"]["packets_sent"] > 0


def test_a_renegotiation_the_product_asks_for_is_refused_cleanly():
    events, _ = asyncio.run(call({"hostile": "renegotiate"}))
    error = ending(events)
    assert error.data["code"] == "renegotiation_refused" and "renegotiate" in str(error.text)


def test_an_rtp_flood_ends_the_call_with_the_excess_refused_before_it_is_queued():
    events, _ = asyncio.run(call({"hostile": "rtp_flood"},  # twice the pace of 20 ms audio
                                 limits={"max_rtp_packets_per_second": 100}))
    error = ending(events)
    assert error.data["code"] == "rtp_flood" and "RTP packets a second" in str(error.text)
    [facts] = [e.data["webrtc"] for e in events if e.type == "raw" and "webrtc" in e.data]
    assert facts["connection"]["rtp_packets_refused"] > 0


def test_an_answer_whose_fingerprint_is_not_its_certificates_is_a_dtls_failure():
    error = asyncio.run(connect_error({"hostile": "bad_fingerprint"}))
    assert error.code == "dtls_failed" and "fingerprint" in str(error)


def test_a_product_whose_transport_vanishes_mid_call_is_an_ice_failure_with_its_facts():
    events, bot = asyncio.run(call({"hostile": "transport_lost"}, seconds=10.0,
                                   receive_timeout_seconds=4.0))
    error = ending(events)
    assert error.data["code"] == "ice_failed" and "transport is gone" in str(error.text)
    [facts] = [e.data["webrtc"] for e in events if e.type == "raw" and "webrtc" in e.data]
    assert facts["received"]["packets"] > 0  # what came before it is kept
    assert any(e.type == "transcript_final" for e in events)


HOSTILE_MEMORY = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
import test_webrtc_hostile as hostile
outcomes = {}
for mode in ("huge_answer", "big_data_message", "data_flood", "rtp_flood"):
    if mode == "huge_answer":
        outcomes[mode] = asyncio.run(hostile.connect_error({"hostile": mode})).code
    else:  # limits a loaded machine's in-process flood surely passes (normal: 50 RTP a second)
        limits = {"max_data_messages_per_second": 20, "max_rtp_packets_per_second": 100}
        events, _ = asyncio.run(hostile.call({"hostile": mode}, limits=limits))
        outcomes[mode] = hostile.ending(events).data["code"]
# this process's own peak (VmHWM: its memory since exec); ru_maxrss also counts the peak of the
# process that forked it
[peak] = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({"outcomes": outcomes, "peak_rss_mb": int(peak) / 1024}))
"""


def test_hostile_products_leave_the_evaluators_memory_bounded():
    """One process meets an answer SDP of megabytes, a data-channel message of megabytes, a
    data-channel flood and an RTP flood, one after another (the bot double in the same process,
    so its memory counts too): each is named, and the peak RSS stays under 300 MB."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    child = subprocess.run([sys.executable, "-c", HOSTILE_MEMORY, str(Path(__file__).parent)],
                           capture_output=True, text=True, timeout=180)
    assert child.returncode == 0, child.stderr[-2000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report["outcomes"] == {"huge_answer": "resource_limit",
                                  "big_data_message": "resource_limit",
                                  "data_flood": "resource_limit", "rtp_flood": "rtp_flood"}
    assert report["peak_rss_mb"] < 300, report
