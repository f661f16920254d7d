"""Voice activity detection: the bounds of synthesized speech in its own audio (tone speech,
piper's voice against hand-checked bounds, silence, DC and clicks), the webrtc backend, and the
settings' validation. The causal stream and speech over room noise: test_audio_vad_stream.py."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from _vad_signals import (
    FRAME,
    MS,
    PIPER_REFERENCES,
    RATE,
    STREAM,
    TEXTS,
    push_in_chunks,
    true_bounds,
    white_noise,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from voicelab.audio import (
    PcmAudio,
    SpeechBounds,
    StreamingVad,
    detect_speech,
    speech_bounds,
    tone_speech,
)
from voicelab.errors import MissingDependencyError

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
