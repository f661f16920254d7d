"""The audio of a phone wire: canonical 24 kHz PCM <-> 20 ms frames of 8 kHz G.711.

A Twilio media stream and a SIP call's RTP carry G.711 (mu-law, or A-law on SIP) at 8 kHz,
mono, one byte a sample, 160 bytes (20 ms) a ``media`` message or RTP packet; every phone wire
converts with this one module, so a line measured on one is measured the same on the other.
The rate conversion (by 3 each way) is the linear-phase FIR the channel model uses,
applied polyphase (``voicelab.audio``'s fixed-latency resampler): flat to 3.4 kHz, 70 dB down
from 4 kHz, so nothing aliases, and every chunk in gives its whole duration out, delayed by a
constant :data:`LINE_LATENCY_MS` (3.6 ms) in each direction. soxr's streaming resampler
(:class:`voicelab.audio.StreamingResampler`) keeps its output back in 40-60 ms blocks, which
would add a variable delay to every latency measured through this adapter.

Pure (no sockets, no clocks): the adapter feeds these in arrival order.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Literal

import numpy as np

from ..audio import (
    CANONICAL_SAMPLE_RATE_HZ,
    G711_SAMPLE_RATE_HZ,
    PCM16_MAX,
    PCM16_MIN,
    FixedLatencyResampler,
    PcmAudio,
    alaw_decode,
    alaw_encode,
    kaiser_lowpass,
    mulaw_decode,
    mulaw_encode,
)

#: The two G.711 laws, by the names environment lines use (``channel.line.codec``).
G711Law = Literal["mulaw", "alaw"]
_ENCODE = {"mulaw": mulaw_encode, "alaw": alaw_encode}
_DECODE = {"mulaw": mulaw_decode, "alaw": alaw_decode}

#: One frame carries 20 ms: 160 G.711 bytes at 8 kHz.
FRAME_MS = 20
FRAME_BYTES = G711_SAMPLE_RATE_HZ * FRAME_MS // 1000
RATE_FACTOR = CANONICAL_SAMPLE_RATE_HZ // G711_SAMPLE_RATE_HZ
#: the phone band's upper edge (ITU-T G.712) and the 8 kHz Nyquist frequency
_PASSBAND_HZ = 3400.0
_STOPBAND_HZ = G711_SAMPLE_RATE_HZ / 2


@cache
def _line_taps() -> np.ndarray:
    return kaiser_lowpass(passband_hz=_PASSBAND_HZ, stopband_hz=_STOPBAND_HZ,
                          sample_rate_hz=CANONICAL_SAMPLE_RATE_HZ, delay_multiple=RATE_FACTOR)


#: The constant delay of each direction's rate conversion (half the filter, 87 samples at 24 kHz).
LINE_LATENCY_MS = (len(_line_taps()) - 1) // 2 * 1000 / CANONICAL_SAMPLE_RATE_HZ


def _to_int16(samples: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(samples), PCM16_MIN, PCM16_MAX).astype(np.int16)


class LineEncoder:
    """Canonical PCM chunks of any length in, whole 20 ms G.711 frames out (``law``).

    What does not fill a frame yet (and input not yet a multiple of 3 samples) waits for the
    next chunk, so a stream cut into any chunks gives the same frames.
    """

    def __init__(self, law: G711Law = "mulaw") -> None:
        self._down = FixedLatencyResampler(down=RATE_FACTOR, taps=_line_taps())
        self._encode = _ENCODE[law]
        self._pending = bytearray()

    def push(self, samples: np.ndarray) -> list[bytes]:
        """The frames completed by ``samples`` (1-D int16 at 24 kHz)."""
        narrow = self._down.process(samples.astype(np.float64))
        if narrow.size:
            self._pending += self._encode(_to_int16(narrow))
        whole = len(self._pending) - len(self._pending) % FRAME_BYTES
        frames = [bytes(self._pending[i:i + FRAME_BYTES]) for i in range(0, whole, FRAME_BYTES)]
        del self._pending[:whole]
        return frames


class LineDecoder:
    """G.711 bytes (``law``) of any length in, canonical 24 kHz PCM out (three samples a byte).

    The last :data:`LINE_LATENCY_MS` of what came in stays in the filter until more arrives;
    :meth:`reset` drops it (the product cleared its audio).
    """

    def __init__(self, law: G711Law = "mulaw") -> None:
        self._decode: Callable[[bytes], PcmAudio] = _DECODE[law]
        self.reset()

    def reset(self) -> None:
        self._up = FixedLatencyResampler(up=RATE_FACTOR, taps=_line_taps())

    def push(self, codes: bytes) -> np.ndarray:
        if not codes:
            return np.zeros(0, dtype=np.int16)
        narrow = self._decode(codes).samples
        return _to_int16(self._up.process(narrow.astype(np.float64)))
