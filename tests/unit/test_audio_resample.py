"""The streaming resampler: the same output however the input is chunked, with units attached."""

from __future__ import annotations

import numpy as np
import pytest

from voicelab.audio import PcmAudio, StreamingResampler

RATE_PAIRS = [(24_000, 16_000), (16_000, 24_000), (24_000, 8_000), (8_000, 24_000),
              (44_100, 24_000), (24_000, 48_000)]


def noise(count: int, *, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(0.0, 4000.0, count), -32768, 32767).astype(np.int16)


def resample_in_chunks(samples: np.ndarray, sizes: list[int], resampler: StreamingResampler,
                       *, rate_hz: int) -> np.ndarray:
    parts, start = [], 0
    for size in sizes:
        parts.append(resampler.process(PcmAudio(samples[start:start + size], rate_hz)).samples)
        start += size
    parts.append(resampler.process(samples[start:]).samples)  # a bare int16 array works too
    parts.append(resampler.flush().samples)
    return np.concatenate(parts)


@pytest.mark.parametrize(("from_hz", "to_hz"), RATE_PAIRS)
def test_chunked_output_equals_one_call(from_hz: int, to_hz: int) -> None:
    """Random chunk sizes from 1 sample to 100 ms, including a 1-sample and an empty chunk.

    Tolerance: 1 LSB. soxr's float32 stream is chunk-invariant (observed: bit-identical), and we
    round its floats ourselves; the one step allowed covers a float that lands on a rounding
    boundary differently in another soxr build.
    """
    samples = noise(from_hz * 2, seed=7)
    rng = np.random.default_rng(11)
    sizes = [0, 1, *rng.integers(1, from_hz // 10, size=60).tolist()]
    whole = StreamingResampler(from_hz, to_hz)
    one_call = np.concatenate([whole.process(PcmAudio(samples, from_hz)).samples,
                               whole.flush().samples])
    chunked = resample_in_chunks(samples, sizes, StreamingResampler(from_hz, to_hz),
                                 rate_hz=from_hz)
    assert chunked.shape == one_call.shape
    np.testing.assert_allclose(chunked.astype(np.int32), one_call.astype(np.int32), rtol=0, atol=1)


@pytest.mark.parametrize(("from_hz", "to_hz"), RATE_PAIRS)
def test_a_flushed_stream_is_the_input_duration_at_the_new_rate(from_hz: int, to_hz: int) -> None:
    samples = noise(12_345, seed=3)
    resampler = StreamingResampler(from_hz, to_hz)
    total = resampler.process(samples).num_samples + resampler.flush().num_samples
    assert abs(total - 12_345 * to_hz / from_hz) <= 1  # rounding of a fractional last sample


@pytest.mark.parametrize(("from_hz", "to_hz"), [(24_000, 16_000), (16_000, 24_000),
                                                (24_000, 8_000)])
def test_a_tone_keeps_its_frequency_and_level(from_hz: int, to_hz: int) -> None:
    """A 1 kHz tone (inside every band here) comes out at 1 kHz and within 0.1 dB of its level
    (soxr HQ's passband ripple is far smaller; the margin covers the rounding to int16)."""
    t = np.arange(from_hz) / from_hz
    tone = np.rint(10_000 * np.sin(2 * np.pi * 1000.0 * t)).astype(np.int16)
    resampler = StreamingResampler(from_hz, to_hz)
    out = np.concatenate([resampler.process(tone).samples, resampler.flush().samples])
    steady = out[to_hz // 10: -to_hz // 10].astype(np.float64)  # away from the filter's edges
    level_db = 20 * np.log10(np.sqrt(np.mean(steady ** 2)) / (10_000 / np.sqrt(2)))
    assert abs(level_db) < 0.1
    spectrum = np.abs(np.fft.rfft(steady * np.hanning(steady.size)))
    peak_hz = np.argmax(spectrum) * to_hz / steady.size
    assert abs(peak_hz - 1000.0) < to_hz / steady.size  # within one FFT bin


def test_units_are_checked_at_the_door() -> None:
    resampler = StreamingResampler(16_000, 24_000)
    out = resampler.process(PcmAudio(noise(1600, seed=1), 16_000))
    assert isinstance(out, PcmAudio) and out.sample_rate_hz == 24_000
    with pytest.raises(ValueError, match="24000 Hz audio but this resampler takes 16000 Hz"):
        resampler.process(PcmAudio(noise(100, seed=1), 24_000))
    with pytest.raises(ValueError, match="int16"):
        resampler.process(np.zeros(10, dtype=np.float32))
    with pytest.raises(ValueError, match="from_hz"):
        StreamingResampler(0, 24_000)
    with pytest.raises(ValueError, match="quality"):
        StreamingResampler(16_000, 24_000, quality="best")


def test_flush_starts_a_new_unrelated_stream() -> None:
    samples = noise(8000, seed=5)
    resampler = StreamingResampler(8_000, 24_000)
    first = np.concatenate([resampler.process(samples).samples, resampler.flush().samples])
    second = np.concatenate([resampler.process(samples).samples, resampler.flush().samples])
    np.testing.assert_array_equal(first, second)


def test_same_rate_passes_samples_through() -> None:
    samples = noise(500, seed=2)
    resampler = StreamingResampler(24_000, 24_000)
    np.testing.assert_array_equal(resampler.process(samples).samples, samples)
    assert resampler.flush().num_samples == 0


def test_clipping_is_counted() -> None:
    """A full-scale square wave overshoots after band limiting (Gibbs): the excess is clipped to
    int16 and counted, never wrapped around."""
    square = np.tile(np.r_[np.full(40, 32767), np.full(40, -32768)], 100).astype(np.int16)
    resampler = StreamingResampler(24_000, 16_000)
    out = np.concatenate([resampler.process(square).samples, resampler.flush().samples])
    assert resampler.clipped_samples > 0
    assert out.max() == 32767 and out.min() == -32768
