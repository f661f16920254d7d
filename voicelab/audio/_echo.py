"""A speakerphone's echo: the product's voice as the user heard it, leaking back into the line.

The echo path is a seeded room impulse response (RIR) scaled by the echo return loss (ERL):

* **Room impulse response** (:func:`room_impulse_response`): a direct path (one unit tap at
  0 ms) plus a reverberant tail of Gaussian noise under an exponential envelope that decays by
  60 dB in ``rt60_ms`` (amplitude ``exp(-ln(1000) t / rt60)``), with as much energy as the
  direct path, normalized to unit energy (the room colours and smears the sound without
  changing its power); then low-passed at ``lowpass_hz`` (a 4th-order Butterworth, causal,
  ``scipy.signal``, unity gain in its pass band: a speakerphone's band). It is ``rt60_ms`` long
  (the tail beyond it is below -60 dB). The noise comes from ``numpy.random.default_rng(seed)``:
  the same seed gives the same room, byte for byte.
* **Echo return loss**: the response is multiplied by ``10 ** (-echo_return_loss_db / 20)``, so
  the echo's power is ``echo_return_loss_db`` below the heard signal's for sound inside the
  band (speech); what lies above ``lowpass_hz`` comes back weaker still.
* **Streaming** (:class:`EchoPath`): the heard signal is convolved block by block (overlap-add
  through the FFT, ``numpy.fft.rfft``): feeding a signal in blocks of any size gives the same
  samples, up to float rounding, as one convolution of the whole signal (``scipy.signal
  .fftconvolve``), and every output sample depends only on input up to it (causal).

The delay (``delay_ms``) is applied by whoever places the echo on the line (see
``voicelab.runner``); this module only shapes the sound.
"""

from __future__ import annotations

import math

import numpy as np

from ._format import CANONICAL_SAMPLE_RATE_HZ, PCM16_MAX, PCM16_MIN

#: ln(1000): an amplitude envelope exp(-DECAY_60_DB t / rt60) is 60 dB down at rt60
DECAY_60_DB = math.log(1000.0)
LOWPASS_ORDER = 4


def room_impulse_response(*, rt60_ms: float, lowpass_hz: float, seed: int,
                          sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> np.ndarray:
    """A room impulse response (float64, unit energy before its low-pass), ``rt60_ms`` long;
    see the module docstring for the model."""
    from scipy.signal import butter, sosfilt

    if not rt60_ms > 0:
        raise ValueError(f"rt60_ms must be > 0, got {rt60_ms!r}")
    if not 0 < lowpass_hz < sample_rate_hz / 2:
        raise ValueError(f"lowpass_hz must be between 0 and {sample_rate_hz / 2:g} Hz, "
                         f"got {lowpass_hz!r}")
    length = max(2, int(round(rt60_ms * sample_rate_hz / 1000.0)))
    seconds = np.arange(length) / sample_rate_hz
    envelope = np.exp(-DECAY_60_DB * seconds / (rt60_ms / 1000.0))
    tail = np.random.default_rng(seed).standard_normal(length) * envelope
    tail[0] = 0.0
    tail *= 1.0 / math.sqrt(float(np.dot(tail, tail)))  # as much energy as the direct path
    response = tail
    response[0] = 1.0
    response /= math.sqrt(float(np.dot(response, response)))  # the room: unit energy
    sos = butter(LOWPASS_ORDER, lowpass_hz, btype="low", fs=sample_rate_hz, output="sos")
    return sosfilt(sos, response)  # unity gain in the pass band


class EchoPath:
    """Streaming convolution of the heard signal with ``impulse`` (overlap-add, causal).

    ``process(block)`` takes the next samples of the heard signal (any length, int16 or float)
    and returns as many samples of its echo (float64, before rounding).
    """

    def __init__(self, impulse: np.ndarray):
        impulse = np.asarray(impulse, dtype=np.float64)
        if impulse.ndim != 1 or impulse.shape[0] == 0 or not np.all(np.isfinite(impulse)):
            raise ValueError("the impulse response must be a non-empty finite 1-D array")
        self.impulse = impulse
        self._carry = np.zeros(impulse.shape[0] - 1)  # the tail still to add to coming samples
        self._spectra: dict[int, np.ndarray] = {}
        self.samples_in = 0

    @classmethod
    def speakerphone(cls, *, rt60_ms: float, lowpass_hz: float, echo_return_loss_db: float,
                     seed: int, sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> EchoPath:
        impulse = room_impulse_response(rt60_ms=rt60_ms, lowpass_hz=lowpass_hz, seed=seed,
                                        sample_rate_hz=sample_rate_hz)
        return cls(impulse * 10.0 ** (-echo_return_loss_db / 20.0))

    def _spectrum(self, size: int) -> np.ndarray:
        spectrum = self._spectra.get(size)
        if spectrum is None:
            spectrum = self._spectra[size] = np.fft.rfft(self.impulse, size)
        return spectrum

    def process(self, block: np.ndarray) -> np.ndarray:
        block = np.asarray(block, dtype=np.float64)
        count = block.shape[0]
        if count == 0:
            return np.zeros(0)
        self.samples_in += count
        full = count + self.impulse.shape[0] - 1
        size = 1 << (full - 1).bit_length()
        convolved = np.fft.irfft(np.fft.rfft(block, size) * self._spectrum(size), size)[:full]
        carry = self._carry
        convolved[:carry.shape[0]] += carry
        self._carry = convolved[count:].copy()
        return convolved[:count]


def add_echo(frame: np.ndarray, echo: np.ndarray) -> np.ndarray:
    """``frame`` (int16) with ``echo`` added, rounded and clipped to PCM16."""
    mixed = np.rint(frame.astype(np.float64) + echo)
    return np.clip(mixed, PCM16_MIN, PCM16_MAX).astype(np.int16)
