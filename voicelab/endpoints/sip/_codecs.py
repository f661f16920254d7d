"""The audio coding of each codec a call can carry: canonical 24 kHz PCM <-> RTP payloads.

Whatever codec is on the wire is the only coding the audio gets: G.711 (``pcmu``, ``pcma``)
goes through the phone wires' shared 8 kHz converter (:mod:`.._g711_line`); Opus (``opus``,
RFC 7587) is coded by libopus straight at 24 kHz, voicelab's canonical rate, with no resampler
(libopus takes and gives 8, 12, 16, 24 or 48 kHz; the RTP clock is 48 kHz whatever the coding
rate, so the timestamp advances 960 per 20 ms packet).

libopus comes from the optional ``opuslib-next-bundled`` package (the ``telephony`` extra: its
wheel carries libopus, so no system library is needed, and the channel model's Opus line uses
the same package). It is imported only when a call negotiates Opus or ``validate`` checks a
configuration that offers it, never on the command line's start-up path.

The far end's payloads are hostile input: an Opus payload over :data:`MAX_OPUS_PAYLOAD_BYTES`,
one libopus refuses, or one that says it lasts longer than :data:`MAX_OPUS_PACKET_MS` is not
decoded: the decoder returns None and the caller counts it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Literal, Protocol

import numpy as np

from ...audio import CANONICAL_SAMPLE_RATE_HZ
from ...errors import MissingDependencyError
from .._g711_line import LINE_LATENCY_MS, G711Law, LineDecoder, LineEncoder

Codec = Literal["pcmu", "pcma", "opus"]
#: the RTP clock of each codec's payloads (RFC 3551 for G.711; RFC 7587: Opus is always 48000)
CLOCK_RATE_HZ: dict[Codec, int] = {"pcmu": 8000, "pcma": 8000, "opus": 48_000}
FRAME_MS = 20
OPUS_PACKAGE = "opuslib-next-bundled"
#: RFC 6716 3.2.1: a frame is at most 1275 bytes, and a packet a few frames; more is hostile
MAX_OPUS_PAYLOAD_BYTES = 4000
#: RFC 6716: a packet carries at most 120 ms of audio; what libopus may return is bounded by it
MAX_OPUS_PACKET_MS = 120
#: the Opus encoder's bit rate: wideband voice, well above what intelligibility needs
OPUS_BITRATE_BPS = 32_000
_OPUS_FRAME_SAMPLES = CANONICAL_SAMPLE_RATE_HZ * FRAME_MS // 1000
_LAW_OF: dict[Codec, G711Law] = {"pcmu": "mulaw", "pcma": "alaw"}


class WireEncoder(Protocol):
    """Canonical PCM chunks of any length in, whole 20 ms payloads of the codec out."""

    def push(self, samples: np.ndarray) -> list[bytes]: ...


class WireDecoder(Protocol):
    """One payload in, canonical PCM out; None when the payload cannot be decoded."""

    def decode(self, payload: bytes) -> np.ndarray | None: ...

    def silence(self, packets: int) -> np.ndarray:
        """Canonical PCM standing in for ``packets`` lost packets."""
        ...


def rtp_samples_per_frame(codec: Codec) -> int:
    """How far the RTP timestamp advances per 20 ms packet (160 for G.711, 960 for Opus)."""
    return CLOCK_RATE_HZ[codec] * FRAME_MS // 1000


def conversion_delay_ms(codec: Codec) -> dict[str, float]:
    """voicelab's own constant delay each way for ``codec``: G.711's rate conversion; for Opus
    the encoder's look-ahead toward the product (our decoder at 24 kHz adds none)."""
    if codec == "opus":
        return {"to_product": OpusEncoder.LOOKAHEAD_MS, "to_user": 0.0}
    return {"to_product": LINE_LATENCY_MS, "to_user": LINE_LATENCY_MS}


class _LibopusEncoder(Protocol):
    bitrate: int

    def encode(self, pcm_data: bytes, frame_size: int) -> bytes: ...


class _LibopusDecoder(Protocol):
    decoder_state: object


def _opus_api() -> tuple[Callable[[int, int, str], _LibopusEncoder],
                         Callable[[int, int], _LibopusDecoder], Callable[..., bytes]]:
    """libopus's encoder and decoder classes and its decode function; raises
    :class:`MissingDependencyError` when the package is absent or its libopus will not load."""
    try:
        import opuslib_next
        import opuslib_next.api.decoder
    except (ImportError, OSError, RuntimeError) as error:
        raise MissingDependencyError(OPUS_PACKAGE, extra="telephony",
                                     purpose="The opus codec of a SIP call") from error
    return opuslib_next.Encoder, opuslib_next.Decoder, opuslib_next.api.decoder.decode


def require_opus() -> None:
    """Raise :class:`MissingDependencyError` when libopus cannot be loaded."""
    _opus_api()


class G711Encoder:
    def __init__(self, codec: Codec) -> None:
        self._encoder = LineEncoder(_LAW_OF[codec])
        self._encoder.push(np.zeros(0, dtype=np.int16))  # load the filter's code now

    def push(self, samples: np.ndarray) -> list[bytes]:
        return self._encoder.push(samples)


class G711Decoder:
    """G.711 of one law: every payload decodes (each byte is a sample)."""

    def __init__(self, codec: Codec) -> None:
        self._decoder = LineDecoder(_LAW_OF[codec])
        self._frame_bytes = 160
        self._silence_byte = b"\xff" if codec == "pcmu" else b"\xd5"

    def decode(self, payload: bytes) -> np.ndarray:
        self._frame_bytes = len(payload) or self._frame_bytes
        return self._decoder.push(payload)

    def silence(self, packets: int) -> np.ndarray:
        """Silence through the filter, so its state follows the stream."""
        return self._decoder.push(self._silence_byte * (packets * self._frame_bytes))


class OpusEncoder:
    """libopus (``voip``), mono, 24 kHz in, one 20 ms packet per frame."""

    #: libopus's look-ahead: what the far end decodes lags what was encoded by this much
    LOOKAHEAD_MS = 6.5

    def __init__(self) -> None:
        encoder_class, _, _ = _opus_api()
        self._encoder = encoder_class(CANONICAL_SAMPLE_RATE_HZ, 1, "voip")
        self._encoder.bitrate = OPUS_BITRATE_BPS
        self._pending = np.zeros(0, dtype=np.int16)

    def push(self, samples: np.ndarray) -> list[bytes]:
        pending = np.concatenate([self._pending, samples.astype(np.int16)])
        whole = pending.size - pending.size % _OPUS_FRAME_SAMPLES
        packets = [bytes(self._encoder.encode(pending[i:i + _OPUS_FRAME_SAMPLES].tobytes(),
                                              _OPUS_FRAME_SAMPLES))
                   for i in range(0, whole, _OPUS_FRAME_SAMPLES)]
        self._pending = pending[whole:]
        return packets


class OpusDecoder:
    """libopus, mono, 24 kHz out; a packet decodes to what it says it lasts (bounded)."""

    def __init__(self) -> None:
        _, decoder_class, self._decode = _opus_api()
        self._state = decoder_class(CANONICAL_SAMPLE_RATE_HZ, 1)
        self._max_samples = CANONICAL_SAMPLE_RATE_HZ * MAX_OPUS_PACKET_MS // 1000
        self._last_samples = _OPUS_FRAME_SAMPLES

    def decode(self, payload: bytes) -> np.ndarray | None:
        if not payload or len(payload) > MAX_OPUS_PAYLOAD_BYTES:
            return None
        try:
            pcm = self._decode(self._state.decoder_state, payload, len(payload),
                               self._max_samples, False, channels=1)
        except Exception:  # noqa: BLE001 -- libopus refusing a hostile payload (its OpusError,
            return None  # or ctypes refusing what it cannot pass): counted by the caller
        samples = np.frombuffer(bytes(pcm), dtype=np.int16)
        if samples.size:
            self._last_samples = samples.size
        return samples.copy()

    def silence(self, packets: int) -> np.ndarray:
        """Silence as long as ``packets`` of the last packet's duration."""
        return np.zeros(packets * self._last_samples, dtype=np.int16)


@cache
def silence_payload(codec: Codec) -> bytes:
    """20 ms of silence in ``codec`` (what a key sent by INFO leaves on the line)."""
    if codec == "opus":
        return OpusEncoder().push(np.zeros(_OPUS_FRAME_SAMPLES, dtype=np.int16))[0]
    return (b"\xff" if codec == "pcmu" else b"\xd5") * 160


def encoder_for(codec: Codec) -> WireEncoder:
    return OpusEncoder() if codec == "opus" else G711Encoder(codec)


def decoder_for(codec: Codec) -> WireDecoder:
    return OpusDecoder() if codec == "opus" else G711Decoder(codec)
