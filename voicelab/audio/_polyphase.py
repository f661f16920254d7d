"""Integer-ratio FIR resampling with a fixed latency, for the channel model's packet clock.

A live line needs every packet of input to come out as exactly one packet of output, with a
constant delay. soxr (the :class:`StreamingResampler`) releases output in blocks of tens of
milliseconds, which would add a variable, rate-dependent delay to every channel; the channel's
rates are all integer ratios of the canonical 24 kHz (8 kHz for G.711, 48 kHz for full-band
Opus), so a linear-phase FIR, applied polyphase with ``scipy.signal.upfirdn``, does the job with
a latency of half its length and a count of output samples fixed by the input.
"""

from __future__ import annotations

import math

import numpy as np


def kaiser_lowpass(*, passband_hz: float, stopband_hz: float, sample_rate_hz: float,
                   attenuation_db: float = 70.0, delay_multiple: int = 1) -> np.ndarray:
    """Linear-phase lowpass taps (Kaiser-windowed sinc), odd length, unit DC gain.

    ``passband_hz`` to ``stopband_hz`` is the transition band; the stopband is attenuated by at
    least ``attenuation_db`` (Kaiser's design formulas). The group delay, ``(len - 1) / 2``
    samples, is rounded up to a multiple of ``delay_multiple`` (the resampling factor, so the
    delay is a whole number of samples at the lower rate too).
    """
    transition = 2.0 * math.pi * (stopband_hz - passband_hz) / sample_rate_hz
    minimum = int(math.ceil((attenuation_db - 7.95) / (2.285 * transition))) + 1
    half = -(-(minimum - 1) // (2 * delay_multiple)) * delay_multiple
    count = 2 * half + 1
    beta = 0.1102 * (attenuation_db - 8.7)
    cutoff = 0.5 * (passband_hz + stopband_hz) / sample_rate_hz  # cycles per sample
    offsets = np.arange(count) - (count - 1) / 2.0
    taps = 2.0 * cutoff * np.sinc(2.0 * cutoff * offsets) * np.kaiser(count, beta)
    return taps / taps.sum()


class FixedLatencyResampler:
    """Resample by ``up`` (interpolation) or ``down`` (decimation), one of them 1, streaming.

    ``taps`` are designed at the higher of the two rates. Each call returns exactly
    ``len(input) * up // down`` samples (input not yet a multiple of ``down`` waits for the next
    call), delayed by :attr:`latency_samples` output samples; the output does not depend on how
    the input was chunked.
    """

    def __init__(self, *, up: int = 1, down: int = 1, taps: np.ndarray):
        if min(up, down) != 1 or max(up, down) < 1:
            raise ValueError(f"one of up/down must be 1, got up={up}, down={down}")
        if (len(taps) - 1) % (2 * max(up, down)):
            raise ValueError("the taps' group delay must be a whole number of low-rate samples")
        self.up = up
        self.down = down
        self._taps = np.asarray(taps, dtype=np.float64) * up  # interpolation keeps the level
        # input history that every new output's window can reach back into, whole blocks of down
        reach = -(-(len(self._taps) - 1) // up)
        self._history = np.zeros(-(-reach // down) * down)
        self._pending = np.zeros(0)
        #: the group delay, in output samples: (taps - 1) / 2 at the high rate
        self.latency_samples = (len(self._taps) - 1) // 2 // down

    def process(self, samples: np.ndarray) -> np.ndarray:
        from scipy.signal import upfirdn  # scipy is a core dependency; loaded on first use

        if self._pending.size:
            samples = np.concatenate([self._pending, samples])
        usable = samples.shape[0] - samples.shape[0] % self.down
        self._pending = samples[usable:]
        if usable == 0:
            return np.zeros(0)
        buffer = np.concatenate([self._history, samples[:usable]])
        output = upfirdn(self._taps, buffer, self.up, self.down)
        start = self._history.shape[0] * self.up // self.down
        self._history = buffer[buffer.shape[0] - self._history.shape[0]:]
        return output[start:start + usable * self.up // self.down]
