"""The double's audio codecs: its 8 kHz voice as 20 ms RTP payloads, and the caller's back.

G.711 (``PCMU``, ``PCMA``) is one byte a sample at 8 kHz. Opus (``OPUS``, RFC 7587) is coded by
libopus at the double's own 8 kHz (narrowband: the double's voice has nothing above 4 kHz);
its RTP clock is 48 kHz whatever the coding rate, so a 20 ms packet advances the timestamp
960. libopus comes from the optional ``opuslib-next-bundled`` package, imported only when a
call negotiates Opus.

The truth of an utterance's speech onset (:func:`speech_start`) is found in what a receiver
decodes from the frames, so a codec's own delay (Opus's 6.5 ms look-ahead) is in it, as it is
in what the caller hears.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Literal, Protocol

import numpy as np

from ...audio import (
    G711_SAMPLE_RATE_HZ,
    SILENCE_THRESHOLD,
    PcmAudio,
    alaw_decode,
    alaw_encode,
    mulaw_decode,
    mulaw_encode,
)

Codec = Literal["PCMU", "PCMA", "OPUS"]
CLOCK_HZ: dict[Codec, int] = {"PCMU": 8000, "PCMA": 8000, "OPUS": 48_000}
FRAME_MS = 20
FRAME_SAMPLES = G711_SAMPLE_RATE_HZ * FRAME_MS // 1000  # 160 samples (and G.711 bytes)
#: RFC 6716: a packet carries at most 120 ms; what a caller's packet decodes to is bounded by it
MAX_DECODED_SAMPLES = G711_SAMPLE_RATE_HZ * 120 // 1000
OPUS_BITRATE_BPS = 24_000


@cache
def opus_available() -> bool:
    """Whether libopus loads here (the double offers Opus only then)."""
    try:
        import opuslib_next  # noqa: F401
    except (ImportError, OSError, RuntimeError):
        return False
    return True


def timestamp_step(codec: Codec) -> int:
    """How far a 20 ms packet moves the RTP timestamp."""
    return CLOCK_HZ[codec] * FRAME_MS // 1000


class _OpusEncoder(Protocol):
    def encode(self, pcm_data: bytes, frame_size: int) -> bytes: ...


class _OpusDecoder(Protocol):
    def decode(self, opus_data: bytes, frame_size: int) -> bytes: ...


def _opus_encoder() -> _OpusEncoder:
    import opuslib_next

    made: _OpusEncoder = opuslib_next.Encoder(G711_SAMPLE_RATE_HZ, 1, "voip")
    made.bitrate = OPUS_BITRATE_BPS  # type: ignore[attr-defined]
    return made


def _opus_decoder() -> _OpusDecoder:
    import opuslib_next

    made: _OpusDecoder = opuslib_next.Decoder(G711_SAMPLE_RATE_HZ, 1)
    return made


def _g711(codec: Codec) -> tuple[Callable[[PcmAudio], bytes], Callable[[bytes], PcmAudio]]:
    return (mulaw_encode, mulaw_decode) if codec == "PCMU" else (alaw_encode, alaw_decode)


def encode(audio: PcmAudio, codec: Codec) -> list[bytes]:
    """``audio`` (8 kHz) as 20 ms frames of ``codec``, the last one padded with silence."""
    samples = audio.samples.astype(np.int16)
    samples = np.concatenate([samples, np.zeros(-samples.size % FRAME_SAMPLES, np.int16)])
    frames = samples.reshape(-1, FRAME_SAMPLES)
    if codec == "OPUS":
        encoder = _opus_encoder()
        return [bytes(encoder.encode(frame.tobytes(), FRAME_SAMPLES)) for frame in frames]
    encode_g711, _ = _g711(codec)
    return [encode_g711(PcmAudio(frame, sample_rate_hz=G711_SAMPLE_RATE_HZ)) for frame in frames]


def decoder(codec: Codec) -> Callable[[bytes], np.ndarray]:
    """A receiver of ``codec``: payload in order -> 8 kHz int16 samples (a stateful decoder for
    Opus); raises ValueError for a payload it cannot decode."""
    if codec != "OPUS":
        _, decode_g711 = _g711(codec)
        return lambda payload: decode_g711(payload).samples
    state = _opus_decoder()

    def decode_opus(payload: bytes) -> np.ndarray:
        try:
            pcm = state.decode(payload, MAX_DECODED_SAMPLES)
        except Exception as error:  # noqa: BLE001 -- libopus's OpusError for a bad packet
            raise ValueError(f"an Opus packet libopus refuses ({error})") from None
        return np.frombuffer(bytes(pcm), dtype=np.int16)

    return decode_opus


@cache
def silence(codec: Codec) -> bytes:
    """One 20 ms packet of silence."""
    return encode(PcmAudio(np.zeros(FRAME_SAMPLES, np.int16),
                           sample_rate_hz=G711_SAMPLE_RATE_HZ), codec)[0]


def speech_start(frames: list[bytes], codec: Codec) -> tuple[int, int] | None:
    """The (frame, sample in it) of the first sample a receiver decodes from ``frames`` above
    the silence threshold, or None when none is."""
    decode = decoder(codec)
    for index, frame in enumerate(frames):
        loud = np.flatnonzero(np.abs(decode(frame).astype(np.int32)) > SILENCE_THRESHOLD)
        if loud.size:
            return index, int(loud[0])
    return None
