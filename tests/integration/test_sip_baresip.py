"""SipCall against software nobody here wrote: Debian's baresip, auto-answering on 127.0.0.1.

One baresip serves the module (see ``_baresip.py``). Each call proves a direction: its prompt
(a 440 Hz tone) reaches ``on_packet``, a 1 kHz tone we send is in its recording, our keys are
its ``CALL_DTMF_START`` events (RFC 4733 over UDP, SIP INFO over TCP), and a BYE from either
side ends the call; its hold and resume (re-INVITEs) are answered with the direction reflected.
"""

from __future__ import annotations

import asyncio
import shutil
import time

import numpy as np
import pytest

from voicelab.audio import alaw_decode, alaw_encode, mulaw_decode, mulaw_encode
from voicelab.endpoints.sip._call import SipCall
from voicelab.endpoints.sip._types import CallOptions

pytestmark = pytest.mark.skipif(shutil.which("baresip") is None,
                                reason="baresip is not installed (apt-get install baresip-core)")

TONE_HZ = 1000.0
clock_ns = time.perf_counter_ns


@pytest.fixture(scope="module")
def baresip(tmp_path_factory):
    from _baresip import Baresip

    far_end = Baresip(tmp_path_factory.mktemp("baresip"))
    yield far_end
    far_end.stop()


def tone_frames(codec: str, seconds: float) -> list[bytes]:
    t = np.arange(int(seconds * 8000)) / 8000
    samples = (10000 * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.int16)
    encoded = mulaw_encode(samples) if codec == "pcmu" else alaw_encode(samples)
    return [encoded[i:i + 160] for i in range(0, len(encoded) - 159, 160)]


def dominant_hz(samples: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64) * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / 8000)[np.argmax(spectrum)])


def decode(codec: str, payloads: list[bytes]) -> np.ndarray:
    joined = b"".join(payloads)
    audio = mulaw_decode(joined) if codec == "pcmu" else alaw_decode(joined)
    return np.asarray(audio.samples)


async def _call(baresip, *, transport, dtmf, codecs, keys, far_end_hangs_up):
    packets, events = [], []
    call = SipCall(CallOptions(uri=baresip.uri, transport=transport, dtmf=dtmf, codecs=codecs),
                   clock_ns=clock_ns, on_packet=packets.append, on_event=events.append)
    negotiated = await call.start()
    call.line.queue_frames(tone_frames(negotiated.codec, 1.0))
    call.line.queue_digits(keys, duration_ms=100, gap_ms=80)
    while call.line.pending:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    call_id = call.call_id
    if far_end_hangs_up:
        for command, count in (("hold", 1), ("resume", 2)):  # re-INVITEs from its menu
            await asyncio.to_thread(baresip.command, command)
            for _ in range(100):
                if [e.kind for e in events].count("reinvite") >= count:
                    break
                await asyncio.sleep(0.02)
        await asyncio.to_thread(baresip.command, "hangup")
        for _ in range(100):
            if any(e.kind == "bye" for e in events):
                break
            await asyncio.sleep(0.02)
    await call.hang_up()
    facts = call.facts()
    await call.close()
    return negotiated, packets, events, facts, call_id


@pytest.mark.parametrize(("transport", "dtmf", "codecs", "keys", "far_end_hangs_up"), [
    ("udp", "rfc4733", ("pcmu", "pcma"), "15#", False),
    ("tcp", "info", ("pcma",), "2*9", True),
])
def test_a_call_with_baresip_carries_audio_and_keys_both_ways(
        baresip, transport, dtmf, codecs, keys, far_end_hangs_up):
    started = time.time() - 1
    negotiated, packets, events, facts, call_id = asyncio.run(asyncio.wait_for(_call(
        baresip, transport=transport, dtmf=dtmf, codecs=codecs, keys=keys,
        far_end_hangs_up=far_end_hangs_up), 30))
    assert negotiated.codec == codecs[0] and negotiated.remote_rtp[0] == "127.0.0.1"
    # its prompt reached us, in order, stamped on arrival
    assert len(packets) > 50
    stamps = [p.received_ns for p in packets]
    assert stamps == sorted(stamps)
    heard = decode(negotiated.codec, [p.payload for p in packets])
    assert abs(dominant_hz(heard[:8000]) - 440.0) < 10
    prompt_rms = float(np.sqrt(np.mean(heard[:8000].astype(np.float64) ** 2)))
    assert prompt_rms > 2000  # the tone's 8000 amplitude, not silence
    received = facts["rtp"]["received"]
    assert received["packets"] == len(packets) and received["foreign_packets"] == 0
    # our keys are its events, in order
    starts = baresip.wait_for(call_id, "CALL_DTMF_START", count=len(keys))
    assert [e["param"] for e in starts] == list(keys)
    assert [d["digit"] for d in facts["dtmf"]["sent"]] == list(keys)
    assert {d["method"] for d in facts["dtmf"]["sent"]} == {dtmf}
    # the BYE, from whichever side sent it, closed the call at both ends
    assert baresip.wait_for(call_id, "CALL_CLOSED")
    assert [e.kind for e in events].count("bye") == (1 if far_end_hangs_up else 0)
    reinvites = [(e.data["direction"], e.data["answered_direction"]) for e in events
                 if e.kind == "reinvite"]
    assert reinvites == ([("sendonly", "recvonly"), ("sendrecv", "sendrecv")]
                         if far_end_hangs_up else [])
    # our tone is in what it decoded
    recorded = baresip.decoded_recording(started)
    assert len(recorded) >= 8000
    assert abs(dominant_hz(recorded[:8000]) - TONE_HZ) < 10
    assert facts["sip"]["setup_ms"] is not None


def test_a_whole_run_calls_baresip(baresip, tmp_path):
    """``voice-evaluator run`` with ``adapter: sip`` against baresip: its prompt is the
    product's opening, the caller's speech reaches its recording, the key reaches it, and the
    call is kept in the bundle. baresip only plays its file: it never answers the caller, which
    the run reports as it is (``no_response``, exit 4, every artifact written)."""
    from test_sip_runs import Call, write_call

    started = time.time()
    run_file = write_call(tmp_path, double=None, settings={"uri": baresip.uri},
                          script=[{"response": "Hello, is anyone there?", "dtmf": "7"}],
                          eval_spec={"expected_exit": None, "response_timeout_seconds": 3,
                                     "limits": {"max_turns": 2, "max_time_seconds": 20}})
    call = Call(run_file, tmp_path / "runs")
    assert call.exit_code == 4, call.output
    assert call.report["exit_reason"] == "no_response"
    opening = call.turn("turn-000")
    assert opening["first_audio_latency_ms"] is not None
    assert opening["response_latency_ms"] is None or opening["speech_start_ms"] is not None
    [facts] = [e["raw"] for e in call.raw_events if e["raw"].get("sip_event") == "call_facts"]
    assert facts["rtp"]["received"]["packets"] > 50
    call_id = facts["sip"]["call_id"]
    keys = baresip.wait_for(call_id, "CALL_DTMF_START")
    assert [str(e.get("param")) for e in keys] == ["7"]
    heard = baresip.decoded_recording(after=started)
    assert heard.size and np.abs(heard.astype(np.int32)).max() > 2000  # the caller's speech
