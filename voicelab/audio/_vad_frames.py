"""The frame judges of :mod:`._vad`: each 10 ms frame's energy, and whether it is voiced, by
the energy backend (a level over an adaptive noise floor) or by webrtc's VAD (on the stream
decimated to 8 kHz, gated by level). :class:`._vad.StreamingVad` turns their decisions into
speech segments; the backends themselves are described there.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import MissingDependencyError

FRAME_MS = 10
NOISE_SMOOTHING_MS = 50
WEBRTC_PACKAGE = "webrtcvad-wheels"
WEBRTC_SAMPLE_RATE_HZ = 8_000
_FULL_SCALE = 32768.0


def whole_frames(duration_ms: float, *, at_least: int) -> int:
    # rounded up (never confirm before the stated duration); the epsilon absorbs ms values such
    # as 0.7 * 1000 that are a hair above a whole frame count in binary
    return max(at_least, math.ceil(duration_ms / FRAME_MS - 1e-9))


NO_FRAMES = np.zeros(0)


_NO_DECISIONS = np.zeros(0, dtype=bool)


def _einsum_row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b)


# squared norm of each row; np.vecdot (numpy >= 2) is the cheapest per call
_row_dot: Callable[[np.ndarray, np.ndarray], np.ndarray] = (
    np.vecdot if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else _einsum_row_dot)


class FrameEnergies:
    """Cuts a stream into frames and measures each: ``F * sum(x**2) - sum(x)**2``, which is F**2
    times the frame's mean-removed mean square. Every term is an integer below 2**47 at 24 kHz
    (2**51 at the highest rate taken, 192 kHz), exact in float64 whatever the summation order,
    so the result does not depend on chunking."""

    def __init__(self, frame_samples: int):
        self._frame = frame_samples
        self._ones = np.ones(frame_samples)
        self._pending = np.zeros(0, dtype=np.int16)

    def energy_for_dbfs(self, level_dbfs: float) -> float:
        return self._frame ** 2 * _FULL_SCALE ** 2 * 10.0 ** (level_dbfs / 10)

    def process(self, samples: np.ndarray) -> np.ndarray:
        if self._pending.shape[0]:
            samples = np.concatenate([self._pending, samples])
        count = samples.shape[0] // self._frame
        usable = count * self._frame
        self._pending = samples[usable:].copy()
        if count == 0:
            return NO_FRAMES
        wide = samples[:usable].astype(np.float64).reshape(count, self._frame)
        sums = wide @ self._ones
        return self._frame * _row_dot(wide, wide) - sums * sums


class EnergyFrames:
    """Frame decisions of the energy backend: adaptive noise floor, thresholds in dB.

    Frame energies and their running means live in preallocated buffers: a chunk's frames are
    written after the history they need (moved to the front now and then), so a push costs a
    fixed handful of numpy calls whatever its size. All arithmetic before the final comparison
    is on integers held exactly in float64 (or their minimum), so no result depends on chunking.
    """

    decision_delay_samples = 0
    _CAPACITY_FRAMES = 4096  # 41 s of frames between moves of the history

    def __init__(self, *, frame_samples: int, threshold_db: float, min_level_dbfs: float,
                 noise_window_ms: float, initial_floor_dbfs: float | None):
        from scipy.ndimage import minimum_filter1d  # core dependency, loaded on first use

        self._minimum_filter = minimum_filter1d
        self._energies = FrameEnergies(frame_samples)
        self._min_energy = self._energies.energy_for_dbfs(min_level_dbfs)
        self._ratio = 10.0 ** (threshold_db / 10)
        self._smoothing = NOISE_SMOOTHING_MS // FRAME_MS
        self._window = whole_frames(noise_window_ms, at_least=1)
        # the floor before the stream's first frame: nothing (inf), or the assumed level
        self._before_stream = (np.inf if initial_floor_dbfs is None
                               else self._energies.energy_for_dbfs(initial_floor_dbfs))
        self._energy = np.zeros(self._CAPACITY_FRAMES)
        self._smoothed = np.zeros(self._CAPACITY_FRAMES)
        # the buffers start with one smoothing span of zero energy "before" the stream, which
        # the running sum subtracts as frames leave it; the floor never looks there
        self._stored = self._smoothing  # frames held (the newest at _stored - 1)
        self._frames = 0  # frames judged since the stream's start
        self._sum = 0.0  # energy of the last _smoothing frames (an exact integer)

    def _make_room(self, count: int) -> None:
        if self._stored + count <= self._energy.shape[0]:
            return
        keep = min(self._stored, self._smoothing + self._window)
        size = max(self._CAPACITY_FRAMES, keep + count)
        self._energy = self._kept(self._energy, keep, size)
        self._smoothed = self._kept(self._smoothed, keep, size)
        self._stored = keep

    def _kept(self, old: np.ndarray, keep: int, size: int) -> np.ndarray:
        """A buffer of ``size`` frames holding the last ``keep`` stored frames of ``old``."""
        new = np.zeros(size)
        new[:keep] = old[self._stored - keep:self._stored]
        return new

    def _floor(self, first: int, at: int, count: int) -> np.ndarray:
        """Minimum of the smoothed energies over the window ending at each new frame."""
        window = self._window
        if at - first < window - 1 or count >= window:  # the stream's start, or a long chunk
            return self._minimum_filter(self._smoothed[first:at + count], window,
                                        origin=(window - 1) // 2, mode="constant",
                                        cval=self._before_stream)[at - first:]
        # frame j's window: old[j:] and new[:j + 1]; two running minima cost less than the
        # general filter for the few frames of a live chunk (and give the same, exact minimum)
        old = self._smoothed[at - (window - 1):at]
        old_from = np.minimum.accumulate(old[::-1])[::-1]
        return np.minimum(old_from[:count],
                          np.minimum.accumulate(self._smoothed[at:at + count]))

    def process(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(voiced, energy) of the frames this chunk completed."""
        energy = self._energies.process(samples)
        count = energy.shape[0]
        if count == 0:
            return _NO_DECISIONS, energy
        self._make_room(count)
        at, end = self._stored, self._stored + count
        frames = self._smoothing
        self._energy[at:end] = energy
        # running mean over NOISE_SMOOTHING_MS (over fewer frames at the stream's start)
        sums = np.cumsum(energy - self._energy[at - frames:end - frames])
        sums += self._sum
        self._sum = float(sums[-1])
        if self._frames + 1 < frames:
            sums /= np.minimum(np.arange(self._frames + 1, self._frames + count + 1), frames)
        else:
            sums /= frames
        self._smoothed[at:end] = sums
        # the noise floor: positions before the stream's start hold the assumed floor (inf)
        stream_start = at - self._frames
        floor = self._floor(max(stream_start, at - (self._window - 1)), at, count)
        self._stored = end
        self._frames += count
        floor *= self._ratio
        return energy > np.maximum(floor, self._min_energy, out=floor), energy

    def flush(self) -> tuple[np.ndarray, np.ndarray]:
        return _NO_DECISIONS, NO_FRAMES


class WebrtcFrames:
    """Frame decisions of webrtc's VAD on the stream decimated to 8 kHz, gated by level."""

    def __init__(self, *, sample_rate_hz: int, aggressiveness: int, min_level_dbfs: float):
        try:
            import webrtcvad
        except ImportError as error:
            raise MissingDependencyError(WEBRTC_PACKAGE, extra="vad",
                                         purpose="The webrtc VAD backend") from error
        from ._polyphase import FixedLatencyResampler, kaiser_lowpass

        self._vad = webrtcvad.Vad(aggressiveness)
        self._factor = sample_rate_hz // WEBRTC_SAMPLE_RATE_HZ
        self._low_frame = WEBRTC_SAMPLE_RATE_HZ * FRAME_MS // 1000
        self._decimator = None
        delay = 0
        if self._factor > 1:
            taps = kaiser_lowpass(passband_hz=3_400.0, stopband_hz=4_000.0,
                                  sample_rate_hz=sample_rate_hz, attenuation_db=60.0,
                                  delay_multiple=self._factor)
            self._decimator = FixedLatencyResampler(down=self._factor, taps=taps)
            delay = self._decimator.latency_samples
        self._skip = delay  # 8 kHz samples of filter delay still to drop
        self.decision_delay_samples = delay * self._factor
        self._energies = FrameEnergies(sample_rate_hz * FRAME_MS // 1000)
        self._min_energy = self._energies.energy_for_dbfs(min_level_dbfs)
        self._energy = np.zeros(0)  # energies of the frames webrtc has not judged yet
        self._low = np.zeros(0, dtype=np.int16)

    def _judge(self, low_rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._skip:
            dropped = min(self._skip, low_rate.shape[0])
            low_rate, self._skip = low_rate[dropped:], self._skip - dropped
        low = np.concatenate([self._low, low_rate])
        count = min(low.shape[0] // self._low_frame, self._energy.shape[0])
        self._low = low[count * self._low_frame:]
        pcm = low[:count * self._low_frame].astype("<i2").tobytes()
        step = 2 * self._low_frame
        voiced = np.fromiter((self._vad.is_speech(pcm[i * step:(i + 1) * step],
                                                  WEBRTC_SAMPLE_RATE_HZ) for i in range(count)),
                             dtype=bool, count=count)
        energy, self._energy = self._energy[:count], self._energy[count:]
        voiced &= energy > self._min_energy  # webrtc alone calls some faint noise speech
        return voiced, energy

    def _decimate(self, samples: np.ndarray) -> np.ndarray:
        if self._decimator is None:
            return samples
        filtered = self._decimator.process(samples.astype(np.float64))
        return np.clip(np.rint(filtered), -32768, 32767).astype(np.int16)

    def process(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self._energy = np.concatenate([self._energy, self._energies.process(samples)])
        return self._judge(self._decimate(samples))

    def flush(self) -> tuple[np.ndarray, np.ndarray]:
        if self._decimator is None:
            return _NO_DECISIONS, NO_FRAMES
        tail = np.zeros(self.decision_delay_samples + self._factor, dtype=np.int16)
        return self._judge(self._decimate(tail))
