"""Reading any supported audio file into the canonical format, and writing WAV files."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import AudioFileError
from ._format import CANONICAL_SAMPLE_RATE_HZ, PCM16_MAX, PCM16_MIN, PcmAudio

if TYPE_CHECKING:
    from soundfile import SoundFile

#: libsndfile containers the core accepts; MP3, AIFF and the rest are refused (seed: WAV only,
#: plus FLAC and OGG by this project's choice).
_SUPPORTED_FORMATS = frozenset({"WAV", "WAVEX", "RF64", "FLAC", "OGG"})
#: Uncompressed WAV sample types; ADPCM, u-law, GSM and other compressed WAV are refused.
_PCM_OR_FLOAT_SUBTYPES = frozenset({"PCM_U8", "PCM_S8", "PCM_16", "PCM_24", "PCM_32", "FLOAT",
                                    "DOUBLE"})
#: libsndfile's header log line for a WAV whose data chunk is longer than the file.
_SHORT_DATA_CHUNK = re.compile(r"^data\s*:\s*(\d+)\s*\(should be (\d+)\)", re.MULTILINE)
_SUPPORTED_TEXT = "supported: WAV (PCM or float), FLAC, OGG"

#: Sample rates an audio asset may declare. Outside them the header is broken or hostile: a WAV
#: declaring 1 Hz becomes 24,000 times more samples when resampled to the canonical rate.
MIN_SAMPLE_RATE_HZ = 4_000
MAX_SAMPLE_RATE_HZ = 384_000
#: Longest audio asset (a script turn's recording, a noise bed, a transient event) accepted.
MAX_DURATION_SECONDS = 600
#: Frames decoded, mixed to mono and resampled at a time: memory follows the output, not the
#: file's rate or channel count.
_BLOCK_FRAMES = 65_536


def _check_container(handle: SoundFile, path: Path) -> None:
    """Refuse formats the core does not support and WAV files cut short."""
    if handle.format not in _SUPPORTED_FORMATS:
        raise AudioFileError(f"unsupported audio format {handle.format} ({handle.subtype}); "
                             f"{_SUPPORTED_TEXT}", source=path)
    if handle.format in ("FLAC", "OGG"):
        return
    if handle.subtype not in _PCM_OR_FLOAT_SUBTYPES:
        raise AudioFileError(f"unsupported WAV encoding {handle.subtype} (compressed WAV); "
                             f"{_SUPPORTED_TEXT}", source=path)
    short = _SHORT_DATA_CHUNK.search(handle.extra_info or "")
    # 0 and 0xFFFFFFFF are the 'unknown length' markers streaming writers leave in the header
    if short and int(short.group(1)) not in (0, 0xFFFFFFFF):
        declared, present = int(short.group(1)), int(short.group(2))
        if present < declared:
            raise AudioFileError(f"audio file is truncated: the header declares {declared} bytes "
                                 f"of samples, the file holds {present}", source=path)


def _check_extent(handle: SoundFile, path: Path, *, max_seconds: float = MAX_DURATION_SECONDS,
                  what: str = "audio assets") -> None:
    """Refuse an implausible sample rate or audio longer than ``max_seconds``."""
    rate = handle.samplerate
    if not MIN_SAMPLE_RATE_HZ <= rate <= MAX_SAMPLE_RATE_HZ:
        raise AudioFileError(f"implausible sample rate {rate:,} Hz (supported: "
                             f"{MIN_SAMPLE_RATE_HZ:,} to {MAX_SAMPLE_RATE_HZ:,} Hz)", source=path)
    duration_seconds = handle.frames / rate
    if duration_seconds > max_seconds:
        raise AudioFileError(f"audio is {duration_seconds:,.1f} s long; {what} are limited "
                             f"to {max_seconds:g} s", source=path)


def _to_int16(floats: np.ndarray) -> np.ndarray:
    scaled = np.clip(np.round(floats * 32768.0), PCM16_MIN, PCM16_MAX)
    return scaled.astype(np.int16)


def _read_mono(handle: SoundFile, path: Path, *, sample_rate_hz: int,
               channels: Sequence[int] | None = None) -> list[np.ndarray]:
    """Every frame as float32 at ``sample_rate_hz``, a block at a time: the channels averaged
    to mono (``channels`` None), or each of ``channels`` on its own.

    A rate other than ``sample_rate_hz`` is resampled with soxr at very high quality, streamed
    (the result is bit-identical to resampling the whole signal at once).
    """
    count = 1 if channels is None else len(channels)
    resamplers = None
    if handle.samplerate != sample_rate_hz:
        import soxr

        resamplers = [soxr.ResampleStream(handle.samplerate, sample_rate_hz, 1,
                                          dtype="float32", quality="VHQ") for _ in range(count)]
    parts: list[list[np.ndarray]] = [[] for _ in range(count)]
    remaining = handle.frames
    while remaining > 0:
        block = handle.read(min(_BLOCK_FRAMES, remaining), dtype="float32", always_2d=True)
        if block.shape[0] == 0:
            break
        remaining -= block.shape[0]
        if not np.all(np.isfinite(block)):
            raise AudioFileError("audio holds non-finite samples", source=path)
        columns = [block.mean(axis=1) if block.shape[1] > 1 else block[:, 0]] \
            if channels is None else [block[:, index] for index in channels]
        for index, column in enumerate(columns):
            parts[index].append(resamplers[index].resample_chunk(column)
                                if resamplers is not None else column.copy())
    if resamplers is not None:
        for index, resampler in enumerate(resamplers):
            parts[index].append(resampler.resample_chunk(np.zeros(0, dtype=np.float32),
                                                         last=True))
    return [np.concatenate(part) if part else np.zeros(0, dtype=np.float32) for part in parts]


@contextmanager
def _opened(path: Path, *, max_seconds: float = MAX_DURATION_SECONDS,
            what: str = "audio assets") -> Iterator[SoundFile]:
    """An audio file opened with libsndfile and checked (container, rate, extent, not empty);
    any decoding error becomes an :class:`AudioFileError` naming the file."""
    import soundfile  # deferred: keeps the CLI start-up path light

    if not path.exists():
        raise AudioFileError(f"audio file not found: {path}", source=path)
    if not path.is_file():
        raise AudioFileError("expected an audio file, found a directory, pipe or device",
                             source=path)
    if path.stat().st_size == 0:
        raise AudioFileError("audio file is empty", source=path)
    try:
        with soundfile.SoundFile(str(path)) as handle:
            _check_container(handle, path)
            _check_extent(handle, path, max_seconds=max_seconds, what=what)
            if handle.frames == 0:
                raise AudioFileError("audio file holds no samples", source=path)
            yield handle
    except AudioFileError:
        raise
    except (soundfile.LibsndfileError, RuntimeError, ValueError, TypeError) as error:
        detail = str(error).strip() or type(error).__name__
        raise AudioFileError(f"cannot decode audio ({detail}); {_SUPPORTED_TEXT}",
                             source=path) from None


def read_audio(path: str | Path, *, sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ) -> PcmAudio:
    """Decode WAV (PCM or float), FLAC or OGG into mono pcm_s16le at ``sample_rate_hz``.

    Stereo is averaged to mono; other rates are resampled with soxr at very high quality.
    Raises :class:`AudioFileError` for a missing, empty, corrupt or unsupported file, a sample
    rate outside :data:`MIN_SAMPLE_RATE_HZ`..:data:`MAX_SAMPLE_RATE_HZ` or audio longer than
    :data:`MAX_DURATION_SECONDS`.
    """
    path = Path(path)
    with _opened(path) as handle:
        if handle.subtype in ("PCM_16", "PCM_S8", "PCM_U8") and handle.channels == 1 \
                and handle.samplerate == sample_rate_hz:
            samples = handle.read(dtype="int16")
            return PcmAudio(np.ascontiguousarray(samples), sample_rate_hz)
        [mono] = _read_mono(handle, path, sample_rate_hz=sample_rate_hz)
    return PcmAudio(_to_int16(np.asarray(mono, dtype=np.float64)), sample_rate_hz)


def channel_count(path: str | Path, *, max_seconds: float = MAX_DURATION_SECONDS,
                  what: str = "audio assets") -> int:
    """How many channels an audio file holds, from its header alone (it is checked as
    :func:`read_audio` checks, its length against ``max_seconds`` included), so a file that
    could not be read is refused before anything is decoded or written."""
    path = Path(path)
    with _opened(path, max_seconds=max_seconds, what=what) as handle:
        return int(handle.channels)


def read_channels(path: str | Path, channels: Sequence[int], *,
                  sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ,
                  max_seconds: float = MAX_DURATION_SECONDS,
                  what: str = "audio assets") -> list[PcmAudio]:
    """Each of ``channels`` (0-based) of a WAV, FLAC or OGG file on its own, as pcm_s16le at
    ``sample_rate_hz`` (a recorded call's legs). Raises :class:`AudioFileError` as
    :func:`read_audio` does, and for a channel the file does not have."""
    path = Path(path)
    with _opened(path, max_seconds=max_seconds, what=what) as handle:
        for index in channels:
            if not 0 <= index < handle.channels:
                raise AudioFileError(f"the file has {handle.channels} channel(s): no channel "
                                     f"{index}", source=path)
        columns = _read_mono(handle, path, sample_rate_hz=sample_rate_hz, channels=channels)
    return [PcmAudio(_to_int16(np.asarray(column, dtype=np.float64)), sample_rate_hz)
            for column in columns]


def write_wav(path: str | Path, audio: PcmAudio) -> Path:
    """``audio`` as a 16-bit mono PCM WAV file. Encoded in memory by libsndfile and written by
    Python, so a write failure is an ``OSError`` that names its cause (a full disk...)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as stream:
        stream.write(_encoded_wav(audio).getbuffer())  # no copy of the encoded file
    return path


def wav_buffer(audio: PcmAudio) -> memoryview:
    """A complete 16-bit mono WAV file in memory, without copying the encoded bytes."""
    return _encoded_wav(audio).getbuffer()


def wav_bytes(audio: PcmAudio) -> bytes:
    """A complete 16-bit mono WAV file in memory."""
    return _encoded_wav(audio).getvalue()


def _encoded_wav(audio: PcmAudio) -> io.BytesIO:
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, audio.samples, audio.sample_rate_hz, subtype="PCM_16", format="WAV")
    return buffer


def read_wav_pcm(source: str | Path | bytes, *, sample_rate_hz: int | None = None
                 ) -> tuple[np.ndarray, int]:
    """The int16 samples and rate of a 16-bit mono PCM WAV file (a path or its bytes), as
    written: no resampling. ``sample_rate_hz`` demands a rate. Raises :class:`AudioFileError`."""
    import soundfile

    where = Path(source) if not isinstance(source, bytes) else None
    try:
        with soundfile.SoundFile(io.BytesIO(source) if isinstance(source, bytes)
                                 else str(source)) as handle:
            if handle.channels != 1 or handle.subtype != "PCM_16":
                raise AudioFileError(f"expected 16-bit mono PCM, got {handle.subtype} with "
                                     f"{handle.channels} channel(s)", source=where)
            if sample_rate_hz is not None and handle.samplerate != sample_rate_hz:
                raise AudioFileError(f"expected {sample_rate_hz} Hz, got {handle.samplerate} Hz",
                                     source=where)
            return handle.read(dtype="int16"), handle.samplerate
    except (soundfile.LibsndfileError, RuntimeError) as error:
        raise AudioFileError(f"cannot read WAV audio: {error}", source=where) from None
