"""The audio the speech metrics analyse: float samples at ``METRIC_SAMPLE_RATE_HZ`` (16 kHz),
the rate DNSMOS, STOI, PESQ and the product-voice analysis expect."""

from __future__ import annotations

import numpy as np

from ..audio import PcmAudio

METRIC_SAMPLE_RATE_HZ = 16_000


def float_16k(audio: PcmAudio) -> np.ndarray:
    """``audio`` as float32 in [-1, 1) at 16 kHz."""
    floats = audio.samples.astype(np.float32) / 32768.0
    if audio.sample_rate_hz == METRIC_SAMPLE_RATE_HZ or floats.size == 0:
        return floats
    import soxr

    resampled = soxr.resample(floats, audio.sample_rate_hz, METRIC_SAMPLE_RATE_HZ, quality="HQ")
    return np.clip(resampled, -1.0, 32767.0 / 32768.0).astype(np.float32)
