"""Voice activity detection as a causal stream: exact positions for any chunking, back-dated
onsets and hangover-confirmed offsets; and the product's stream: speech after silence frames,
quiet speech, and speech over room noise. Bounds in a turn's own audio: test_audio_vad.py."""

from __future__ import annotations

import numpy as np
import pytest
from _vad_signals import (
    FRAME,
    MS,
    PIPER_REFERENCES,
    RATE,
    STREAM,
    TEXTS,
    at_active_level,
    detect_speech_transitions,
    push_in_chunks,
    true_bounds,
    white_noise,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voicelab.audio import (
    FRAME_MS,
    PcmAudio,
    StreamingVad,
    VadTransition,
    detect_speech,
    mix,
    prepare_environment,
    speech_bounds,
    tone_speech,
)

# -- a causal stream: exact positions, back-dated onsets, hangover-confirmed offsets --------------



@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(0, 2_400), min_size=1, max_size=40).filter(any),
       hangover_ms=st.sampled_from([50.0, 300.0, 700.0]),
       min_speech_ms=st.sampled_from([10.0, 30.0, 55.0]))
def test_streaming_equals_one_push_for_any_chunking(sizes, hangover_ms, min_speech_ms) -> None:
    options = {"hangover_ms": hangover_ms, "min_speech_ms": min_speech_ms}
    batch = StreamingVad(**options)
    expected = batch.push(STREAM) + batch.finish()
    assert push_in_chunks(StreamingVad(**options), STREAM, sizes) == expected
    assert [t.kind for t in expected][:2] == ["onset", "offset"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(0, 30_000), min_size=1, max_size=30).filter(any),
       seed=st.integers(0, 2**32 - 1))
def test_every_frame_decision_is_the_same_for_any_chunking(sizes, seed) -> None:
    """With no threshold, no minimum and a one-frame hangover, every change of a frame's decision
    is a transition, so comparing transitions compares every frame's decision (and through it
    the floor: noise whose level wanders puts frames right at it)."""
    rng = np.random.default_rng(seed)
    levels = np.repeat(rng.uniform(-70.0, -20.0, 40), rng.integers(1, 200, 40) * 17)
    samples = np.round(rng.normal(0.0, 1.0, levels.shape[0]) * 32768.0 * 10 ** (levels / 20))
    samples = np.clip(samples, -32768, 32767).astype(np.int16)
    options = {"threshold_db": 0.0, "min_speech_ms": 0.0, "hangover_ms": 0.0,
               "min_level_dbfs": -200.0, "noise_window_ms": float(rng.integers(1, 40) * 10)}
    expected = detect_speech_transitions(samples, **options)
    assert len(expected) > 10
    assert push_in_chunks(StreamingVad(**options), samples, sizes) == expected


def test_a_long_stream_in_live_chunks_and_in_long_chunks_equals_one_push(office) -> None:
    """Two minutes (past the detector's 41 s buffer, which then moves its history) of replies
    over office noise, pushed in 20 ms chunks and in chunks of 1.3-3 s (longer than the noise
    window, another code path)."""
    replies = [tone_speech(text, seed=index).samples for index, text in enumerate(TEXTS * 4)]
    gap = np.zeros(7 * RATE, dtype=np.int16)
    clean = PcmAudio(np.concatenate([part for reply in replies for part in (reply, gap)]))
    line = mix(clean, environment=prepare_environment(office), seed=5, turn_number=1).audio
    assert line.duration_seconds > 100
    expected = detect_speech_transitions(line.samples)
    assert len(expected) >= 2 * len(replies)  # every reply, and some of the office's events
    assert push_in_chunks(StreamingVad(), line.samples, [480]) == expected
    assert push_in_chunks(StreamingVad(), line.samples, [31_000, 72_000, 53_123]) == expected


@pytest.mark.parametrize("seed", [4, 5])
def test_onsets_are_back_dated_to_the_first_voiced_frame_and_confirmed_after_the_minimum(
        seed: int) -> None:
    speech = tone_speech(TEXTS[2], seed=seed)
    start, _ = true_bounds(speech)
    lead = 500 * MS - start  # the first non-zero sample of speech is at 500 ms, a frame start
    stream = np.concatenate([np.zeros(lead, dtype=np.int16), speech.samples])
    (onset,) = [t for t in detect_speech_transitions(stream, min_speech_ms=50.0)
                if t.kind == "onset"][:1]
    assert onset.sample == 500 * MS
    # confirmed once the run's energy adds up to 50 ms of sound: later than 50 ms, because the
    # tone's syllable envelope (0.42 to 1 in energy) counts its weaker frames partly
    confirm_at = onset.confirmed_sample
    assert confirm_at % FRAME == 0 and 50 * MS <= confirm_at - onset.sample <= 90 * MS
    vad = StreamingVad(min_speech_ms=50.0)
    assert vad.push(stream[:confirm_at - 1]) == []  # one sample short of the confirmation
    assert vad.push(stream[confirm_at - 1:confirm_at]) == [onset]
    assert vad.in_speech


def test_offsets_are_confirmed_only_after_the_hangover_counted_in_samples() -> None:
    speech = tone_speech(TEXTS[0], seed=5)
    _, end = true_bounds(speech)
    vad = StreamingVad(hangover_ms=700.0)
    transitions = vad.push(speech.samples)
    offset_at = speech_bounds(speech).end_sample
    assert offset_at % FRAME == 0 and abs(offset_at - end) <= FRAME
    silence = np.zeros(RATE, dtype=np.int16)
    heard = speech.num_samples
    needed = offset_at + vad.hangover_samples - heard  # samples of silence still to come
    assert vad.hangover_samples == 700 * MS
    transitions += vad.push(silence[:needed - 1])
    assert [t.kind for t in transitions] == ["onset"] and vad.in_speech
    confirmed = vad.push(silence[:1])
    assert confirmed == [VadTransition("offset", offset_at, offset_at + 700 * MS)]
    assert confirmed[0].confirmed_ms - confirmed[0].position_ms == 700.0
    assert vad.push(silence) == [] and vad.finish() == []


def test_a_pause_shorter_than_the_hangover_stays_inside_the_segment() -> None:
    word = tone_speech("word", seed=1)
    start, end = true_bounds(word)
    word = word.samples[start - 3:end + 2]  # 300 ms of sound, whole frames
    lead = np.zeros(100 * MS, dtype=np.int16)
    for pause_ms, segments in ((290, 1), (300, 2)):
        stream = np.concatenate([lead, word, np.zeros(pause_ms * MS, dtype=np.int16), word])
        found = detect_speech(PcmAudio(stream), hangover_ms=300.0)
        assert len(found) == segments, pause_ms


def test_an_open_segment_is_closed_at_its_last_voiced_frame_by_finish() -> None:
    speech = tone_speech(TEXTS[1], seed=6)
    vad = StreamingVad()
    assert [t.kind for t in vad.push(speech)] == ["onset"]
    final = vad.finish()
    assert final == [VadTransition("offset", speech_bounds(speech).end_sample,
                                   speech.num_samples)]
    with pytest.raises(ValueError, match="finished"):
        vad.push(speech)


def test_an_initial_floor_finds_speech_that_starts_with_the_stream() -> None:
    speech = tone_speech(TEXTS[1], seed=9)
    start, end = true_bounds(speech)
    from_first_sample = PcmAudio(speech.samples[start:])
    learned = detect_speech(from_first_sample)
    assert learned[0].start_sample > 0  # the first word judged against itself: found late
    stated = detect_speech(from_first_sample, initial_floor_dbfs=-90.0)
    assert stated[0].start_sample == 0 and stated[-1].end_sample == pytest.approx(
        end - start, abs=FRAME)
    # the price: a background that is there from the start is speech for one noise window
    noise = PcmAudio(white_noise(3 * RATE, level_dbfs=-35.0, seed=3))
    assert detect_speech(noise) == []
    (segment,) = detect_speech(noise, initial_floor_dbfs=-90.0)
    assert segment.start_sample == 0 and segment.end_ms == pytest.approx(1000.0, abs=50.0)


# -- the product's stream -----------------------------------------------------------------------

def product_stream(speech: np.ndarray, *, silence_ms: int, packet_ms: int = 20) -> list[np.ndarray]:
    """``silence_ms`` of digital-silence packets, then ``speech``, in ``packet_ms`` packets."""
    samples = np.concatenate([np.zeros(silence_ms * MS, dtype=np.int16), speech])
    size = packet_ms * MS
    return [samples[i:i + size] for i in range(0, samples.shape[0], size)]


def first_onset(packets: list[np.ndarray], **options) -> VadTransition:
    vad = StreamingVad(**options)
    onsets = [t for packet in packets for t in vad.push(packet) if t.kind == "onset"]
    return onsets[0]


def test_speech_after_800_ms_of_silence_frames_is_found_at_800_ms() -> None:
    speech = tone_speech(TEXTS[2], seed=8)
    start, _ = true_bounds(speech)
    onset = first_onset(product_stream(speech.samples[start:], silence_ms=800))
    assert onset.position_ms == pytest.approx(800.0, abs=FRAME_MS)  # one frame
    assert 30.0 <= onset.confirmed_ms - onset.position_ms <= 50.0


def test_real_speech_after_silence_frames_and_at_minus_30_dbfs(piper_speech) -> None:
    for text, (_, start, end) in PIPER_REFERENCES.items():
        samples = piper_speech[text].samples[start:]
        onset = first_onset(product_stream(samples, silence_ms=800))
        assert onset.position_ms == pytest.approx(800.0, abs=FRAME_MS), text
        # -30 dBFS active level (RMS between the reference bounds; piper's default voice is
        # about -25 dBFS): still found, later, because the first phoneme's quiet start falls
        # under the -50 dBFS gate. Measured: 0-20 ms late.
        quiet = at_active_level(samples, -30.0, (0, end - start))
        onset = first_onset(product_stream(quiet, silence_ms=800))
        assert 800.0 <= onset.position_ms <= 830.0, text


@pytest.mark.parametrize("seed", [0, 1])
def test_tone_speech_at_minus_30_dbfs_keeps_its_bounds(seed: int) -> None:
    audio = tone_speech(TEXTS[1], seed=seed)
    bounds = true_bounds(audio)
    quiet = PcmAudio(at_active_level(audio.samples, -30.0, bounds))
    found = speech_bounds(quiet)
    np.testing.assert_allclose([found.start_sample, found.end_sample], bounds, rtol=0, atol=FRAME)


# -- speech over room noise ---------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_office_hum_and_babble_alone_are_not_speech(office, seed: int) -> None:
    # the stationary layers at the example's volumes; transients are another matter (below)
    background = prepare_environment(office.model_copy(update={"transient_events": []}))
    line = mix(PcmAudio.silence(20.0), environment=background, seed=seed, turn_number=1).audio
    assert detect_speech(line) == []
    vad = StreamingVad()
    assert push_in_chunks(vad, line.samples, [480, 960, 720]) == []


def test_office_transients_are_sounds_the_energy_detector_may_report(office) -> None:
    # What the energy VAD does not do: tell a loud transient from a voice. The office's door
    # (turn 2) is ~15 dB above the hum and babble for 100 ms and is reported; the typing is not
    # (its keystrokes are shorter than 30 ms); the phone ring (1.5 s) is in some seeds.
    environment = prepare_environment(office)
    turn_2 = mix(PcmAudio.silence(6.0), environment=environment, seed=0, turn_number=2,
                 stream_offset_seconds=6.0)
    door, typing = turn_2.events
    assert (door["file"], typing["file"]) == ("door-close.wav", "keyboard-typing.wav")
    (segment,) = detect_speech(turn_2.audio)
    assert segment.start_ms == pytest.approx(1000 * door["offset_seconds"], abs=FRAME_MS)
    assert segment.duration_ms == pytest.approx(100.0, abs=20.0)


@pytest.mark.parametrize("seed", range(4))
def test_speech_in_the_office_is_found_within_20_ms_of_its_onset(office, seed: int) -> None:
    speech = tone_speech(TEXTS[2], seed=seed)
    start, end = true_bounds(speech)
    turn = PcmAudio(np.concatenate([np.zeros(RATE, dtype=np.int16), speech.samples]))
    mixed = mix(turn, environment=prepare_environment(office), seed=seed, turn_number=1)
    assert 12.0 < mixed.speech_to_noise_db < 14.0  # the example's SNR, phone ring included
    segments = detect_speech(mixed.audio)
    # Tolerance 20 ms (the target); measured: 0.1 ms at the onset, under 0.2 ms at the end.
    assert segments[0].start_sample == pytest.approx(RATE + start, abs=20 * MS)
    assert segments[-1].end_sample == pytest.approx(RATE + end, abs=20 * MS)
