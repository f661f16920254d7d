"""read_audio normalizes WAV (PCM or float, any rate, stereo), FLAC and OGG; refuses the rest."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np
import pytest
import soundfile
from numpy.testing import assert_allclose

from voicelab.audio import PcmAudio, read_audio, wav_bytes, write_wav
from voicelab.errors import AudioFileError, ConfigError

RATE = 24_000


def tone(frequency_hz: float, seconds: float, rate: int, amplitude: float) -> np.ndarray:
    return amplitude * np.sin(2 * np.pi * frequency_hz * np.arange(int(seconds * rate)) / rate)


def to_pcm16(floats: np.ndarray) -> np.ndarray:
    """The hand-computed conversion: scale by 32768, round half to even, clip to int16."""
    return np.clip(np.round(floats * 32768.0), -32768, 32767).astype(np.int16)


def dominant_frequency_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64) * np.hanning(samples.shape[0])))
    return float(np.fft.rfftfreq(samples.shape[0], 1 / rate)[int(np.argmax(spectrum))])


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))


def test_16_bit_mono_at_the_canonical_rate_is_read_exactly(tmp_path: Path) -> None:
    samples = np.random.default_rng(1).integers(-32768, 32768, 4_800).astype(np.int16)
    path = tmp_path / "exact.wav"
    soundfile.write(path, samples, RATE, subtype="PCM_16")
    audio = read_audio(path)
    assert (audio.sample_rate_hz, audio.samples.dtype) == (RATE, np.int16)
    assert np.array_equal(audio.samples, samples)


def test_8_bit_wav_is_widened_to_16_bit(tmp_path: Path) -> None:
    floats = tone(440, 0.1, RATE, 0.5)
    path = tmp_path / "u8.wav"
    soundfile.write(path, floats, RATE, subtype="PCM_U8")
    audio = read_audio(path)
    # an 8-bit sample step is 256 in 16-bit units: the file itself is off by up to one step
    assert_allclose(audio.samples, to_pcm16(floats), rtol=0, atol=256)
    assert np.all(audio.samples % 256 == 0)  # widened, not re-quantized


@pytest.mark.parametrize("subtype", ["PCM_24", "PCM_32", "FLOAT", "DOUBLE"])
def test_wide_and_float_wav_is_rounded_to_16_bit(tmp_path: Path, subtype: str) -> None:
    floats = tone(440, 0.1, RATE, 0.7)
    path = tmp_path / f"{subtype}.wav"
    soundfile.write(path, floats, RATE, subtype=subtype)
    # one unit: the file holds 24+ bits (or float32), rounding to 16 bits may land either side
    assert_allclose(read_audio(path).samples, to_pcm16(floats), rtol=0, atol=1)


def test_float_wav_beyond_full_scale_is_clipped(tmp_path: Path) -> None:
    path = tmp_path / "hot.wav"
    soundfile.write(path, np.array([0.0, 1.5, -1.5, 0.25], dtype=np.float32), RATE,
                    subtype="FLOAT")
    assert read_audio(path).samples.tolist() == [0, 32767, -32768, 8192]


def test_non_finite_float_wav_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nan.wav"
    soundfile.write(path, np.array([0.0, np.nan, 0.1], dtype=np.float32), RATE, subtype="FLOAT")
    with pytest.raises(AudioFileError, match="non-finite"):
        read_audio(path)


def test_44k1_stereo_is_averaged_to_mono_and_resampled(tmp_path: Path) -> None:
    rate, seconds = 44_100, 0.5
    left, right = tone(440, seconds, rate, 0.5), tone(440, seconds, rate, 0.1)
    path = tmp_path / "stereo.wav"
    soundfile.write(path, np.stack([left, right], axis=1), rate, subtype="PCM_16")
    audio = read_audio(path)
    assert audio.sample_rate_hz == RATE
    assert abs(audio.num_samples - seconds * RATE) <= 1
    middle = audio.samples[2_400:-2_400]  # away from the resampler's edge transients
    # mean of the channels: a 0.3 full-scale sine. soxr VHQ is flat to far below 0.1 % at
    # 440 Hz; the tolerance covers 16-bit quantization and the window not being whole periods.
    assert_allclose(rms(middle), 0.3 * 32768 / np.sqrt(2), rtol=5e-3)
    assert abs(dominant_frequency_hz(middle, RATE) - 440) <= RATE / middle.shape[0]


def test_16_khz_float_is_upsampled_keeping_pitch_and_duration(tmp_path: Path) -> None:
    path = tmp_path / "narrow.wav"
    soundfile.write(path, tone(1_000, 1.0, 16_000, 0.25), 16_000, subtype="FLOAT")
    audio = read_audio(path)
    assert abs(audio.num_samples - RATE) <= 1
    assert dominant_frequency_hz(audio.samples, RATE) == pytest.approx(1_000, abs=1.0)
    assert_allclose(rms(audio.samples[2_400:-2_400]), 0.25 * 32768 / np.sqrt(2), rtol=5e-3)


def test_another_target_rate_can_be_asked_for(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "canonical.wav", PcmAudio(to_pcm16(tone(300, 0.3, RATE, 0.3))))
    audio = read_audio(path, sample_rate_hz=16_000)
    assert audio.sample_rate_hz == 16_000 and abs(audio.num_samples - 4_800) <= 1


def test_flac_is_lossless(tmp_path: Path) -> None:
    samples = to_pcm16(tone(523, 0.2, RATE, 0.4))
    path = tmp_path / "clip.flac"
    soundfile.write(path, samples, RATE, format="FLAC", subtype="PCM_16")
    assert np.array_equal(read_audio(path).samples, samples)


def test_ogg_vorbis_decodes_to_the_same_sound(tmp_path: Path) -> None:
    rate = 48_000
    path = tmp_path / "clip.ogg"
    soundfile.write(path, tone(660, 1.0, rate, 0.4), rate, format="OGG", subtype="VORBIS")
    audio = read_audio(path)
    # Vorbis is lossy and pads/trims a few ms at the edges; pitch and level survive it
    assert abs(audio.duration_seconds - 1.0) < 0.02
    middle = audio.samples[2_400:-2_400]
    assert dominant_frequency_hz(middle, RATE) == pytest.approx(660, abs=2.0)
    assert_allclose(rms(middle), 0.4 * 32768 / np.sqrt(2), rtol=0.1)


def test_the_shipped_environment_sounds_normalize() -> None:
    datasets = Path(__file__).parents[2] / "datasets" / "environments"
    for path in sorted(datasets.iterdir()):
        audio = read_audio(path)
        assert audio.sample_rate_hz == RATE and audio.num_samples > RATE // 2, path.name


def test_write_wav_writes_a_canonical_wav_that_reads_back_exactly(tmp_path: Path) -> None:
    samples = np.random.default_rng(2).integers(-30_000, 30_000, 2_000).astype(np.int16)
    path = write_wav(tmp_path / "deep" / "out.wav", PcmAudio(samples))
    with wave.open(str(path), "rb") as handle:
        assert (handle.getnchannels(), handle.getsampwidth(), handle.getframerate(),
                handle.getnframes()) == (1, 2, RATE, 2_000)
    assert np.array_equal(read_audio(path).samples, samples)
    assert wav_bytes(PcmAudio(samples)) == path.read_bytes()


@pytest.mark.parametrize("count, rate", [(0, 24_000), (1, 24_000), (2_001, 16_000)])
def test_wav_bytes_are_what_the_wave_module_writes(count: int, rate: int) -> None:
    import io

    samples = np.random.default_rng(count).integers(-32768, 32768, count).astype(np.int16)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(samples.astype("<i2").tobytes())
    assert wav_bytes(PcmAudio(samples, rate)) == buffer.getvalue()


# --- refused files ----------------------------------------------------------------------------

def canonical_wav(seconds: float = 0.1) -> bytes:
    return wav_bytes(PcmAudio(to_pcm16(tone(440, seconds, RATE, 0.5))))


def write_bytes(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def compressed(path: Path, *, format: str, subtype: str) -> Path:
    if subtype not in soundfile.available_subtypes(format):
        pytest.skip(f"this libsndfile cannot write {format}/{subtype}")
    soundfile.write(path, tone(440, 0.1, RATE, 0.5), RATE, format=format, subtype=subtype)
    return path


BAD_FILES = {
    "empty": lambda d: write_bytes(d / "empty.wav", b""),
    "header only": lambda d: write_bytes(d / "header.wav", canonical_wav()[:44]),
    "truncated data": lambda d: write_bytes(d / "cut.wav", canonical_wav()[:44 + 1_001]),
    "truncated header": lambda d: write_bytes(d / "cut-header.wav", canonical_wav()[:30]),
    "random bytes": lambda d: write_bytes(
        d / "noise.wav", np.random.default_rng(3).integers(0, 256, 3_000, np.uint8).tobytes()),
    "corrupt flac": lambda d: write_bytes(
        d / "bad.flac",
        b"fLaC" + np.random.default_rng(4).integers(0, 256, 3_000, np.uint8).tobytes()),
    "text": lambda d: write_bytes(d / "notes.txt", b"this is not audio\n"),
    "text named mp3": lambda d: write_bytes(d / "fake.mp3", b"ID3 but not really\n"),
    "mp3": lambda d: compressed(d / "real.mp3", format="MP3", subtype="MPEG_LAYER_III"),
    "adpcm wav": lambda d: compressed(d / "adpcm.wav", format="WAV", subtype="IMA_ADPCM"),
    "u-law wav": lambda d: compressed(d / "ulaw.wav", format="WAV", subtype="ULAW"),
    "aiff": lambda d: compressed(d / "clip.aiff", format="AIFF", subtype="PCM_16"),
    "missing": lambda d: d / "missing.wav",
    "directory": lambda d: d,
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_unreadable_or_unsupported_audio_is_an_audio_file_error(tmp_path: Path,
                                                                case: str) -> None:
    path = BAD_FILES[case](tmp_path)
    with pytest.raises(AudioFileError) as caught:
        read_audio(path)
    assert isinstance(caught.value, ConfigError)  # the CLI turns it into exit 2
    assert caught.value.source == str(path)
    assert len(caught.value.one_line().splitlines()) == 1


def test_a_truncated_wav_says_so(tmp_path: Path) -> None:
    path = write_bytes(tmp_path / "cut.wav", canonical_wav()[:44 + 1_000])
    with pytest.raises(AudioFileError, match="truncated"):
        read_audio(path)


def test_an_unsupported_format_names_what_is_supported(tmp_path: Path) -> None:
    path = compressed(tmp_path / "real.mp3", format="MP3", subtype="MPEG_LAYER_III")
    with pytest.raises(AudioFileError, match="supported: WAV"):
        read_audio(path)


def test_a_streamed_wav_with_an_unknown_length_marker_still_reads(tmp_path: Path) -> None:
    # streaming writers leave 0xFFFFFFFF as the data size when they cannot seek back
    content = bytearray(canonical_wav())
    content[40:44] = (0xFFFFFFFF).to_bytes(4, "little")
    path = write_bytes(tmp_path / "streamed.wav", bytes(content))
    with wave.open(io.BytesIO(canonical_wav()), "rb") as handle:
        frames = handle.getnframes()
    assert read_audio(path).num_samples == frames
