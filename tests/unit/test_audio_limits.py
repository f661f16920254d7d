"""read_audio refuses implausible sample rates and over-long assets before decoding them."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import soundfile
from numpy.testing import assert_allclose

from voicelab.audio import read_audio
from voicelab.audio._io import MAX_DURATION_SECONDS, MAX_SAMPLE_RATE_HZ, MIN_SAMPLE_RATE_HZ
from voicelab.errors import AudioFileError

RATE = 24_000


def pcm16_wav(path: Path, *, sample_rate_hz: int, frames: int, channels: int = 1) -> Path:
    """A 16-bit PCM WAV whose header declares any rate (soundfile refuses to write some)."""
    data_bytes = frames * channels * 2
    byte_rate = (sample_rate_hz * channels * 2) & 0xFFFFFFFF
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + data_bytes, b"WAVE", b"fmt ", 16, 1,
                         channels, sample_rate_hz, byte_rate, channels * 2, 16, b"data",
                         data_bytes)
    with path.open("wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + data_bytes)  # silence, sparse on disk
    return path


@pytest.mark.parametrize("rate", [1, 100, MIN_SAMPLE_RATE_HZ - 1, MAX_SAMPLE_RATE_HZ + 1,
                                  2_000_000_000])
def test_an_implausible_sample_rate_is_refused(tmp_path: Path, rate: int) -> None:
    path = pcm16_wav(tmp_path / "odd.wav", sample_rate_hz=rate, frames=100)
    with pytest.raises(AudioFileError) as caught:
        read_audio(path)
    assert caught.value.source == str(path)
    assert f"implausible sample rate {rate:,} Hz" in caught.value.message
    assert f"{MIN_SAMPLE_RATE_HZ:,} to {MAX_SAMPLE_RATE_HZ:,} Hz" in caught.value.message


@pytest.mark.parametrize("rate", [MIN_SAMPLE_RATE_HZ, 8_000, 48_000, MAX_SAMPLE_RATE_HZ])
def test_rates_at_and_inside_the_range_are_resampled(tmp_path: Path, rate: int) -> None:
    path = pcm16_wav(tmp_path / "edge.wav", sample_rate_hz=rate, frames=rate // 10)
    audio = read_audio(path)
    assert audio.sample_rate_hz == RATE and abs(audio.num_samples - RATE // 10) <= 1


def test_audio_longer_than_the_limit_is_refused_before_decoding(tmp_path: Path) -> None:
    rate = 8_000
    path = pcm16_wav(tmp_path / "long.wav", sample_rate_hz=rate,
                     frames=(MAX_DURATION_SECONDS + 1) * rate)
    with pytest.raises(AudioFileError) as caught:
        read_audio(path)
    assert f"audio is {MAX_DURATION_SECONDS + 1:,.1f} s long" in caught.value.message
    assert f"limited to {MAX_DURATION_SECONDS} s" in caught.value.message


def test_audio_of_exactly_the_maximum_duration_is_read(tmp_path: Path) -> None:
    rate = MIN_SAMPLE_RATE_HZ  # the cheapest rate: 10 minutes are 4.8 MB sparse
    path = pcm16_wav(tmp_path / "limit.wav", sample_rate_hz=rate,
                     frames=MAX_DURATION_SECONDS * rate)
    audio = read_audio(path)
    assert audio.num_samples == MAX_DURATION_SECONDS * RATE


def test_a_long_compressed_file_is_measured_by_its_duration_not_its_size(tmp_path: Path) -> None:
    # FLAC squeezes digital silence to almost nothing: the limit must not depend on bytes
    rate = 8_000
    path = tmp_path / "silence.flac"
    soundfile.write(path, np.zeros((MAX_DURATION_SECONDS + 5) * rate, dtype=np.int16), rate,
                    format="FLAC", subtype="PCM_16")
    assert path.stat().st_size < 1_000_000
    with pytest.raises(AudioFileError, match="limited to"):
        read_audio(path)


def test_block_wise_decoding_equals_decoding_the_whole_signal(tmp_path: Path) -> None:
    """Several blocks, stereo, a non-canonical rate: the same samples as one-shot soxr."""
    import soxr

    rate = 44_100
    rng = np.random.default_rng(7)
    stereo = (0.2 * rng.standard_normal((rate * 4, 2))).astype(np.float32)
    path = tmp_path / "noise.wav"
    soundfile.write(path, stereo, rate, subtype="FLOAT")
    whole = soxr.resample(stereo.mean(axis=1), rate, RATE, quality="VHQ")
    expected = np.clip(np.round(whole.astype(np.float64) * 32768.0), -32768, 32767)
    # exact: soxr's stream gives the one-shot result bit for bit, and the rounding is the same
    assert_allclose(read_audio(path).samples, expected, rtol=0, atol=0)
