"""Signal analysis: exactly the seed's fields, checked against hand-computed values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from voicelab.audio import PcmAudio, analyze_signal

SEED_SHAPE = json.loads((Path(__file__).parents[1] / "fixtures" / "seed" / "signal-analysis.json")
                        .read_text())


def pcm(values: list[int], rate: int = 24_000) -> PcmAudio:
    return PcmAudio(np.array(values, dtype=np.int16), rate)


def test_the_fields_and_their_types_are_the_seeds() -> None:
    result = analyze_signal(pcm([0, 1000, -1000, 0] * 3_000)).to_dict()
    assert list(result) == list(SEED_SHAPE)
    for name, example in SEED_SHAPE.items():
        assert type(result[name]) is type(example) or (
            isinstance(example, float) and type(result[name]) is float), name
    json.dumps(result)  # JSON-ready as is


def test_a_tiny_signal_against_hand_computed_values() -> None:
    # at 1 kHz the 10 ms truncation window is the last 10 samples
    values = [0, 100, -300, 32767, -32768, 256, -257, 1000, 0, 0, 0, 0]
    result = analyze_signal(pcm(values, rate=1_000))
    assert result.encoding == "pcm_s16le" and result.channels == 1
    assert result.sample_rate_hz == 1_000
    assert result.byte_count == 24
    assert result.duration_seconds == 0.012
    # |x| <= 256: 0, 100, 256 and the four trailing zeros (-257 is just above the threshold)
    assert result.silence_ratio == round(7 / 12, 6)
    assert result.peak_amplitude == 32768  # |-32768|, without int16 overflow
    expected_rms = math.sqrt(sum(v * v for v in values) / len(values))
    assert result.rms_amplitude == round(expected_rms, 3)
    assert result.clipped_sample_ratio == round(2 / 12, 6)  # 32767 and -32768
    assert result.possible_truncation  # 1000 sits inside the final 10 samples


@pytest.mark.parametrize(("tail_value", "truncated"), [
    (256, False),   # at the threshold is silence
    (-256, False),
    (257, True),    # just above it is sound
    (-257, True),
])
def test_truncation_threshold(tail_value: int, truncated: bool) -> None:
    samples = [20_000] * 100 + [0] * 240
    samples[-1] = tail_value
    assert analyze_signal(pcm(samples)).possible_truncation is truncated


def test_truncation_looks_at_exactly_the_final_10_ms() -> None:
    window = 240  # 10 ms at 24 kHz
    inside = [0] * 1_000
    inside[-window] = 5_000
    assert analyze_signal(pcm(inside)).possible_truncation
    outside = [0] * 1_000
    outside[-window - 1] = 5_000
    assert not analyze_signal(pcm(outside)).possible_truncation


def test_silence_and_an_empty_buffer() -> None:
    quiet = analyze_signal(PcmAudio.silence(0.5))
    assert (quiet.silence_ratio, quiet.peak_amplitude, quiet.rms_amplitude) == (1.0, 0, 0.0)
    assert (quiet.byte_count, quiet.duration_seconds) == (24_000, 0.5)
    assert not quiet.possible_truncation
    empty = analyze_signal(pcm([]))
    assert (empty.byte_count, empty.duration_seconds, empty.silence_ratio) == (0, 0.0, 1.0)
    assert not empty.possible_truncation


def test_a_full_scale_square_wave_is_all_clipped() -> None:
    result = analyze_signal(pcm([32767, -32768] * 500))
    assert result.clipped_sample_ratio == 1.0
    assert result.silence_ratio == 0.0
    assert_allclose(result.rms_amplitude, math.sqrt((32767**2 + 32768**2) / 2), atol=1e-3)


def test_a_long_random_signal_matches_a_direct_computation() -> None:
    # several internal blocks long, with clipped samples and silence spread through it
    rng = np.random.default_rng(11)
    samples = rng.integers(-32768, 32768, 200_003).astype(np.int16)
    samples[rng.integers(0, samples.shape[0], 5_000)] = 0
    samples[rng.integers(0, samples.shape[0], 300)] = -32768
    result = analyze_signal(PcmAudio(samples))
    wide = samples.astype(np.float64)
    assert result.silence_ratio == round(float(np.mean(np.abs(wide) <= 256)), 6)
    assert result.clipped_sample_ratio == round(
        float(np.mean((samples == 32767) | (samples == -32768))), 6)
    assert result.peak_amplitude == 32768
    # rounded to 3 decimals by the analysis; float64 reference error is far below that
    assert_allclose(result.rms_amplitude, np.sqrt(np.mean(wide**2)), atol=1e-3)
    assert result.duration_seconds == round(200_003 / 24_000, 6)


def test_a_sine_sampled_at_its_peaks_and_zero_crossings() -> None:
    # a 6 kHz sine at 24 kHz is exactly 0, A, 0, -A: RMS A/sqrt(2), half the samples silent
    result = analyze_signal(pcm([0, 12_000, 0, -12_000] * 6_000))
    assert result.peak_amplitude == 12_000
    assert result.rms_amplitude == round(12_000 / math.sqrt(2), 3)
    assert result.silence_ratio == 0.5
    assert result.duration_seconds == 1.0 and result.byte_count == 48_000
    assert result.possible_truncation


@pytest.mark.parametrize("value, silent", [(-32768, False), (-257, False), (-256, True), (0, True),
                                           (256, True), (257, False), (32511, False),
                                           (32512, False), (32767, False)])
def test_the_silence_threshold_at_its_edges_and_near_wrap_around(value: int, silent: bool) -> None:
    result = analyze_signal(pcm([value] * 10))
    assert result.silence_ratio == (1.0 if silent else 0.0)
    assert result.clipped_sample_ratio == (1.0 if value in (-32768, 32767) else 0.0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 700), st.sampled_from([0, 200, 300, 32767]),
                          st.integers(0, 2**32 - 1)), max_size=6))
def test_analyze_signals_equals_the_analysis_of_the_concatenation(shapes):
    from voicelab.audio import analyze_signals

    parts = []
    for size, amplitude, seed in shapes:
        noise = np.random.default_rng(seed).uniform(-1.2, 1.2, size) * amplitude
        parts.append(PcmAudio(np.clip(noise, -32768, 32767).astype(np.int16)))
    each, whole = analyze_signals(parts)
    assert each == [analyze_signal(part) for part in parts]
    assert whole == analyze_signal(PcmAudio.concat(parts))
