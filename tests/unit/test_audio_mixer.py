"""The seeded environment mixer: layers, transient events, clipping and the delivered SNR."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose

from voicelab.audio import (
    MixResult,
    PcmAudio,
    PreparedEnvironment,
    analyze_signal,
    mix,
    prepare_environment,
    write_wav,
)
from voicelab.config import EnvironmentConfig
from voicelab.errors import AudioFileError

RATE = 24_000


def sine(amplitude: float, period_samples: int, count: int) -> np.ndarray:
    return np.round(amplitude * np.sin(2 * np.pi * np.arange(count) / period_samples))


def square(amplitude: int, half_period_samples: int, count: int) -> np.ndarray:
    """Constant-amplitude 'speech': every sample is +A or -A, so all of it is active."""
    return np.where((np.arange(count) // half_period_samples) % 2 == 0, amplitude, -amplitude)


def pcm(values: np.ndarray) -> PcmAudio:
    return PcmAudio(np.asarray(values).astype(np.int16))


def asset(folder: Path, name: str, values: np.ndarray) -> str:
    return str(write_wav(folder / name, pcm(values)))


def prepared(**config: Any) -> PreparedEnvironment:
    return prepare_environment(EnvironmentConfig.model_validate(config))


def mixed_samples(result: MixResult) -> np.ndarray:
    return result.audio.samples.astype(np.int64)


@pytest.fixture()
def noise_file(tmp_path: Path) -> str:
    # a 1 kHz sine (24-sample period) of amplitude 10000, one second: whole periods everywhere
    return asset(tmp_path, "sine.wav", sine(10_000, 24, RATE))


@pytest.fixture()
def event_file(tmp_path: Path) -> tuple[str, np.ndarray]:
    values = np.random.default_rng(8).integers(-6_000, 6_000, int(0.3 * RATE))
    return asset(tmp_path, "event.wav", values), values


# --- delivered speech-to-noise ratio ----------------------------------------------------------

def test_snr_against_a_hand_computed_expectation(noise_file: str) -> None:
    speech = pcm(square(8_000, 12, RATE))
    environment = prepared(impact=0.8, base_noise=noise_file, base_noise_volume=0.5)
    result = mix(speech, environment=environment, seed=1, turn_number=1)
    # speech power 8000^2; noise a sine of amplitude 10000 * 0.5 * 0.8 = 4000, power 4000^2 / 2
    expected_db = 10 * math.log10(8_000**2 / (4_000**2 / 2))  # = 10 log10(8) = 9.031 dB
    # tolerance: the sine file and the mix each round to integers (error <= 0.5 on a 4000
    # amplitude, under 3e-4 relative power, about 0.001 dB); the result is rounded to 0.001 dB
    assert result.speech_to_noise_db == pytest.approx(expected_db, abs=0.005)
    assert result.speech_rms == 8_000
    assert_allclose(result.noise_rms, 4_000 / math.sqrt(2), rtol=1e-3)
    assert result.clipped_samples == 0


def test_halving_the_impact_raises_the_snr_by_6_db(noise_file: str) -> None:
    speech = pcm(square(8_000, 12, RATE))
    loud = mix(speech, environment=prepared(impact=0.8, base_noise=noise_file,
                                            base_noise_volume=0.5), seed=1, turn_number=1)
    soft = mix(speech, environment=prepared(impact=0.4, base_noise=noise_file,
                                            base_noise_volume=0.5), seed=1, turn_number=1)
    assert loud.speech_to_noise_db is not None and soft.speech_to_noise_db is not None
    # same rounding budget as above, on each side
    assert soft.speech_to_noise_db - loud.speech_to_noise_db == pytest.approx(
        20 * math.log10(2), abs=0.01)


def test_snr_is_measured_where_the_speech_is_active(noise_file: str) -> None:
    half = RATE // 2  # 500 whole periods of the noise sine
    speech = pcm(np.concatenate([np.zeros(half), square(8_000, 12, half)]))
    environment = prepared(impact=0.8, base_noise=noise_file, base_noise_volume=0.5)
    result = mix(speech, environment=environment, seed=3, turn_number=1)
    # the silent half does not dilute the speech power: same 9.031 dB as all-active speech
    assert result.speech_to_noise_db == pytest.approx(10 * math.log10(8), abs=0.005)
    assert result.speech_rms == 8_000


def test_no_speech_means_no_snr(noise_file: str) -> None:
    environment = prepared(impact=1.0, base_noise=noise_file, base_noise_volume=0.25)
    result = mix(PcmAudio.silence(0.5), environment=environment, seed=1, turn_number=1)
    assert result.speech_to_noise_db is None
    assert_allclose(result.noise_rms, 2_500 / math.sqrt(2), rtol=1e-3)
    assert np.abs(mixed_samples(result)).max() == pytest.approx(2_500, abs=1)


def test_zero_impact_passes_the_speech_through_untouched(noise_file: str) -> None:
    speech = pcm(square(8_000, 12, RATE))
    result = mix(speech, environment=prepared(impact=0.0, base_noise=noise_file), seed=1,
                 turn_number=1)
    assert result.audio.to_bytes() == speech.to_bytes()
    assert result.speech_to_noise_db is None and result.noise_rms == 0.0


# --- determinism and placement ----------------------------------------------------------------

@pytest.fixture()
def busy_environment(tmp_path: Path) -> PreparedEnvironment:
    rng = np.random.default_rng(21)
    hum = asset(tmp_path, "hum.wav", rng.integers(-3_000, 3_000, int(0.7 * RATE)))
    voices = asset(tmp_path, "voices.wav", rng.integers(-2_000, 2_000, int(1.3 * RATE)))
    click = asset(tmp_path, "click.wav", rng.integers(-9_000, 9_000, int(0.05 * RATE)))
    door = asset(tmp_path, "door.wav", rng.integers(-9_000, 9_000, int(0.2 * RATE)))
    return prepared(impact=0.7, base_noise=hum, base_noise_volume=0.2, background_voices=voices,
                    background_voices_volume=0.15, transient_events=[
                        {"type": door, "volume": 0.5, "trigger_mode": "on_turn",
                         "on_turn_number": 2},
                        {"type": click, "volume": 0.4, "trigger_mode": "random",
                         "probability": 1.0},
                        {"type": click, "volume": 0.4, "trigger_mode": "random",
                         "probability": 0.0},
                    ])


SPEECH = pcm(square(5_000, 40, int(1.5 * RATE)))


def test_the_same_seed_gives_byte_identical_audio(busy_environment: PreparedEnvironment,
                                                  tmp_path: Path) -> None:
    first = mix(SPEECH, environment=busy_environment, seed=9, turn_number=2,
                stream_offset_seconds=3.0)
    again = mix(SPEECH, environment=prepare_environment(busy_environment.config), seed=9,
                turn_number=2, stream_offset_seconds=3.0)
    assert again.audio.to_bytes() == first.audio.to_bytes()
    assert (again.events, again.speech_to_noise_db) == (first.events, first.speech_to_noise_db)


def test_a_different_seed_gives_different_audio(busy_environment: PreparedEnvironment) -> None:
    outputs = {mix(SPEECH, environment=busy_environment, seed=seed, turn_number=1)
               .audio.to_bytes() for seed in range(4)}
    assert len(outputs) == 4


def offsets(environment: PreparedEnvironment, *, seed: int, turn_number: int) -> list[float]:
    result = mix(SPEECH, environment=environment, seed=seed, turn_number=turn_number)
    return [event["offset_seconds"] for event in result.events if event["index"] == 1]


def test_random_events_move_with_the_seed_and_the_turn(
        busy_environment: PreparedEnvironment) -> None:
    by_turn = [offsets(busy_environment, seed=4, turn_number=turn)[0] for turn in range(1, 9)]
    by_seed = [offsets(busy_environment, seed=seed, turn_number=1)[0] for seed in range(8)]
    assert len(set(by_turn)) > 4 and len(set(by_seed)) > 4
    # no hidden state: a placement depends on (seed, turn) only, not on what was mixed before
    assert offsets(busy_environment, seed=4, turn_number=5)[0] == by_turn[4]
    assert all(0 <= offset < SPEECH.duration_seconds for offset in by_turn + by_seed)


def test_event_triggers(busy_environment: PreparedEnvironment) -> None:
    first = mix(SPEECH, environment=busy_environment, seed=2, turn_number=1)
    second = mix(SPEECH, environment=busy_environment, seed=2, turn_number=2)
    assert [event["index"] for event in first.events] == [1]          # probability 1 only
    assert [event["index"] for event in second.events] == [0, 1]      # + the on_turn door
    door = second.events[0]
    assert door["trigger_mode"] == "on_turn" and door["file"] == "door.wav"
    assert door["gain"] == pytest.approx(0.35) and door["audible_seconds"] == 0.2
    room = SPEECH.duration_seconds - 0.2
    assert 0 <= door["offset_seconds"] <= room / 2 + 1 / RATE  # early in the turn, whole


def test_continuous_layers_loop(tmp_path: Path) -> None:
    values = np.random.default_rng(6).integers(-4_000, 4_000, 2_400)  # 0.1 s
    environment = prepared(impact=1.0, base_noise=asset(tmp_path, "short.wav", values),
                           base_noise_volume=1.0)
    out = mixed_samples(mix(PcmAudio.silence(1.0), environment=environment, seed=5,
                            turn_number=1))
    assert np.array_equal(out[:-2_400], out[2_400:])  # periodic with the layer's length
    assert sorted(set(out[:2_400].tolist())) == sorted(set(values.tolist()))  # a rotation of it


def test_layers_continue_from_one_turn_to_the_next(busy_environment: PreparedEnvironment) -> None:
    quiet_layers = prepare_environment(busy_environment.config.model_copy(
        update={"transient_events": []}))
    first = mix(PcmAudio.silence(0.7), environment=quiet_layers, seed=8, turn_number=1)
    second = mix(PcmAudio.silence(1.1), environment=quiet_layers, seed=8, turn_number=2,
                 stream_offset_seconds=0.7)
    whole = mix(PcmAudio.silence(1.8), environment=quiet_layers, seed=8, turn_number=1)
    assert first.audio.to_bytes() + second.audio.to_bytes() == whole.audio.to_bytes()


def test_a_scheduled_event_spanning_two_turns_is_split_across_them(
        tmp_path: Path, event_file: tuple[str, np.ndarray]) -> None:
    path, values = event_file  # 0.3 s, placed at 0.9 s of microphone time
    environment = prepared(impact=1.0, transient_events=[
        {"type": path, "volume": 1.0, "trigger_mode": "scheduled", "at_seconds": 0.9}])
    first = mix(PcmAudio.silence(1.0), environment=environment, seed=1, turn_number=1)
    second = mix(PcmAudio.silence(1.0), environment=environment, seed=1, turn_number=2,
                 stream_offset_seconds=1.0)
    split = int(0.1 * RATE)
    out1, out2 = mixed_samples(first), mixed_samples(second)
    assert not out1[:int(0.9 * RATE)].any()
    assert np.array_equal(out1[int(0.9 * RATE):], values[:split])  # unit gain: exact samples
    assert np.array_equal(out2[:values.shape[0] - split], values[split:])
    assert not out2[values.shape[0] - split:].any()
    assert [(e["offset_seconds"], e["audible_seconds"]) for e in first.events] == [(0.9, 0.1)]
    assert [(e["offset_seconds"], e["audible_seconds"]) for e in second.events] == [(-0.1, 0.2)]
    third = mix(PcmAudio.silence(1.0), environment=environment, seed=1, turn_number=3,
                stream_offset_seconds=2.0)
    assert third.events == [] and not third.audio.samples.any()


def test_an_event_lands_sample_exact_inside_a_long_turn(
        event_file: tuple[str, np.ndarray]) -> None:
    path, values = event_file
    at = 32_640  # 1.36 s: the event straddles the mixer's internal 32768-sample block edge
    environment = prepared(impact=0.5, transient_events=[
        {"type": path, "volume": 1.0, "trigger_mode": "scheduled", "at_seconds": at / RATE}])
    out = mixed_samples(mix(PcmAudio.silence(3.0), environment=environment, seed=1,
                            turn_number=1))
    expected = np.rint(values.astype(np.float32) * np.float32(0.5))  # gain 1.0 * impact 0.5
    assert np.array_equal(out[at:at + values.shape[0]], expected)
    assert not out[:at].any() and not out[at + values.shape[0]:].any()


def test_clipping_is_applied_and_reported(tmp_path: Path) -> None:
    loud = asset(tmp_path, "loud.wav", sine(20_000, 24, RATE))
    speech = pcm(square(30_000, 12, RATE))
    result = mix(speech, environment=prepared(impact=1.0, base_noise=loud, base_noise_volume=1.0),
                 seed=1, turn_number=1)
    out = result.audio.samples
    at_rails = int(np.count_nonzero((out == 32767) | (out == -32768)))
    assert result.clipped_samples == at_rails > RATE // 4
    assert analyze_signal(result.audio).clipped_sample_ratio == round(at_rails / RATE, 6)
    assert result.summary()["clipped_samples"] == at_rails
    # the SNR is what was delivered: clipping removed part of the noise
    unclipped_db = 10 * math.log10(30_000**2 / (20_000**2 / 2))
    assert result.speech_to_noise_db is not None and result.speech_to_noise_db > unclipped_db


def test_speech_at_another_rate_is_refused(noise_file: str) -> None:
    with pytest.raises(ValueError, match="Hz"):
        mix(PcmAudio(np.zeros(160, dtype=np.int16), 16_000),
            environment=prepared(base_noise=noise_file), seed=1, turn_number=1)


def test_a_bad_asset_names_the_environment_file_and_the_key(tmp_path: Path,
                                                            noise_file: str) -> None:
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF not really a wav file")
    config = EnvironmentConfig.model_validate({"base_noise": noise_file, "transient_events": [
        {"type": str(broken), "on_turn_number": 1}]})
    with pytest.raises(AudioFileError) as caught:
        prepare_environment(config, source="environment-office.yaml")
    assert (caught.value.source, caught.value.key) == ("environment-office.yaml",
                                                       "transient_events[0].type")
    assert "broken.wav" in caught.value.message
