"""Signal analysis of one PCM channel: the seed's deterministic transport/PCM fields."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ._format import (
    BYTES_PER_SAMPLE,
    CANONICAL_ENCODING,
    CANONICAL_SAMPLE_RATE_HZ,
    PCM16_MAX,
    PCM16_MIN,
    PcmAudio,
)

SILENCE_THRESHOLD = 256
TRUNCATION_WINDOW_SECONDS = 0.010
#: Quiet stretches shorter than this inside a sound (a waveform's zero crossings, a plosive's
#: closure) do not end it: what ``audible_edges`` bridges.
AUDIBLE_BRIDGE_SECONDS = 0.010
_BLOCK_SAMPLES = 1 << 16


@dataclass(frozen=True, slots=True)
class SignalAnalysis:
    encoding: str
    sample_rate_hz: int
    channels: int
    byte_count: int
    duration_seconds: float
    silence_ratio: float
    peak_amplitude: int
    rms_amplitude: float
    clipped_sample_ratio: float
    possible_truncation: bool

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Sums:
    """Additive totals of a stretch of samples (what the analysis is computed from)."""

    count: int = 0
    silent: int = 0
    clipped: int = 0
    peak: int = 0
    energy: int = 0

    def __add__(self, other: _Sums) -> _Sums:
        return _Sums(self.count + other.count, self.silent + other.silent,
                     self.clipped + other.clipped, max(self.peak, other.peak),
                     self.energy + other.energy)


def _sums(samples: np.ndarray) -> _Sums:
    count = samples.shape[0]
    silent = clipped = peak = energy = 0
    # Block by block: the temporaries stay in the CPU cache and no buffer the size of the input
    # is allocated, which keeps long recordings fast even on a cold process.
    for start in range(0, count, _BLOCK_SAMPLES):
        block = samples[start:start + _BLOCK_SAMPLES]
        low, high = int(block.min()), int(block.max())
        peak = max(peak, -low, high)
        # |x| <= 256 in one comparison: x + 256 wraps into 0..512 exactly for those samples
        shifted = (block + np.int16(SILENCE_THRESHOLD)).view(np.uint16)
        silent += int(np.count_nonzero(shifted <= 2 * SILENCE_THRESHOLD))
        if low == PCM16_MIN:
            clipped += int(np.count_nonzero(block == PCM16_MIN))
        if high == PCM16_MAX:
            clipped += int(np.count_nonzero(block == PCM16_MAX))
        # exact integer energy; not a float dot product, which would go through BLAS, whose
        # worker threads then spin on the other core for milliseconds after every call
        wide = block.astype(np.int64)
        energy += int(np.einsum("i,i->", wide, wide))
    return _Sums(count, silent, clipped, peak, energy)


def _tail_sounds(samples: np.ndarray) -> bool:
    return bool(np.any((samples > SILENCE_THRESHOLD) | (samples < -SILENCE_THRESHOLD)))


def _analysis(sums: _Sums, sample_rate_hz: int, truncated: bool) -> SignalAnalysis:
    count = sums.count
    if count == 0:
        return SignalAnalysis(CANONICAL_ENCODING, sample_rate_hz, 1, 0, 0.0, 1.0, 0, 0.0, 0.0,
                              False)
    return SignalAnalysis(
        encoding=CANONICAL_ENCODING,
        sample_rate_hz=sample_rate_hz,
        channels=1,
        byte_count=count * BYTES_PER_SAMPLE,
        duration_seconds=round(count / sample_rate_hz, 6),
        silence_ratio=round(sums.silent / count, 6),
        peak_amplitude=sums.peak,
        rms_amplitude=round(math.sqrt(sums.energy / count), 3),
        clipped_sample_ratio=round(sums.clipped / count, 6),
        possible_truncation=truncated,
    )


def _tail_samples(sample_rate_hz: int) -> int:
    return max(1, int(round(TRUNCATION_WINDOW_SECONDS * sample_rate_hz)))


def analyze_signal(audio: PcmAudio) -> SignalAnalysis:
    """Duration, silence ratio (|x| <= 256), peak, RMS, clipping ratio and possible truncation.

    ``possible_truncation`` is true when a sample in the final 10 ms is above the silence
    threshold: speech that ends mid-sound rather than fading to silence.
    """
    samples = audio.samples
    truncated = samples.shape[0] > 0 and _tail_sounds(samples[-_tail_samples(audio.sample_rate_hz):])
    return _analysis(_sums(samples), audio.sample_rate_hz, truncated)


def analyze_signals(parts: Sequence[PcmAudio], *, sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ
                    ) -> tuple[list[SignalAnalysis], SignalAnalysis]:
    """The analysis of each part and of the parts played one after another, in one pass over
    the audio (what ``analyze_signal`` of the concatenation returns, without concatenating)."""
    if any(part.sample_rate_hz != sample_rate_hz for part in parts):
        raise ValueError(f"analyze_signals needs {sample_rate_hz} Hz parts")
    tail = _tail_samples(sample_rate_hz)
    each, total = [], _Sums()
    for part in parts:
        sums = _sums(part.samples)
        total += sums
        ending = part.samples[-tail:]
        each.append(_analysis(sums, sample_rate_hz, sums.count > 0 and _tail_sounds(ending)))
    # the concatenation's final 10 ms may span several short parts
    needed, pieces = tail, []
    for part in reversed(parts):
        if needed <= 0:
            break
        pieces.append(part.samples[-needed:])
        needed -= min(needed, part.samples.shape[0])
    truncated = any(_tail_sounds(piece) for piece in pieces if piece.shape[0])
    return each, _analysis(total, sample_rate_hz, truncated)


def audible_edges(samples: np.ndarray, start: int, end: int, *, low: int = 0,
                  high: int | None = None, sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ,
                  threshold: int = SILENCE_THRESHOLD) -> tuple[int, int]:
    """A detected sound ``[start, end)`` moved to the edges a listener hears: its first and
    last samples above ``threshold`` (the silence threshold, -42 dBFS), following the sound
    out from the detected edges across quiet gaps shorter than ``AUDIBLE_BRIDGE_SECONDS`` (a
    quiet attack before a detector's onset frame, a fade-out after its offset), never beyond
    ``low`` and ``high``. An edge with no audible sample near it stays where it was."""
    high = samples.shape[0] if high is None else min(high, samples.shape[0])
    low = max(0, low)
    bridge = max(1, int(round(AUDIBLE_BRIDGE_SECONDS * sample_rate_hz)))
    return (_first_audible(samples, start, low=low, bridge=bridge, threshold=threshold),
            _last_audible(samples, end, high=high, bridge=bridge, threshold=threshold))


def _first_audible(samples: np.ndarray, start: int, *, low: int, bridge: int,
                   threshold: int) -> int:
    begin = max(low, start - 50 * bridge)  # far enough back for any attack
    window = np.abs(samples[begin:start + bridge].astype(np.int32))
    loud = np.flatnonzero(window > threshold)
    anchor = np.searchsorted(loud, start - begin)  # the first audible sample at the onset
    if anchor >= loud.size:
        return start
    chain = loud[:anchor + 1]
    breaks = np.flatnonzero(np.diff(chain) > bridge)
    return begin + int(chain[breaks[-1] + 1] if breaks.size else chain[0])


def _last_audible(samples: np.ndarray, end: int, *, high: int, bridge: int,
                  threshold: int) -> int:
    begin = max(0, end - bridge)
    window = np.abs(samples[begin:min(high, end + 50 * bridge)].astype(np.int32))
    loud = np.flatnonzero(window > threshold)
    anchor = np.searchsorted(loud, end - begin, side="left") - 1  # the last one before the end
    if anchor < 0:
        return end
    chain = loud[anchor:]
    breaks = np.flatnonzero(np.diff(chain) > bridge)
    return begin + int(chain[breaks[0]] if breaks.size else chain[-1]) + 1


#: The telephone voice band (ITU-T G.712): what an 8 kHz phone line carries of a voice.
TELEPHONE_BAND_HZ = (300.0, 3400.0)
#: Transition width of the band's edges (Hz) and stopband attenuation (dB) of its filter: a
#: linear-phase FIR whose ringing stays within a few tens of ms of a sound (a brick-wall cut
#: rings into a pause for hundreds of ms above the silence threshold).
_BAND_TRANSITION_HZ = (100.0, 400.0)
_BAND_ATTENUATION_DB = 60.0


def telephone_band(samples: np.ndarray, *, sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ
                   ) -> np.ndarray:
    """``samples`` as an 8 kHz phone line carries them: only the telephone band
    (:data:`TELEPHONE_BAND_HZ`), as float samples, aligned with the input (a linear-phase
    Kaiser-windowed band-pass). A speech edge whose energy lies outside the band (a fricative's
    hiss, a low onset) falls silent, so a pause between words is longer on the line than in
    the wideband audio."""
    from ._polyphase import kaiser_lowpass

    low, high = TELEPHONE_BAND_HZ
    below, above = _BAND_TRANSITION_HZ
    upper = kaiser_lowpass(passband_hz=high, stopband_hz=high + above,
                           sample_rate_hz=sample_rate_hz, attenuation_db=_BAND_ATTENUATION_DB)
    lower = kaiser_lowpass(passband_hz=low - below, stopband_hz=low,
                           sample_rate_hz=sample_rate_hz, attenuation_db=_BAND_ATTENUATION_DB)
    size = max(upper.size, lower.size)  # both odd: centre the shorter in the longer
    taps = np.pad(upper, (size - upper.size) // 2) - np.pad(lower, (size - lower.size) // 2)
    count = samples.shape[0]
    if count == 0:
        return samples.astype(np.float64)
    length = 1 << int(count + size - 1).bit_length()
    filtered = np.fft.irfft(np.fft.rfft(samples.astype(np.float64), length)
                            * np.fft.rfft(taps, length), length)
    delay = (size - 1) // 2
    return filtered[delay:delay + count]


def silence_around(samples: np.ndarray, at: int, *, threshold: float = SILENCE_THRESHOLD
                   ) -> tuple[int, int] | None:
    """The silent run (every sample at most ``threshold``) that holds sample ``at``: its first
    sample and the sample after its last; ``None`` when ``at`` itself is audible (or outside
    the samples)."""
    if not 0 <= at < samples.shape[0]:
        return None
    loud = np.abs(samples) > threshold
    if loud[at]:
        return None
    before = np.flatnonzero(loud[:at])
    after = np.flatnonzero(loud[at:])
    return (int(before[-1]) + 1 if before.size else 0,
            at + int(after[0]) if after.size else samples.shape[0])

