"""The speech onset when the product stalls right after its first sound
(``voicelab/metrics/_stall_onset.py``): hand-built timelines where every number is known."""

from __future__ import annotations

import numpy as np
import pytest
from _timelines import Timeline, silence, tone

from voicelab.metrics import compute_voice_metrics, place_channels


def reply_turn(first_packet: np.ndarray, *, next_packet_ms: float,
               rest: np.ndarray | None = None) -> dict:
    """A user turn committed at 500 ms (its speech ends at 300 ms), and a reply whose first
    packet arrives at 620 ms and the rest at ``next_packet_ms``: its row of voice-metrics."""
    t = Timeline()
    t.add(0, "session.connected", expects_response=None)
    t.add(10, "user.turn_started", "turn-001", speech_start_sample=0, speech_end_sample=7200)
    t.add(10, "user.audio_chunk", "turn-001", samples=tone(300))
    t.add(500, "user.turn_committed", "turn-001", expects_response="turn-001")
    t.add(620, "product.audio_chunk", "turn-001", "product", samples=first_packet)
    t.add(next_packet_ms, "product.audio_chunk", "turn-001", "product",
          samples=tone(400) if rest is None else rest)
    t.add(1300, "product.response_done", "turn-001", "product", status="completed")
    recording = t.recording
    return compute_voice_metrics(recording, place_channels(recording)).model_dump(
        mode="json")["turns"][0]


#: the first packet: 9 ms of quiet, then the first 11 ms of the syllable (too short for voice
#: activity to start a segment on its own)
FIRST_PACKET = np.concatenate([silence(9), tone(11)])


def test_a_stall_after_the_first_sound_stays_out_of_the_onset():
    # the first packet's sound from 629 ms; it has played by 640 ms, the next packet comes at
    # 700 ms (a 60 ms stall), the speech goes on from there
    turn = reply_turn(FIRST_PACKET, next_packet_ms=700)
    assert turn["speech_start_ms"] == pytest.approx(629.0, abs=0.05)
    # the user's speech ended at 310 ms (the turn's audio from 10 ms, 7200 samples)
    assert turn["response_latency_ms"] == pytest.approx(319.0, abs=0.05)
    assert turn["playback_stall_ms"] == pytest.approx(60.0)


def test_a_reply_without_a_stall_keeps_the_onset_voice_activity_finds():
    # the same audio, arriving on time: the first packet's sound starts the speech as before
    turn = reply_turn(FIRST_PACKET, next_packet_ms=640)
    assert turn["playback_stall_ms"] == 0.0
    assert turn["speech_start_ms"] == pytest.approx(629.0, abs=0.05)


def test_a_blip_that_ended_before_the_stall_is_not_the_onset():
    # the first packet's sound ends 12 ms before the stall (a click, then quiet): the stall fell
    # in a pause, not into a sound, and the speech starts after it
    blip = np.concatenate([silence(4), tone(4), silence(12)])
    turn = reply_turn(blip, next_packet_ms=700)
    assert turn["speech_start_ms"] == pytest.approx(700.0, abs=0.05)


def test_speech_that_resumes_after_a_pause_past_the_stall_is_not_moved():
    # packets resume after the stall, but with 15 ms of quiet before the speech: the stall did
    # not cut one sound in two
    rest = np.concatenate([silence(15), tone(400)])
    turn = reply_turn(FIRST_PACKET, next_packet_ms=700, rest=rest)
    assert turn["speech_start_ms"] == pytest.approx(715.0, abs=0.05)


def test_two_stalls_after_two_short_packets():
    # packet, stall, packet, stall, the rest: the onset is the first packet's sound
    t = Timeline()
    t.add(0, "session.connected", expects_response=None)
    t.add(10, "user.turn_started", "turn-001", speech_start_sample=0, speech_end_sample=7200)
    t.add(10, "user.audio_chunk", "turn-001", samples=tone(300))
    t.add(500, "user.turn_committed", "turn-001", expects_response="turn-001")
    t.add(620, "product.audio_chunk", "turn-001", "product", samples=FIRST_PACKET)
    t.add(670, "product.audio_chunk", "turn-001", "product", samples=tone(20))
    t.add(730, "product.audio_chunk", "turn-001", "product", samples=tone(400))
    t.add(1300, "product.response_done", "turn-001", "product", status="completed")
    recording = t.recording
    turn = compute_voice_metrics(recording, place_channels(recording)).model_dump(
        mode="json")["turns"][0]
    assert turn["speech_start_ms"] == pytest.approx(629.0, abs=0.05)
    assert turn["playback_stall_ms"] == pytest.approx(30.0 + 40.0)
