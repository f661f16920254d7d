"""The seeded environment mixer: noise, background voices and transient events over user speech.

Mixing works on the user's *microphone timeline*: the concatenation of every user turn's audio in
a trial. Continuous layers (base noise, background voices) loop and continue from one turn to the
next, a ``scheduled`` event lands at ``at_seconds`` of that timeline (its tail carries into the
next turn), an ``on_turn`` event lands in its turn and a ``random`` event fires per turn with its
probability. Every random choice comes from ``(seed, turn_number)``, so the output is
byte-identical for the same inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import numpy as np

from ..config import EnvironmentConfig
from ..errors import AudioFileError
from ._format import CANONICAL_SAMPLE_RATE_HZ, PCM16_MAX, PCM16_MIN, PcmAudio
from ._io import read_audio
from ._signal import SILENCE_THRESHOLD

_LAYER_BASE, _LAYER_VOICES, _EVENT_TAG = 1, 2, 3


@dataclass(frozen=True)
class PreparedEnvironment:
    """An environment with its audio decoded into the canonical format (as float32 arrays)."""

    config: EnvironmentConfig
    base_noise: np.ndarray | None = None
    background_voices: np.ndarray | None = None
    transients: tuple[np.ndarray, ...] = ()
    sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ
    #: the sounds of ``config.noise_probes``, in order (played by the runner, not mixed here)
    probe_sounds: tuple[np.ndarray, ...] = ()

    @property
    def is_silent(self) -> bool:
        return self.config.impact == 0 or (
            self.base_noise is None and self.background_voices is None and not self.transients)


def prepare_environment(config: EnvironmentConfig, *, source: str | Path | None = None,
                        sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> PreparedEnvironment:
    """Decode and normalize every asset of ``config``; errors name ``source`` and the key."""

    def load(key: str, path: Path) -> np.ndarray:
        try:
            audio = read_audio(path, sample_rate_hz=sample_rate_hz)
        except AudioFileError as error:
            raise AudioFileError(f"{error.message} ({path})", source=source or error.source,
                                 key=key) from None
        return audio.samples.astype(np.float32)

    base = load("base_noise", config.base_noise) if config.base_noise else None
    voices = (load("background_voices", config.background_voices)
              if config.background_voices else None)
    transients = tuple(load(f"transient_events[{index}].type", event.type)
                       for index, event in enumerate(config.transient_events))
    probe_sounds = tuple(load(f"noise_probes[{index}].sound", probe.sound)
                         for index, probe in enumerate(config.noise_probes))
    return PreparedEnvironment(config, base, voices, transients, sample_rate_hz, probe_sounds)


class PlacedEvent(TypedDict):
    """Where a transient event (a door, a dog) was placed in the mix, and how loud."""

    index: int
    file: str
    trigger_mode: str
    offset_seconds: float
    audible_seconds: float
    volume: float
    gain: float


@dataclass(frozen=True)
class MixResult:
    audio: PcmAudio
    speech_to_noise_db: float | None
    speech_rms: float
    noise_rms: float
    clipped_samples: int
    events: list[PlacedEvent] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        return {"speech_to_noise_db": self.speech_to_noise_db,
                "speech_rms": round(self.speech_rms, 3), "noise_rms": round(self.noise_rms, 3),
                "clipped_samples": self.clipped_samples, "events": self.events}


def _rng(seed: int, *tags: int) -> np.random.Generator:
    return np.random.default_rng([seed % (1 << 63), *tags])


def _loop_segment(layer: np.ndarray, start: int, count: int) -> np.ndarray:
    """``count`` samples of ``layer`` looped, starting at ``start`` (any non-negative offset)."""
    length = layer.shape[0]
    begin = start % length
    if begin + count <= length:
        return layer[begin:begin + count]
    head = layer[begin:]
    repeats, tail = divmod(count - head.shape[0], length)
    return np.concatenate([head, *([layer] * repeats), layer[:tail]])


def _add_at(noise: np.ndarray, sound: np.ndarray, position: int, gain: float) -> tuple[int, int]:
    """Add ``sound * gain`` starting at ``position`` (may be negative), clipped to the buffer."""
    start = max(0, position)
    end = min(noise.shape[0], position + sound.shape[0])
    if end > start:
        noise[start:end] += sound[start - position:end - position] * gain
    return start, end


def mix(speech: PcmAudio, *, environment: PreparedEnvironment, seed: int, turn_number: int,
        stream_offset_seconds: float = 0.0) -> MixResult:
    """Mix the environment into one user turn's ``speech``.

    ``turn_number`` counts user turns from 1; ``stream_offset_seconds`` is where this turn starts
    on the trial's microphone timeline (the summed duration of earlier user turns).
    """
    if speech.sample_rate_hz != environment.sample_rate_hz:
        raise ValueError(f"speech at {speech.sample_rate_hz} Hz but environment prepared at "
                         f"{environment.sample_rate_hz} Hz")
    count = speech.num_samples
    config = environment.config
    if environment.is_silent or count == 0:
        rms = math.sqrt(_energy(speech.samples) / count) if count else 0.0
        return MixResult(speech, None, rms, 0.0, 0, [])

    rate = environment.sample_rate_hz
    offset = int(round(stream_offset_seconds * rate))
    impact = config.impact
    layers: list[tuple[np.ndarray, int, np.float32]] = []
    sounds: list[tuple[np.ndarray, int, float]] = []
    placed: list[PlacedEvent] = []

    for tag, layer, volume in ((_LAYER_BASE, environment.base_noise, config.base_noise_volume),
                               (_LAYER_VOICES, environment.background_voices,
                                config.background_voices_volume)):
        if layer is None or layer.shape[0] == 0 or volume == 0:
            continue
        phase = int(_rng(seed, tag).integers(0, layer.shape[0]))
        layers.append((layer, phase + offset, np.float32(volume * impact)))

    for index, (event, sound) in enumerate(zip(config.transient_events, environment.transients,
                                               strict=True)):
        length = sound.shape[0]
        gain = float(event.volume * impact)
        if length == 0 or gain == 0:
            continue
        if event.trigger_mode == "scheduled":
            position = int(round((event.at_seconds or 0.0) * rate)) - offset
            if position >= count or position + length <= 0:
                continue
        elif event.trigger_mode == "on_turn":
            if turn_number != event.on_turn_number:
                continue
            room = max(0, count - length)
            position = int(_rng(seed, _EVENT_TAG, index, turn_number).integers(0, room // 2 + 1))
        else:
            rng = _rng(seed, _EVENT_TAG, index, turn_number)
            if rng.random() >= event.probability:
                continue
            position = int(rng.integers(0, max(1, count)))
        start, end = max(0, position), min(count, position + length)
        sounds.append((sound, position, gain))
        placed.append({"index": index, "file": Path(event.type).name,
                       "trigger_mode": event.trigger_mode,
                       "offset_seconds": round(position / rate, 4),
                       "audible_seconds": round((end - start) / rate, 4),
                       "volume": event.volume, "gain": round(gain, 4)})

    mixed, stats = _render(speech.samples, layers, sounds)
    return MixResult(PcmAudio(mixed, rate), stats.snr_db, stats.speech_rms, stats.noise_rms,
                     stats.clipped, placed)


@dataclass(frozen=True)
class _MixStats:
    snr_db: float | None
    speech_rms: float
    noise_rms: float
    clipped: int


#: Samples per block of the rendering pass: a block's temporaries stay in the CPU cache, which
#: makes the pass several times faster than whole-buffer numpy expressions on long audio.
_BLOCK_SAMPLES = 1 << 15


def _energy(samples: np.ndarray) -> int:
    """The sum of squares of int16 ``samples``, exact, a block at a time (a turn as long as
    the time limit allows is never widened whole)."""
    total = 0
    for start in range(0, samples.shape[0], _BLOCK_SAMPLES):
        block = samples[start:start + _BLOCK_SAMPLES].astype(np.int64)
        total += int(np.dot(block, block))
    return total


def _render(speech: np.ndarray, layers: list[tuple[np.ndarray, int, np.float32]],
            sounds: list[tuple[np.ndarray, int, float]]) -> tuple[np.ndarray, _MixStats]:
    """Add the layers and placed sounds to int16 ``speech``, round, clip to PCM16, and measure.

    Per sample the float32 arithmetic is the same whatever the block size: layers in order, then
    sounds in order, then rounding. The delivered noise is ``mixed - speech`` (after rounding and
    clipping), measured over the samples where the speech is active (``|x| >
    SILENCE_THRESHOLD``; every sample if none is); its sums are exact integers, so the SNR does
    not depend on summation order.
    """
    count = speech.shape[0]
    mixed = np.empty(count, dtype=np.int16)
    clipped = active_count = 0
    speech_energy = noise_energy = noise_energy_all = 0
    for start in range(0, count, _BLOCK_SAMPLES):
        stop = min(count, start + _BLOCK_SAMPLES)
        size = stop - start
        noise = np.zeros(size, dtype=np.float32)
        for layer, layer_start, gain in layers:
            noise += _loop_segment(layer, layer_start + start, size) * gain
        for sound, position, sound_gain in sounds:
            _add_at(noise, sound, position - start, sound_gain)
        speech_block = speech[start:stop]
        noise += speech_block
        np.rint(noise, out=noise)
        np.clip(noise, PCM16_MIN, PCM16_MAX, out=noise)
        clipped += int(np.count_nonzero(noise == PCM16_MIN))
        clipped += int(np.count_nonzero(noise == PCM16_MAX))
        mixed[start:stop] = noise
        delivered = mixed[start:stop].astype(np.int64)
        delivered -= speech_block
        noise_energy_all += int(np.dot(delivered, delivered))
        active = (speech_block > SILENCE_THRESHOLD) | (speech_block < -SILENCE_THRESHOLD)
        active_speech = speech_block[active].astype(np.int64)
        active_count += active_speech.shape[0]
        speech_energy += int(np.dot(active_speech, active_speech))
        active_noise = delivered[active]
        noise_energy += int(np.dot(active_noise, active_noise))
    if active_count == 0:  # no speech above the threshold: measure over every sample
        speech_energy, noise_energy, active_count = _energy(speech), noise_energy_all, count
    speech_power = speech_energy / active_count
    noise_power = noise_energy / active_count
    snr_db = None
    if noise_power > 0 and speech_power > 0:
        snr_db = round(10.0 * math.log10(speech_power / noise_power), 3)
    return mixed, _MixStats(snr_db, math.sqrt(speech_power), math.sqrt(noise_energy_all / count),
                            clipped)
