"""Deterministic tone speech: word-like tone bursts that stand in for a voice in transport tests.

The output is a function of ``(text, seed)`` only (and the sample rate), so two trials with the
same seed send byte-identical audio and a regression is never noise in the test input.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np

from ._format import CANONICAL_SAMPLE_RATE_HZ, PcmAudio

_WORD = re.compile(r"[\w']+|[.,;:!?]")
# Sentence pauses stay below the 300 ms dead-air threshold (with the word gap), as fluent speech does.
_PAUSE_AFTER = {",": 0.1, ";": 0.14, ":": 0.14, ".": 0.18, "!": 0.18, "?": 0.18}

#: One period of the voice's waveform (fundamental and three harmonics), read by phase: ten
#: times cheaper than four sines per sample, within 0.3 % of them.
_TABLE_SIZE = 8192
_GRID = np.arange(_TABLE_SIZE) * (2.0 * np.pi / _TABLE_SIZE)
_WAVE_TABLE = (np.sin(_GRID) + 0.45 * np.sin(2 * _GRID) + 0.22 * np.sin(3 * _GRID)
               + 0.1 * np.sin(4 * _GRID))

PEAK_FRACTION = 0.42  # of full scale: well below clipping even with environment noise on top
WORD_GAP_SECONDS = 0.07
EDGE_SECONDS = 0.012
LEAD_SECONDS = 0.04


def _stable_seed(text: str, seed: int) -> int:
    digest = hashlib.sha256(f"{seed}\x00{text}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def tone_speech(text: str, *, seed: int, sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ,
                rate: float = 1.0, pitch: float = 1.0) -> PcmAudio:
    """Render ``text`` as tone bursts (memoized: the result is a pure function of its inputs).
    ``rate`` and ``pitch`` multiply the speaking rate (words and pauses get shorter) and the
    voice's pitch."""
    return _tone_speech(text, seed, sample_rate_hz, rate, pitch)


#: Renders kept: enough for the few texts every trial repeats (a double's replies stay hot);
#: each trial's own seeded speech is new, so a bigger cache only grew every worker's memory
#: with the trials it ran (~170 kB each, ~43 MB at 256).
TONE_CACHE_ENTRIES = 32


@lru_cache(maxsize=TONE_CACHE_ENTRIES)
def _tone_speech(text: str, seed: int, sample_rate_hz: int, rate: float = 1.0,
                 pitch_factor: float = 1.0) -> PcmAudio:
    """Render ``text`` as tone bursts, one per word, with gaps and soft edges.

    Duration grows with the text (about 0.08 s plus 55 ms a letter per word); punctuation adds
    pauses; the voice's base pitch is chosen by the seed. Each burst is a few whole-array
    operations (phase in closed form, waveform and envelope read from tables): a trial's
    speech costs well under a millisecond.
    """
    rng = np.random.default_rng(_stable_seed(text, seed))
    voice_rng = np.random.default_rng(_stable_seed("voice", seed))
    base_pitch_hz = float(voice_rng.uniform(105.0, 230.0)) * pitch_factor
    peak = PEAK_FRACTION * 32767.0

    bursts, position = _layout(text, sample_rate_hz, rate)
    out = np.zeros(position, dtype=np.float32)
    for start, duration, count in bursts:
        k = _sample_numbers(count)
        pitch = base_pitch_hz * float(rng.uniform(0.85, 1.2))
        glide = float(rng.uniform(-0.12, 0.12))
        # phase in table steps: the running sum of pitch * (1 + glide * t / duration) / rate,
        # (k + 1) * (step + step * curve / 2 * k), computed in place
        step = pitch * _TABLE_SIZE / sample_rate_hz
        curve = glide / (duration * sample_rate_hz)
        phase = k * (0.5 * step * curve)
        phase += step
        phase *= _sample_numbers(count, 1.0)
        wave = _WAVE_TABLE[_table_index(phase)]
        syllable_rate_hz = float(rng.uniform(3.5, 5.5))
        # envelope 0.65 + 0.35 * |sin(pi * syllable rate * t)|, |sin| read from a table
        envelope = _ENVELOPE_TABLE[_table_index(
            np.multiply(k, syllable_rate_hz * _TABLE_SIZE / sample_rate_hz, out=phase))]
        edge = min(int(EDGE_SECONDS * sample_rate_hz), count // 2)
        if edge > 0:
            ramp = _ramp(edge)
            envelope[:edge] *= ramp
            envelope[-edge:] *= ramp[::-1]
        wave *= envelope
        loudest = max(float(wave.max()), -float(wave.min()))
        wave *= peak / max(1e-9, loudest)
        out[start:start + count] = wave
    samples = np.rint(out, out=out).astype(np.int16)
    samples.flags.writeable = False  # shared by the cache: nobody may change it in place
    return PcmAudio(samples, sample_rate_hz)


def _layout(text: str, sample_rate_hz: int, rate: float
            ) -> tuple[list[tuple[int, float, int]], int]:
    """Where ``text``'s word bursts go: (first sample, duration, sample count) of each, and the
    length of the whole rendering (samples). Pure arithmetic: the length of a text's tone speech
    is known without rendering it."""
    tokens = _WORD.findall(text)
    bursts: list[tuple[int, float, int]] = []
    position = int(LEAD_SECONDS * sample_rate_hz)
    for token in tokens:
        if token in _PAUSE_AFTER:
            position += int(_PAUSE_AFTER[token] / rate * sample_rate_hz)
            continue
        duration = min(0.9, 0.08 + 0.055 * len(token)) / rate
        count = int(duration * sample_rate_hz)
        bursts.append((position, duration, count))
        position += count + int(WORD_GAP_SECONDS / rate * sample_rate_hz)
    if not tokens:
        position += int(0.2 * sample_rate_hz)
    return bursts, position


def tone_speech_seconds(text: str, *, rate: float = 1.0,
                        sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> tuple[float, float]:
    """How long :func:`tone_speech` of ``text`` at ``rate`` lasts, without rendering it: the
    whole rendering, and its sound from the first word's start to the last word's end (what a
    hesitation turn keeps of a piece, less the soft edges: ``EDGE_SECONDS`` at each end may fall
    below the silence threshold). Both shorten as ``rate`` grows."""
    bursts, total = _layout(text, sample_rate_hz, rate)
    if not bursts:
        return total / sample_rate_hz, 0.0
    first, (last, _, count) = bursts[0][0], bursts[-1]
    return total / sample_rate_hz, (last + count - first) / sample_rate_hz


def _table_index(phase: np.ndarray) -> np.ndarray:
    """Table positions of ``phase`` (in table steps, >= 0): its whole part, modulo the size."""
    index = phase.astype(np.int64)
    index &= _TABLE_SIZE - 1
    return index


#: 0.65 + 0.35 * |sin|, one period of |sin| (half a sine period) per table.
_ENVELOPE_TABLE = 0.65 + 0.35 * np.abs(np.sin(np.arange(_TABLE_SIZE) * (np.pi / _TABLE_SIZE)))


@lru_cache(maxsize=128)
def _sample_numbers(count: int, first: float = 0.0) -> np.ndarray:
    """``first, first + 1, ... `` (``count`` of them), read-only."""
    numbers = np.arange(count, dtype=np.float64)
    if first:
        numbers += first
    numbers.flags.writeable = False
    return numbers


@lru_cache(maxsize=8)
def _ramp(edge: int) -> np.ndarray:
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, edge))
    ramp.flags.writeable = False
    return ramp
