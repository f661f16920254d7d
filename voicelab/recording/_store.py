"""Arrival-ordered PCM streams: each direction's audio, appended as it is sent or received."""

from __future__ import annotations

import numpy as np

from ..audio import BYTES_PER_SAMPLE, CANONICAL_SAMPLE_RATE_HZ, PcmAudio


class PcmStream:
    """One direction's canonical PCM (pcm_s16le, 24 kHz, mono) in arrival order.

    Appending copies the chunk once into a growing buffer; an event keeps the chunk's position
    (first sample, sample count), so no chunk is stored twice.
    """

    __slots__ = ("_buffer",)

    sample_rate_hz = CANONICAL_SAMPLE_RATE_HZ

    def __init__(self, initial: bytes | bytearray | memoryview = b""):
        if len(initial) % BYTES_PER_SAMPLE:
            raise ValueError("a PCM stream holds whole 16-bit samples")
        self._buffer = bytearray(initial)

    def append(self, pcm: bytes | bytearray | memoryview) -> tuple[int, int]:
        """Append whole samples; returns (first sample, sample count)."""
        start = len(self._buffer) // BYTES_PER_SAMPLE
        self._buffer += pcm
        return start, len(pcm) // BYTES_PER_SAMPLE

    @property
    def num_samples(self) -> int:
        return len(self._buffer) // BYTES_PER_SAMPLE

    def samples(self, start: int = 0, count: int | None = None) -> np.ndarray:
        """int16 samples ``[start, start + count)``, copied (a view would pin the buffer: no
        appends while it lives)."""
        stop = self.num_samples if count is None else start + count
        return np.frombuffer(self._buffer[start * BYTES_PER_SAMPLE:stop * BYTES_PER_SAMPLE],
                             dtype="<i2").astype(np.int16, copy=False)

    def pcm(self, start: int = 0, count: int | None = None) -> bytes:
        stop = self.num_samples if count is None else start + count
        return bytes(self._buffer[start * BYTES_PER_SAMPLE:stop * BYTES_PER_SAMPLE])

    def audio(self) -> PcmAudio:
        """The whole stream as audio (a copy)."""
        return PcmAudio(self.samples())
