"""A streaming resampler for adapters: chunks of PCM in, chunks of PCM out, units attached.

Built on ``soxr.ResampleStream``. The stream runs in float32 and this class rounds to int16
itself: soxr's own int16 path dithers, which makes the output depend on how the input was
chunked; its float32 path does not, so the output is the same whether a signal arrives in one
call or in any number of chunks.

soxr emits output in blocks: a chunk can return fewer samples than its duration (even none) and
a later one more. The total over a stream, after :meth:`StreamingResampler.flush`, is the input
duration at the new rate. For a fixed per-chunk latency, see the channel model's integer-ratio
FIR resampler instead.
"""

from __future__ import annotations

import numpy as np

from ._format import PCM16_MAX, PCM16_MIN, PcmAudio

RESAMPLER_QUALITIES = ("QQ", "LQ", "MQ", "HQ", "VHQ")


class StreamingResampler:
    """Resample a stream of int16 mono PCM from ``from_hz`` to ``to_hz``.

    ``process`` takes a :class:`PcmAudio` at ``from_hz`` (or an int16 array, taken to be at
    ``from_hz``) and returns the :class:`PcmAudio` at ``to_hz`` that is ready so far;
    ``flush`` ends the stream, returns what the filter still holds and makes the resampler ready
    for a new, unrelated stream. ``quality`` is soxr's: ``QQ``, ``LQ``, ``MQ``, ``HQ`` (default)
    or ``VHQ``.
    """

    def __init__(self, from_hz: int, to_hz: int, *, quality: str = "HQ"):
        for name, rate in (("from_hz", from_hz), ("to_hz", to_hz)):
            if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
                raise ValueError(f"{name} must be a positive whole number of Hz, got {rate!r}")
        if quality.upper() not in RESAMPLER_QUALITIES:
            raise ValueError(f"quality must be one of {', '.join(RESAMPLER_QUALITIES)}, "
                             f"got {quality!r}")
        self.from_hz = from_hz
        self.to_hz = to_hz
        self.quality = quality.upper()
        self.clipped_samples = 0  # output samples that were beyond int16 and were clipped
        self._stream = None
        if from_hz != to_hz:
            import soxr  # a core dependency, imported on first use to keep `validate` light

            self._stream = soxr.ResampleStream(from_hz, to_hz, 1, dtype="float32",
                                               quality=self.quality)

    def __repr__(self) -> str:
        return f"StreamingResampler({self.from_hz} Hz -> {self.to_hz} Hz, {self.quality})"

    def process(self, chunk: PcmAudio | np.ndarray) -> PcmAudio:
        """Resample the next ``chunk`` of the stream; returns the output that is ready."""
        return self._resample(self._samples(chunk), last=False)

    def flush(self) -> PcmAudio:
        """End the stream: the output still held back by the filter. The resampler can then start
        a new stream."""
        tail = self._resample(np.zeros(0, dtype=np.int16), last=True)
        if self._stream is not None:
            self._stream.clear()
        return tail

    def _samples(self, chunk: PcmAudio | np.ndarray) -> np.ndarray:
        if isinstance(chunk, PcmAudio):
            if chunk.sample_rate_hz != self.from_hz:
                raise ValueError(f"chunk is {chunk.sample_rate_hz} Hz audio but this resampler "
                                 f"takes {self.from_hz} Hz")
            return chunk.samples
        if not isinstance(chunk, np.ndarray) or chunk.dtype != np.int16 or chunk.ndim != 1:
            raise ValueError("chunk must be a PcmAudio or a 1-D int16 numpy array, got "
                             f"{chunk.dtype if isinstance(chunk, np.ndarray) else type(chunk).__name__}")
        return chunk

    def _resample(self, samples: np.ndarray, *, last: bool) -> PcmAudio:
        if self._stream is None:
            return PcmAudio(samples.copy(), self.to_hz)
        output = self._stream.resample_chunk(samples.astype(np.float32), last=last)
        rounded = np.rint(output)
        self.clipped_samples += int(np.count_nonzero((rounded < PCM16_MIN) | (rounded > PCM16_MAX)))
        return PcmAudio(np.clip(rounded, PCM16_MIN, PCM16_MAX).astype(np.int16), self.to_hz)
