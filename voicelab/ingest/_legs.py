"""Where one leg of a recorded call carries speech.

The detector is the one the metrics use on the product's channel (energy voice activity in
10 ms frames, pauses under 100 ms inside a segment, edges moved out to the sound a listener
hears), held to what a recorded leg is: noise from its first sample to its last.

* A leg that carries noise throughout (a phone line) has a **noise floor**, the 5th percentile
  of its 50 ms levels: a frame counts as speech only when it is :data:`VOICED_DB` above it.
  The detector alone learns its floor as it goes, so a leg that opens with a moment of digital
  silence before the line's hum would take the hum for speech until a second has passed. A
  gated leg (digital silence between its sounds: a synthesized voice) has none.
* A segment's **edges** follow the sound outward to the first and last audible sample: above
  the silence threshold the metrics use on a gated leg, above the leg's own noise (twice the
  99th percentile of its samples outside speech) on a leg with a floor.
* Silences shorter than :data:`MIN_PAUSE_MS` are between words: part of the speech.
"""

from __future__ import annotations

import numpy as np

from ..audio import SILENCE_THRESHOLD, PcmAudio, audible_edges, detect_speech
from ..metrics import SEGMENT_GAP_MS

#: A silence inside a leg's speech shorter than this is part of the speech (between words),
#: not a pause.
MIN_PAUSE_MS = 200
#: A leg with more digital silence than this is gated: it has no noise floor of its own.
GATED_SHARE = 0.05
#: A 10 ms frame is speech this far above the leg's noise floor (the detector's own threshold).
VOICED_DB = 12.0

Span = tuple[int, int]  # [first sample, end sample) on the call's timeline


def _levels_dbfs(samples: np.ndarray, frame: int) -> np.ndarray:
    """Each whole frame's level (its variance: a DC offset is no sound), dBFS; -inf: silence."""
    count = samples.shape[0] // frame
    power = samples[:count * frame].astype(np.float64).reshape(count, frame).var(axis=1)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(power / 32768.0 ** 2)


def noise_floor_dbfs(audio: PcmAudio) -> float | None:
    """The leg's noise floor: the 5th percentile of its 50 ms levels, digital silence left out.
    None for a gated leg (more than :data:`GATED_SHARE` of it digital silence: a synthesized
    voice, a line that sends nothing between turns), whose quietest sounds are speech."""
    levels = _levels_dbfs(audio.samples, audio.sample_rate_hz // 20)
    heard = levels[np.isfinite(levels)]
    if not heard.size or heard.size < (1.0 - GATED_SHARE) * levels.size:
        return None
    return float(np.percentile(heard, 5))


def _held_to_floor(audio: PcmAudio, found: list[Span], floor_dbfs: float | None) -> list[Span]:
    """Each detected segment trimmed to its first and last frame above the leg's floor."""
    if floor_dbfs is None:
        return found
    frame = audio.sample_rate_hz // 100
    voiced = _levels_dbfs(audio.samples, frame) > floor_dbfs + VOICED_DB
    held = []
    for start, end in found:
        inside = np.flatnonzero(voiced[start // frame:-(-end // frame)])
        if inside.size:
            first = (start // frame + int(inside[0])) * frame
            held.append((max(start, first),
                         min(end, (start // frame + int(inside[-1]) + 1) * frame)))
    return held


def _noise_magnitude(samples: np.ndarray, speech: list[Span]) -> int:
    outside = np.ones(samples.shape[0], dtype=bool)
    for start, end in speech:
        outside[start:end] = False
    if not outside.any():
        return SILENCE_THRESHOLD
    return max(SILENCE_THRESHOLD,
               2 * int(np.percentile(np.abs(samples[outside].astype(np.int32)), 99)))


def leg_speech(audio: PcmAudio) -> list[Span]:
    """The speech segments of one leg, samples (see the module docstring)."""
    samples = audio.samples
    found = [(b.start_sample, b.end_sample)
             for b in detect_speech(audio, hangover_ms=SEGMENT_GAP_MS)]
    floor = noise_floor_dbfs(audio)
    held = _held_to_floor(audio, found, floor)
    threshold = SILENCE_THRESHOLD if floor is None else _noise_magnitude(samples, held)
    bridge = audio.sample_rate_hz * MIN_PAUSE_MS // 1000
    segments: list[Span] = []
    for index, (start, end) in enumerate(held):
        low = segments[-1][1] if segments else 0
        high = held[index + 1][0] if index + 1 < len(held) else samples.shape[0]
        start, end = audible_edges(samples, start, end, low=low, high=high,
                                   sample_rate_hz=audio.sample_rate_hz, threshold=threshold)
        if end <= start:
            continue
        if segments and start - segments[-1][1] < bridge:
            segments[-1] = (segments[-1][0], end)
        else:
            segments.append((start, end))
    return segments
