"""The canonical format and PcmAudio: units travel with every buffer."""

from __future__ import annotations

import numpy as np
import pytest

from voicelab.audio import (
    CANONICAL_FORMAT,
    CANONICAL_SAMPLE_RATE_HZ,
    AudioFormat,
    PcmAudio,
)


def test_the_canonical_format_is_pcm_s16le_24khz_mono() -> None:
    assert CANONICAL_FORMAT.to_dict() == {"encoding": "pcm_s16le", "sample_rate_hz": 24_000,
                                          "channels": 1}
    assert CANONICAL_FORMAT.bytes_per_second == 48_000
    assert CANONICAL_FORMAT.seconds_for_bytes(24_000) == 0.5
    assert CANONICAL_FORMAT.bytes_for_ms(20) == 960
    assert CANONICAL_FORMAT.bytes_for_ms(0.001) == 2  # never less than one whole sample
    assert AudioFormat(sample_rate_hz=16_000).bytes_per_second == 32_000


def test_a_buffer_carries_its_units() -> None:
    audio = PcmAudio(np.arange(-6, 6, dtype=np.int16))
    assert audio.sample_rate_hz == CANONICAL_SAMPLE_RATE_HZ
    assert (audio.num_samples, audio.byte_count, len(audio)) == (12, 24, 12)
    assert audio.duration_seconds == pytest.approx(12 / 24_000)
    assert audio.format == CANONICAL_FORMAT
    assert "24000 Hz" in repr(audio)


@pytest.mark.parametrize("samples", [
    np.zeros(4, dtype=np.float32),            # not int16
    np.zeros((4, 2), dtype=np.int16),         # not mono
    [0, 1, 2],                                # not an array
])
def test_only_mono_int16_arrays_are_accepted(samples: object) -> None:
    with pytest.raises(ValueError):
        PcmAudio(samples)  # type: ignore[arg-type]


def test_a_sample_rate_must_be_positive() -> None:
    with pytest.raises(ValueError):
        PcmAudio(np.zeros(2, dtype=np.int16), 0)


def test_bytes_are_little_endian_16_bit() -> None:
    audio = PcmAudio(np.array([1, -2, 32767, -32768], dtype=np.int16))
    raw = audio.to_bytes()
    assert raw == b"\x01\x00\xfe\xff\xff\x7f\x00\x80"
    assert np.array_equal(PcmAudio.from_bytes(raw).samples, audio.samples)
    with pytest.raises(ValueError):
        PcmAudio.from_bytes(raw[:-1])  # half a sample


def test_silence_slicing_chunking_and_concatenation() -> None:
    silence = PcmAudio.silence(0.5)
    assert silence.num_samples == 12_000 and not silence.samples.any()
    ramp = PcmAudio(np.arange(24_000, dtype=np.int64).astype(np.int16))
    part = ramp.slice_seconds(0.25, 0.5)
    assert (part.num_samples, int(part.samples[0])) == (6_000, 6_000)
    chunks = ramp.chunks(20)
    assert [c.num_samples for c in chunks[:2]] == [480, 480] and len(chunks) == 50
    assert PcmAudio.concat(chunks).to_bytes() == ramp.to_bytes()
    assert PcmAudio.concat([]).num_samples == 0
    with pytest.raises(ValueError):
        PcmAudio.concat([ramp, PcmAudio(np.zeros(4, dtype=np.int16), 16_000)])
