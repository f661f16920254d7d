"""Signal analysis of one PCM channel: the seed's deterministic transport/PCM fields."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ._format import BYTES_PER_SAMPLE, CANONICAL_ENCODING, PCM16_MAX, PCM16_MIN, PcmAudio

SILENCE_THRESHOLD = 256
TRUNCATION_WINDOW_SECONDS = 0.010


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


def analyze_signal(audio: PcmAudio) -> SignalAnalysis:
    """Duration, silence ratio (|x| <= 256), peak, RMS, clipping ratio and possible truncation.

    ``possible_truncation`` is true when a sample in the final 10 ms is above the silence
    threshold: speech that ends mid-sound rather than fading to silence.
    """
    samples = audio.samples
    count = samples.shape[0]
    if count == 0:
        return SignalAnalysis(CANONICAL_ENCODING, audio.sample_rate_hz, 1, 0, 0.0, 1.0, 0, 0.0, 0.0,
                              False)
    wide = samples.astype(np.int32)
    magnitude = np.abs(wide)
    silent = int(np.count_nonzero(magnitude <= SILENCE_THRESHOLD))
    clipped = int(np.count_nonzero((samples == PCM16_MIN) | (samples == PCM16_MAX)))
    floats = samples.astype(np.float64)
    rms = float(np.sqrt(np.dot(floats, floats) / count))
    tail = max(1, int(round(TRUNCATION_WINDOW_SECONDS * audio.sample_rate_hz)))
    truncated = bool(np.any(magnitude[-tail:] > SILENCE_THRESHOLD))
    return SignalAnalysis(
        encoding=CANONICAL_ENCODING,
        sample_rate_hz=audio.sample_rate_hz,
        channels=1,
        byte_count=count * BYTES_PER_SAMPLE,
        duration_seconds=round(count / audio.sample_rate_hz, 6),
        silence_ratio=round(silent / count, 6),
        peak_amplitude=int(magnitude.max()),
        rms_amplitude=round(rms, 3),
        clipped_sample_ratio=round(clipped / count, 6),
        possible_truncation=truncated,
    )
