"""Arrival-ordered PCM streams: each direction's audio, appended as it is sent or received."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..audio import BYTES_PER_SAMPLE, CANONICAL_SAMPLE_RATE_HZ, PcmAudio


class PcmStream:
    """One direction's canonical PCM (pcm_s16le, 24 kHz, mono) in arrival order.

    Appending keeps the chunk as it is (a received frame's bytes are not copied); an event keeps
    the chunk's position (first sample, sample count), so no chunk is stored twice. The chunks
    are joined into one buffer when the stream is first read after appends: during a call
    nothing is copied per chunk (one growing buffer would be reallocated and copied again and
    again as a response arrives).
    """

    __slots__ = ("_join_lock", "_joined", "_pending", "_samples")

    sample_rate_hz = CANONICAL_SAMPLE_RATE_HZ

    def __init__(self, initial: bytes | bytearray | memoryview = b""):
        if len(initial) % BYTES_PER_SAMPLE:
            raise ValueError("a PCM stream holds whole 16-bit samples")
        self._joined = bytearray(initial)
        self._pending: list[bytes] = []  # appended since the last read
        self._samples = len(initial) // BYTES_PER_SAMPLE
        self._join_lock = threading.Lock()  # a scoring thread may read what the loop reads

    def append(self, pcm: bytes | bytearray | memoryview) -> tuple[int, int]:
        """Append whole samples; returns (first sample, sample count)."""
        start = self._samples
        count = len(pcm) // BYTES_PER_SAMPLE
        self._pending.append(bytes(pcm))  # bytes are kept as they are; anything else, copied
        self._samples = start + count
        return start, count

    def _buffer(self) -> bytearray:
        if self._pending:
            with self._join_lock:
                if self._pending:
                    self._joined += b"".join(self._pending)
                    self._pending = []
        return self._joined

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        if not isinstance(protocol, int) or protocol < 5:
            return (PcmStream, (self._buffer(),))
        # protocol 5: the stream joined into one buffer, which a pickler with a buffer_callback
        # sends out of band (the scoring process's channel: not copied into the pickle). One
        # join, not one buffer per chunk: a buffer, a view and a size for each of hundreds of
        # chunks cost the loop more than the join (benchmarks/README.md)
        with self._join_lock:
            joined = b"".join([self._joined, *self._pending])
        return (_stream_of, ([pickle.PickleBuffer(joined)],))

    @property
    def num_samples(self) -> int:
        return self._samples

    def samples(self, start: int = 0, count: int | None = None) -> np.ndarray:
        """int16 samples ``[start, start + count)``, copied (a view would pin the buffer: no
        appends while it lives)."""
        stop = self._samples if count is None else start + count
        return np.frombuffer(self._buffer()[start * BYTES_PER_SAMPLE:stop * BYTES_PER_SAMPLE],
                             dtype="<i2").astype(np.int16, copy=False)

    def pcm(self, start: int = 0, count: int | None = None) -> bytes:
        stop = self._samples if count is None else start + count
        return bytes(self._buffer()[start * BYTES_PER_SAMPLE:stop * BYTES_PER_SAMPLE])

    def audio(self) -> PcmAudio:
        """The whole stream as audio (a copy)."""
        return PcmAudio(self.samples())


def _stream_of(chunks: Sequence[bytes | bytearray | memoryview]) -> PcmStream:
    """A stream unpickled from its chunks (see :meth:`PcmStream.__reduce_ex__`), joined once."""
    stream = PcmStream()
    stream._joined = bytearray().join(chunks)  # one copy, out of the pickle's buffers
    stream._samples = len(stream._joined) // BYTES_PER_SAMPLE
    return stream
