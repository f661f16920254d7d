"""Placement and per-turn metrics on hand-built timelines, where every number is known."""

from __future__ import annotations

import numpy as np
import pytest
from _timelines import MS, RATE, Timeline, silence, tone
from hypothesis import given, settings
from hypothesis import strategies as st

from voicelab.metrics import compute_voice_metrics, place_channels, silent_runs_ns, summarize
from voicelab.recording import EventType, ns_to_samples


def metrics_of(t: Timeline) -> dict:
    placement = place_channels(t.recording)
    return compute_voice_metrics(t.recording, placement).model_dump(mode="json")


def test_latency_stall_and_dead_air_of_a_paced_response():
    t = Timeline()
    t.add(0, "session.connected", expects_response=None)
    t.add(10, "user.audio_chunk", "turn-001", samples=tone(500))
    t.add(500, "user.turn_committed", "turn-001", expects_response="turn-001")
    # first audio 120 ms after the commit: 200 ms of speech, then the next chunk arrives 450 ms
    # later (a 250 ms stall once the first chunk has played), then 200 ms more
    t.add(620, "product.audio_chunk", "turn-001", "product", samples=tone(200))
    t.add(1070, "product.audio_chunk", "turn-001", "product", samples=tone(200))
    t.add(1300, "product.response_done", "turn-001", "product", status="completed")
    turn = metrics_of(t)["turns"][0]
    assert turn["first_audio_latency_ms"] == pytest.approx(120.0)
    assert turn["response_duration_ms"] == pytest.approx(800.0)
    assert turn["playback_stall_ms"] == pytest.approx(250.0)
    assert turn["output_audio_seconds"] == pytest.approx(0.4)
    # 250 ms of stall alone stays under the 300 ms dead-air floor
    assert turn["dead_air_ms"] == 0.0


def test_silent_audio_and_stall_add_up_to_dead_air():
    t = Timeline()
    t.add(0, "session.connected", expects_response="turn-000")
    t.add(100, "product.audio_chunk", "turn-000", "product",
          samples=np.concatenate([tone(200), silence(200)]))
    t.add(700, "product.audio_chunk", "turn-000", "product", samples=tone(300))  # 200 ms stall
    t.add(900, "product.response_done", "turn-000", "product", status="completed")
    turn = metrics_of(t)["turns"][0]
    assert turn["reference"] == "init"
    assert turn["first_audio_latency_ms"] == pytest.approx(100.0)
    assert turn["playback_stall_ms"] == pytest.approx(200.0)
    # 200 ms of silent audio + 200 ms of stall = one 400 ms silent stretch (10 ms frames)
    assert turn["dead_air_ms"] == pytest.approx(400.0, abs=10.0)


def test_virtual_advance_places_burst_audio_on_a_real_time_timeline():
    t = Timeline()
    t.add(0, "session.connected")
    t.add(1, "user.audio_chunk", "turn-001", samples=tone(1000))
    t.add(2, "timeline.virtual_advance", source="runner", advance_ns=999 * MS)
    t.add(3, "user.turn_committed", "turn-001", expects_response="turn-001")
    t.add(8, "product.audio_chunk", "turn-001", "product", samples=tone(500))
    placement = place_channels(t.recording)
    playback = placement.responses["turn-001"]
    assert playback.start_ns == pytest.approx(1007 * MS)
    # the user's second of speech and the reply do not overlap on the listener timeline
    user_end = placement.user_turn_start_ns["turn-001"] + 1000 * MS
    assert playback.start_ns >= user_end
    assert placement.mixed.duration_seconds == pytest.approx(1.507, abs=0.002)


def test_barge_in_flushes_buffered_audio_and_keeps_audio_after_the_cancel():
    t = Timeline()
    t.add(0, "session.connected", expects_response="turn-000")
    t.add(100, "product.audio_chunk", "turn-000", "product", samples=tone(2000))
    t.add(1100, "user.barge_in", "turn-001", response_turn_id="turn-000", cancel_sent=True)
    t.add(1100, "user.turn_started", "turn-001", speech_start_sample=0, speech_end_sample=7200)
    t.add(1101, "user.audio_chunk", "turn-001", samples=tone(300, amplitude=3000))
    t.add(1250, "product.audio_chunk", "turn-000", "product", samples=tone(100))
    t.add(1300, "product.response_done", "turn-000", "product", status="cancelled")
    metrics = metrics_of(t)
    turn = metrics["turns"][0]
    assert turn["interrupted"] is True
    # from the onset of the barge-in speech (1101 ms) to the end of the product's audible
    # audio: the chunk that came after the cancel plays 1250-1350 ms; its last sample above the
    # silence threshold ends it, to the sample (a tone's last zero crossing within a period)
    assert turn["interruption_stop_latency_ms"] == pytest.approx(249.0, abs=1.0)
    assert turn["audio_after_interrupt_ms"] == pytest.approx(100.0, abs=1.0)
    placement = place_channels(t.recording)
    product = placement.product.samples
    start = int(1.1 * RATE)
    # buffered audio past the barge-in point is gone, the late chunk plays over the user
    assert np.abs(product[start + 10: int(1.25 * RATE) - 10]).max() == 0
    assert np.abs(product[int(1.25 * RATE) + 10: int(1.35 * RATE) - 10]).max() > 1000
    overlap = placement.mixed.samples[int(1.26 * RATE): int(1.34 * RATE)].astype(np.int32)
    assert np.abs(overlap).max() > 8000  # both voices at once


def test_silent_runs_threshold_and_frames():
    samples = np.concatenate([tone(100), silence(290), tone(100), silence(310), tone(100)])
    total = silent_runs_ns(samples, start_ns=0, end_ns=int(0.9 * 1e9))
    assert total == pytest.approx(310 * MS, abs=10 * MS)


def test_summary_percentiles_ignore_missing_values():
    stats = summarize([10.0, None, 20.0, 30.0, 40.0])
    assert stats.count == 4
    assert stats.mean == 25.0
    assert stats.p50 == 25.0
    assert stats.max == 40.0
    assert summarize([None]).count == 0 and summarize([]).p95 is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user.audio_chunk", "product.audio_chunk",
                                           "user.barge_in", "timeline.virtual_advance"]),
                          st.integers(0, 400), st.integers(0, 3000),
                          st.sampled_from([300, 20000, 32767])), min_size=1, max_size=40))
def test_channels_are_the_clipped_sum_of_every_heard_piece(steps):
    t = Timeline()
    at = 0.0
    for kind, gap_ms, samples, amplitude in steps:
        at += gap_ms / 4
        if kind.endswith("audio_chunk"):
            noise = np.random.default_rng(len(t.recording.events)).uniform(-1, 1, samples)
            source = "product" if kind.startswith("product") else "evaluator"
            t.add(at, kind, "turn-001", source, samples=(noise * amplitude).astype(np.int16))
        elif kind == "user.barge_in":
            t.add(at, kind, "turn-002", response_turn_id="turn-001", cancel_sent=True)
        else:
            t.add(at, kind, source="runner", advance_ns=gap_ms * MS)
    placement = place_channels(t.recording)
    total = placement.mixed.num_samples
    recording = t.recording
    product = np.zeros(total, dtype=np.int64)
    for playback in placement.responses.values():
        for chunk in playback.chunks:
            audio = np.frombuffer(recording.audio_of(chunk.event), dtype="<i2")
            product[chunk.start:chunk.end] += audio[:chunk.heard]
    assert np.array_equal(placement.product.samples, np.clip(product, -32768, 32767))
    user = np.zeros(total, dtype=np.int64)
    starts = {}
    for event in recording.events:  # each user turn plays contiguously from its first chunk
        if event.type is EventType.USER_AUDIO:
            samples = np.frombuffer(recording.audio_of(event), dtype="<i2")
            begin = starts.get(event.turn_id)
            if begin is None:
                begin = ns_to_samples(event.listener_ns)
            user[begin:begin + samples.size] += samples
            starts[event.turn_id] = begin + samples.size
    assert np.array_equal(placement.user.samples, np.clip(user, -32768, 32767))
    both = placement.user.samples.astype(np.int64) + placement.product.samples
    assert np.array_equal(placement.mixed.samples, np.clip(both, -32768, 32767))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40),
       st.sampled_from([0, 1, 25, 50, 90, 95, 99, 99.9, 100]))
def test_percentile_is_exactly_numpys_linear_percentile(values, q):
    from voicelab.metrics._voice import percentile

    assert percentile(sorted(values), q) == float(np.percentile(np.asarray(values), q))


def test_a_jitter_buffer_absorbs_uneven_arrival_and_counts_underruns():
    from voicelab.metrics._turn_metrics import jitter_buffer_stall_ns

    def chunks(arrivals_ms: list[float], frame_ms: float) -> list:
        t = Timeline()
        for at in arrivals_ms:
            t.add(at, "product.audio_chunk", "turn-000", "product", samples=tone(frame_ms))
        return t.recording.events
    # 95 ms telephony frames arriving 80 and 120 ms apart: a 60 ms buffer absorbs it all
    uneven = chunks([0, 80, 200, 280, 400, 480, 600], 95)
    assert jitter_buffer_stall_ns(uneven, depth_ns=60 * MS) == 0
    # with no buffer, every late frame is heard as a gap
    assert jitter_buffer_stall_ns(uneven, depth_ns=0) > 0
    # a frame 400 ms late: the 60 ms buffer hides 60 ms of it
    late = chunks([0, 20, 40, 460], 20)
    assert jitter_buffer_stall_ns(late, depth_ns=60 * MS) == pytest.approx(
        (460 - (60 + 60)) * MS, abs=MS)


# --- what the caller hears: dead air inside a reply, its tail, the stop after a barge-in ------

def test_a_replys_trailing_silence_is_its_tail_not_dead_air():
    t = Timeline()
    t.add(0, "session.connected", expects_response="turn-000")
    # a TTS reply: 50 ms of lead-in, 800 ms of speech, then 400 ms of silence in the same stream
    t.add(100, "product.audio_chunk", "turn-000", "product",
          samples=np.concatenate([silence(50), tone(800), silence(400)]))
    t.add(1400, "product.response_done", "turn-000", "product", status="completed")
    turn = metrics_of(t)["turns"][0]
    assert turn["dead_air_ms"] == 0.0
    assert turn["trailing_silence_ms"] == pytest.approx(400.0, abs=1.0)


def test_a_gap_between_the_words_of_a_reply_is_dead_air():
    t = Timeline()
    t.add(0, "session.connected", expects_response="turn-000")
    t.add(100, "product.audio_chunk", "turn-000", "product",
          samples=np.concatenate([tone(300), silence(500), tone(300), silence(350)]))
    t.add(1500, "product.response_done", "turn-000", "product", status="completed")
    turn = metrics_of(t)["turns"][0]
    assert turn["dead_air_ms"] == pytest.approx(500.0, abs=10.0)  # 10 ms frames
    assert turn["trailing_silence_ms"] == pytest.approx(350.0, abs=1.0)


def fading(ms: float, *, peak: int = 14000, floor: int = 300) -> np.ndarray:
    """A tone fading exponentially from ``peak`` to ``floor`` (still audible: above 256)."""
    count = int(RATE * ms / 1000)
    envelope = peak * (floor / peak) ** (np.arange(count) / count)
    return (envelope * np.sin(np.arange(count) * 2 * np.pi * 220 / RATE)).astype(np.int16)


def test_the_stop_latency_is_the_end_of_what_the_caller_can_hear():
    t = Timeline()
    t.add(0, "session.connected", expects_response="turn-000")
    # the product speaks, and after the barge-in at 1100 ms goes on for 250 ms at full level and
    # fades out over another 130 ms: audible until 1480 ms (380 ms after the barge-in)
    t.add(100, "product.audio_chunk", "turn-000", "product", samples=tone(1250))
    t.add(1350, "product.audio_chunk", "turn-000", "product",
          samples=np.concatenate([fading(130), silence(300)]))
    t.add(1100, "user.barge_in", "turn-001", response_turn_id="turn-000", cancel_sent=False,
          flush=False)
    t.add(1100, "user.turn_started", "turn-001", speech_start_sample=0, speech_end_sample=7200)
    t.add(1100, "user.audio_chunk", "turn-001", samples=tone(300, amplitude=3000))
    t.add(1800, "product.response_done", "turn-000", "product", status="completed")
    turn = metrics_of(t)["turns"][0]
    assert turn["interrupted"] is True
    # to the last sample above the silence threshold: within one 220 Hz period of 380 ms
    assert turn["interruption_stop_latency_ms"] == pytest.approx(380.0, abs=4.6)
    assert turn["audio_after_interrupt_ms"] == pytest.approx(380.0, abs=4.6)
