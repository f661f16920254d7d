"""Opus on a SIP call (RFC 7587), the adapter against the SIP double over real sockets: both
directions' audio arrive intelligibly (their loudness envelopes against what was sent), the
product's speech onset agrees with the double's own send stamps within the G.711 tests'
tolerance (one RTP packet), and a re-INVITE changes the codec mid-call both ways. Offering
Opus without libopus is a configuration error at ``validate``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.signal import resample_poly
from test_sip_endpoint import SHORT_AGENT, Call, run
from test_sip_runs import AGENT, write_call
from test_twilio_runs import Call as RunResult

from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ, G711_SAMPLE_RATE_HZ, tone_speech
from voicelab.cli import main

pytest.importorskip("opuslib_next", reason="Opus needs voicelab[telephony]")

MS = 1_000_000
LOUD = 300  # a sample this loud is speech, not the codec's noise floor
#: the G.711 tests' tolerance for a figure against the double's truth: one 20 ms RTP packet
TOLERANCE_MS = 20.0


def envelope(samples: np.ndarray, rate_hz: int) -> np.ndarray:
    """Loudness (RMS) of each 20 ms block."""
    block = rate_hz // 50
    usable = samples[:samples.size - samples.size % block].astype(np.float64)
    return np.sqrt((usable.reshape(-1, block) ** 2).mean(axis=1))


def best_match(sent: np.ndarray, heard: np.ndarray) -> float:
    """The highest correlation of ``sent``'s envelope (its silent ends cut off: voicelab does
    not deliver a phone's silence between replies) with ``heard``'s at any lag."""
    loud = np.flatnonzero(sent > LOUD)
    sent = sent[loud[0]:loud[-1] + 1]
    scores = [np.corrcoef(sent, heard[lag:lag + sent.size])[0, 1]
              for lag in range(0, heard.size - sent.size + 1)]
    return float(max(scores))


def heard_audio(call: Call) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """voicelab's received audio joined, and where each chunk starts in it with its stamp."""
    chunks = [np.frombuffer(e.audio or b"", dtype=np.int16) for e in call.of("audio_delta")]
    starts = np.cumsum([0, *(c.size for c in chunks[:-1])])
    stamps = [(int(start), e.received_ns) for start, e in zip(starts, call.of("audio_delta"),
                                                               strict=True)]
    return np.concatenate(chunks), stamps


def onset_ns(call: Call) -> int:
    """When voicelab heard the product's first audible sample: its packet's arrival stamp
    plus the sample's place in the packet (the double stamps its truth the same way)."""
    for event in call.of("audio_delta"):
        pcm = np.frombuffer(event.audio or b"", dtype=np.int16)
        loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > LOUD)
        if loud.size:
            packet_start = pcm.size - CANONICAL_SAMPLE_RATE_HZ // 50  # after any concealment
            return event.received_ns + (int(loud[0]) - max(0, packet_start)) * 10**9 \
                // CANONICAL_SAMPLE_RATE_HZ
    raise AssertionError("nothing audible was heard")


def test_an_opus_call_is_heard_both_ways_and_on_time(capsys: pytest.CaptureFixture[str]) -> None:
    double = {**SHORT_AGENT, "record_caller_seconds": 20}
    speech = tone_speech("a table for two", seed=3, sample_rate_hz=CANONICAL_SAMPLE_RATE_HZ)

    async def test() -> Call:
        async with Call(double, {"codecs": ["opus", "pcmu"]}) as call:
            await call.connect()
            assert call.endpoint is not None and call.endpoint.negotiated is not None
            assert call.endpoint.negotiated.codec == "opus"
            assert call.endpoint.negotiated.payload_type == 111
            assert call.endpoint.wire_codec == "opus"  # an environment opus line codes once
            assert call.endpoint.conversion_delay_ms == {"to_product": 6.5, "to_user": 0.0}
            await call.until(lambda: bool(call.truth_of("reply_sent")))  # the greeting
            await call.say(speech.samples, then_silence_seconds=0.6)
            await call.until(lambda: len(call.truth_of("reply_sent")) >= 2)
            await call.say(np.zeros(0, np.int16), then_silence_seconds=0.3)
        return call

    call = run_returning(test)
    assert call.truth_of("answered")[0]["codec"] == "OPUS"
    facts = call.facts()
    assert facts["adapter"]["undecodable_packets"] == 0
    assert facts["rtp"]["received"]["lost"] == 0 and facts["rtp"]["sent"]["packets"] > 50
    # the user's speech, as the double decoded it, against what voicelab sent
    assert call.double is not None
    [caller] = call.double.caller_audio.values()
    sent = resample_poly(speech.samples.astype(np.float64), 1, 3)
    to_product = best_match(envelope(sent, G711_SAMPLE_RATE_HZ),
                            envelope(caller, G711_SAMPLE_RATE_HZ))
    # the greeting, as voicelab decoded it, against the double's own voice
    greeting = call.double.voice.speak(SHORT_AGENT["greeting"]).samples
    heard, _ = heard_audio(call)
    to_user = best_match(envelope(greeting, G711_SAMPLE_RATE_HZ),
                         envelope(heard, CANONICAL_SAMPLE_RATE_HZ))
    assert to_product > 0.9 and to_user > 0.9, (to_product, to_user)  # G.711: 0.96
    assert len(call.truth_of("caller_speech_ended")) == 1  # the double understood one utterance
    # the greeting's speech onset against the double's send stamp of that sample
    truth_ns = int(call.truth_of("reply_sent")[0]["speech_start_ns"])
    error_ms = (onset_ns(call) - truth_ns) / MS
    assert -1.0 < error_ms < TOLERANCE_MS, error_ms
    with capsys.disabled():
        print(f"\nopus call: envelope correlation to product {to_product:.3f}, to user "
              f"{to_user:.3f}; onset {error_ms:.2f} ms after the double's truth")


def run_returning(test: Any) -> Call:
    box: list[Call] = []

    async def wrapped() -> None:
        box.append(await test())

    run(wrapped)
    return box[0]


@pytest.mark.parametrize(("offered", "changed_to"), [(["opus", "pcmu"], "PCMU"),
                                                     (["pcmu", "opus"], "OPUS")])
def test_a_reinvite_changes_the_codec_mid_call(offered: list[str], changed_to: str) -> None:
    double = {**SHORT_AGENT, "greeting": "", "reinvite_after_seconds": 0.3,
              "reinvite_codec": changed_to, "record_caller_seconds": 20}
    speech = tone_speech("a table for two", seed=3, sample_rate_hz=CANONICAL_SAMPLE_RATE_HZ)

    async def test() -> Call:
        async with Call(double, {"codecs": offered}) as call:
            await call.connect()
            assert call.endpoint is not None and call.endpoint.negotiated is not None
            assert call.endpoint.negotiated.codec == offered[0]
            await call.say(np.zeros(0, np.int16), then_silence_seconds=0.1)
            await call.until(lambda: bool(call.truth_of("reinvite_answered")))
            negotiated = call.endpoint.negotiated
            assert negotiated is not None and negotiated.codec == changed_to.lower()
            await call.say(speech.samples, then_silence_seconds=0.6)
            await call.until(lambda: bool(call.truth_of("reply_sent")))
            await call.say(np.zeros(0, np.int16), then_silence_seconds=0.3)
        return call

    call = run_returning(test)
    assert [e["status"] for e in call.truth_of("reinvite_answered")] == [200]
    facts = call.facts()
    assert facts["adapter"]["undecodable_packets"] == 0
    assert facts["rtp"]["sent"]["dropped_by_codec_change"] <= 2  # the line is real time
    # the double heard the user's speech in the new codec and answered it; voicelab heard that
    assert len(call.truth_of("caller_speech_ended")) == 1
    reply = call.double.voice.speak(SHORT_AGENT["reply_text"]).samples  # type: ignore[union-attr]
    heard, _ = heard_audio(call)
    assert best_match(envelope(reply, G711_SAMPLE_RATE_HZ),
                      envelope(heard, CANONICAL_SAMPLE_RATE_HZ)) > 0.9


def test_validate_without_libopus_is_exit_2_naming_the_file_and_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    run_file = write_call(tmp_path, double=None, script=[{"response": "Hello."}],
                          settings={"codecs": ["opus", "pcmu"],
                                    "uri": "sip:agent@127.0.0.1:5070"})
    assert main(["validate", str(run_file)]) == 0
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "opuslib_next", None)  # the import fails
    assert main(["validate", str(run_file)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert str(run_file) in line and "endpoint.settings.codecs" in line
    assert "pip install 'voicelab[telephony]'" in line


def test_a_whole_opus_run_measures_the_agents_latency_against_its_truth(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As the G.711 run's test (test_sip_runs): voicelab's response latency against the
    double's send stamp of its reply's first audible sample, with the Opus line's own delays
    recorded at connect (6.5 ms of look-ahead toward the agent, none toward the user), and an
    environment's Opus line coded once, by the call."""
    line = {"codec": "opus"}  # a phone line of Opus: coded once, by the call's own Opus
    result = RunResult(write_call(tmp_path, double={**AGENT, "greeting": "Hello."},
                                  settings={"codecs": ["opus"]},
                                  environment={"name": "opus-line", "impact": 0.0,
                                               "channel": {"to_product": line, "to_user": line}},
                                  script=[{"response": "A table for two tonight, please."}]),
                       tmp_path / "runs")
    assert result.exit_code == 0, result.output
    [answered] = result.bot_lines("answered")
    assert answered["codec"] == "OPUS"
    [connected] = result.of("session.connected")
    assert connected["attributes"]["conversion_delay_ms"] == {"to_product": 6.5, "to_user": 0.0}
    for direction in ("to_product", "to_user"):
        assert result.metrics["channel"][direction]["codec"] == "opus (the adapter's wire)"
    answer = result.turn("turn-001")
    [sent] = [line for line in result.bot_lines("reply_sent") if line["reply"] == 1]
    ended = next(e for e in result.of("user.speech_ended") if e["turn_id"] == "turn-001")
    clock_start = result.events[0]["attributes"]["clock_start_ns"]
    truth_ms = (sent["speech_start_ns"] - clock_start - ended["monotonic_offset_ns"]) / MS \
        - 6.5  # the agent heard the user's end this much later (our encoder's look-ahead)
    tolerance = TOLERANCE_MS + float(answer["stamp_error_bound_ms"] or 0.0)
    assert answer["response_latency_ms"] == pytest.approx(truth_ms, abs=tolerance), \
        (answer["response_latency_ms"], truth_ms)
    with capsys.disabled():
        print(f"\nopus run: response latency {answer['response_latency_ms']:.1f} ms, the "
              f"double's truth {truth_ms:.1f} ms")


def test_keys_on_an_opus_call_count_on_its_48_khz_clock() -> None:
    """RFC 4733 keys beside Opus use telephone-event/48000: the double reads the key and its
    duration (in 48 kHz units) as pressed."""
    async def test() -> Call:
        async with Call({"mode": "ivr", "ring_ms": 20, "menu_latency_ms": 50},
                        {"codecs": ["opus"], "dtmf_duration_ms": 120}) as call:
            await call.connect()
            assert call.endpoint is not None and call.endpoint.negotiated is not None
            assert call.endpoint.negotiated.event_clock_hz == 48_000
            await call.until(lambda: bool(call.truth_of("prompt_started")))
            await call.endpoint.send_dtmf("1")
            await call.until(lambda: bool(call.truth_of("key_ended")))
        return call

    call = run_returning(test)
    [key] = call.truth_of("key_received")
    assert (key["digit"], key["method"]) == ("1", "rfc4733")
    assert call.truth_of("key_ended")[0]["duration_ms"] == pytest.approx(120.0)
