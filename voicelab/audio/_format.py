"""The canonical audio format and the buffer that carries its units across boundaries."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

#: The sample rate of every stream voicelab keeps (mono 16-bit PCM).
CANONICAL_SAMPLE_RATE_HZ = 24_000
CANONICAL_CHANNELS = 1
CANONICAL_ENCODING = "pcm_s16le"
BYTES_PER_SAMPLE = 2
PCM16_MIN = -32768
PCM16_MAX = 32767


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """Units of a PCM stream. Only pcm_s16le mono is produced or consumed by the core."""

    encoding: str = CANONICAL_ENCODING
    sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ
    channels: int = CANONICAL_CHANNELS

    @property
    def bytes_per_second(self) -> int:
        return self.sample_rate_hz * self.channels * BYTES_PER_SAMPLE

    def seconds_for_bytes(self, byte_count: int) -> float:
        return byte_count / self.bytes_per_second

    def bytes_for_ms(self, duration_ms: float) -> int:
        """Whole-sample byte count for a duration (never splits a sample)."""
        samples = int(round(self.sample_rate_hz * duration_ms / 1000.0))
        return max(1, samples) * self.channels * BYTES_PER_SAMPLE

    def to_dict(self) -> dict[str, object]:
        return {"encoding": self.encoding, "sample_rate_hz": self.sample_rate_hz,
                "channels": self.channels}


CANONICAL_FORMAT = AudioFormat()


@dataclass(frozen=True, slots=True, eq=False)
class PcmAudio:
    """Mono pcm_s16le samples with their sample rate attached.

    The array is validated once here (1-D int16) so every consumer can trust it.
    """

    samples: np.ndarray
    sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ

    def __post_init__(self) -> None:
        if not isinstance(self.samples, np.ndarray) or self.samples.dtype != np.int16:
            raise ValueError("PcmAudio.samples must be a numpy int16 array")
        if self.samples.ndim != 1:
            raise ValueError(f"PcmAudio.samples must be 1-D (mono), got shape {self.samples.shape}")
        if self.sample_rate_hz <= 0:
            raise ValueError(f"sample_rate_hz must be positive, got {self.sample_rate_hz}")

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, *,
                   sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> PcmAudio:
        if len(data) % BYTES_PER_SAMPLE:
            raise ValueError(f"pcm_s16le data must have an even byte count, got {len(data)}")
        samples = np.frombuffer(bytes(data), dtype="<i2").astype(np.int16, copy=False)
        return cls(samples, sample_rate_hz)

    @classmethod
    def silence(cls, duration_seconds: float, *,
                sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> PcmAudio:
        count = max(0, int(round(duration_seconds * sample_rate_hz)))
        return cls(np.zeros(count, dtype=np.int16), sample_rate_hz)

    @classmethod
    def concat(cls, parts: Iterable[PcmAudio], *,
               sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> PcmAudio:
        arrays = []
        for part in parts:
            if part.sample_rate_hz != sample_rate_hz:
                raise ValueError(f"cannot concatenate {part.sample_rate_hz} Hz audio "
                                 f"into a {sample_rate_hz} Hz buffer")
            arrays.append(part.samples)
        if not arrays:
            return cls(np.zeros(0, dtype=np.int16), sample_rate_hz)
        return cls(np.concatenate(arrays), sample_rate_hz)

    @property
    def format(self) -> AudioFormat:
        return AudioFormat(sample_rate_hz=self.sample_rate_hz)

    @property
    def num_samples(self) -> int:
        return int(self.samples.shape[0])

    @property
    def byte_count(self) -> int:
        return self.num_samples * BYTES_PER_SAMPLE

    @property
    def duration_seconds(self) -> float:
        return self.num_samples / self.sample_rate_hz

    def to_bytes(self) -> bytes:
        return self.samples.astype("<i2", copy=False).tobytes()

    def slice_seconds(self, start_seconds: float, end_seconds: float | None = None) -> PcmAudio:
        start = max(0, int(round(start_seconds * self.sample_rate_hz)))
        end = None if end_seconds is None else max(start, int(round(end_seconds * self.sample_rate_hz)))
        return PcmAudio(self.samples[start:end], self.sample_rate_hz)

    def chunks(self, chunk_ms: float) -> list[PcmAudio]:
        """Split into frames of ``chunk_ms`` (the last one may be shorter)."""
        size = max(1, int(round(self.sample_rate_hz * chunk_ms / 1000.0)))
        return [PcmAudio(self.samples[i:i + size], self.sample_rate_hz)
                for i in range(0, self.num_samples, size)]

    def __len__(self) -> int:
        return self.num_samples

    def __repr__(self) -> str:
        return (f"PcmAudio({self.duration_seconds:.3f} s, {self.sample_rate_hz} Hz, "
                f"{CANONICAL_ENCODING}, mono)")
