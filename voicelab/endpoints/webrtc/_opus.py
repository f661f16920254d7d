"""The audio of a WebRTC call: canonical 24 kHz PCM <-> Opus packets of 20 ms (RFC 7587).

Toward the product, libopus (through PyAV, which aiortc brings) encodes the canonical rate
directly: Opus takes 24 kHz input, and its RTP clock is 48 kHz whatever the input rate. The
encoder looks ahead :data:`ENCODER_LOOKAHEAD_MS` (6.5 ms in ``voip`` mode): the product hears
the user that much later, a constant delay of voicelab's own processing.

From the product, the decoder gives 48 kHz; the linear-phase polyphase filter voicelab's
phone line uses halves it (flat to 10.5 kHz, 70 dB down from 12 kHz), a constant
:data:`DECODER_DELAY_MS` (1.46 ms), with no block buffering.

Pure (no sockets, no clocks): the adapter feeds these in arrival or sending order.
"""

from __future__ import annotations

import fractions
from functools import cache

import numpy as np

from ...audio import (
    CANONICAL_SAMPLE_RATE_HZ,
    PCM16_MAX,
    PCM16_MIN,
    FixedLatencyResampler,
    kaiser_lowpass,
)

FRAME_MS = 20
OPUS_RATE_HZ = 48_000
#: RTP timestamp units (48 kHz) and canonical samples in one 20 ms frame
RTP_UNITS_PER_FRAME = OPUS_RATE_HZ * FRAME_MS // 1000
FRAME_SAMPLES = CANONICAL_SAMPLE_RATE_HZ * FRAME_MS // 1000
RTP_TIME_BASE = fractions.Fraction(1, OPUS_RATE_HZ)
#: libopus' look-ahead in ``voip`` mode (2.5 ms of analysis plus 4 ms of delay compensation)
ENCODER_LOOKAHEAD_MS = 6.5
#: the largest Opus packet (RFC 6716, 3.2.1: 1275 bytes a frame, up to 48 frames... 120 ms);
#: more is not Opus and is ignored
MAX_OPUS_PACKET_BYTES = 1275 * 3
_DOWN = OPUS_RATE_HZ // CANONICAL_SAMPLE_RATE_HZ
#: zero frames encoded in a row before the encoder's packet for them is reused
SETTLED_ZERO_FRAMES = 5


@cache
def _decoder_taps() -> np.ndarray:
    return kaiser_lowpass(passband_hz=10_500.0, stopband_hz=12_000.0,
                          sample_rate_hz=OPUS_RATE_HZ, delay_multiple=_DOWN)


#: the constant delay of halving the decoder's 48 kHz output
DECODER_DELAY_MS = (len(_decoder_taps()) - 1) // 2 * 1000 / OPUS_RATE_HZ


def _to_int16(samples: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(samples), PCM16_MIN, PCM16_MAX).astype(np.int16)


class OpusLineEncoder:
    """Canonical PCM chunks of any length in, whole 20 ms Opus packets out (what does not
    fill a frame waits for the next chunk).

    Digital silence is not encoded again and again: once :data:`SETTLED_ZERO_FRAMES` frames
    of zeros in a row have been encoded (the encoder's look-ahead and overlap hold nothing
    else by then), each further zero frame is the packet the encoder made of the last one,
    until a sample is not zero. libopus costs about as much for silence as for speech, and a
    quiet user's line is mostly silence: 20 calls' lines encoded every frame took a core.
    """

    def __init__(self, *, bit_rate: int = 32_000):
        from av import CodecContext

        codec = CodecContext.create("libopus", "w")
        codec.sample_rate = CANONICAL_SAMPLE_RATE_HZ
        codec.layout = "mono"
        codec.format = "s16"
        codec.bit_rate = bit_rate
        codec.time_base = fractions.Fraction(1, CANONICAL_SAMPLE_RATE_HZ)
        codec.options = {"application": "voip"}
        codec.open()
        self._codec = codec
        self._pending = np.zeros(0, dtype=np.int16)
        self._frames_in = 0
        self._zero_frames = 0
        self._zero_packet: bytes | None = None
        self.frames_reused = 0

    def push(self, samples: np.ndarray) -> list[bytes]:
        """The packets completed by ``samples`` (1-D int16 at 24 kHz), in order."""
        from av import AudioFrame

        pending = np.concatenate([self._pending, samples.astype(np.int16)]) \
            if self._pending.size else samples.astype(np.int16)
        whole = pending.size - pending.size % FRAME_SAMPLES
        self._pending = pending[whole:]
        packets: list[bytes] = []
        for start in range(0, whole, FRAME_SAMPLES):
            piece = pending[start:start + FRAME_SAMPLES]
            zero = not piece.any()
            self._zero_frames = self._zero_frames + 1 if zero else 0
            if self._zero_packet is not None and self._zero_frames > SETTLED_ZERO_FRAMES:
                packets.append(self._zero_packet)
                self.frames_reused += 1
                continue
            frame = AudioFrame.from_ndarray(piece[None, :], format="s16", layout="mono")
            frame.sample_rate = CANONICAL_SAMPLE_RATE_HZ
            frame.pts = self._frames_in * FRAME_SAMPLES
            self._frames_in += 1
            encoded = [bytes(packet) for packet in self._codec.encode(frame)]
            if zero and self._zero_frames == SETTLED_ZERO_FRAMES and len(encoded) == 1:
                self._zero_packet = encoded[0]
            packets.extend(encoded)
        return packets

    def silence(self) -> bytes:
        """One packet of 20 ms of silence, encoded in turn (keeps the encoder's state whole)."""
        packets = self.push(np.zeros(FRAME_SAMPLES - self._pending.size, dtype=np.int16))
        return packets[0] if packets else b"\xf8\xff\xfe"  # a 20 ms CELT silence frame


class OpusLineDecoder:
    """Opus packets in, canonical 24 kHz PCM out. A packet libopus rejects gives no audio
    (the caller counts it); the last :data:`DECODER_DELAY_MS` stays in the filter until more
    arrives."""

    def __init__(self) -> None:
        from av import CodecContext

        codec = CodecContext.create("libopus", "r")
        codec.sample_rate = OPUS_RATE_HZ
        codec.layout = "mono"
        codec.format = "s16"
        self._codec = codec
        self._down = FixedLatencyResampler(down=_DOWN, taps=_decoder_taps())

    @staticmethod
    def warm_up() -> None:
        """Load the filter's code (scipy) now: the first packet's decode would otherwise stall
        the event loop for a good part of a second, in the middle of the call."""
        FixedLatencyResampler(down=_DOWN, taps=_decoder_taps()).process(np.zeros(_DOWN))

    def push(self, payload: bytes) -> np.ndarray | None:
        """The packet's audio, or None when it does not decode."""
        wide = self.decode(payload)
        return None if wide is None else self.halve(wide)

    def decode(self, payload: bytes) -> np.ndarray | None:
        """The packet's audio at 48 kHz (int16), or None when it does not decode."""
        from av import Packet
        from av.error import FFmpegError

        try:
            frames = self._codec.decode(Packet(payload))
        except (FFmpegError, ValueError):
            return None
        if not frames:
            return np.zeros(0, dtype=np.int16)
        return np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames])

    def halve(self, wide: np.ndarray) -> np.ndarray:
        """48 kHz audio from :meth:`decode` at the canonical 24 kHz. A packet that is not
        halved (withheld silence) leaves the filter's history as it was: the next packet's
        first :data:`DECODER_DELAY_MS` then carries the end of the last one halved, inaudible
        by then, and the delay stays the same."""
        if not wide.size:
            return np.zeros(0, dtype=np.int16)
        return _to_int16(self._down.process(wide.astype(np.float64)))
