"""G.711 mu-law and A-law in numpy: the ITU-T segment logic, evaluated once into lookup tables.

Every int16 sample maps to one code and every code to one sample, so both directions are a table
lookup (65,536 entries to encode, 256 to decode). The tables are computed here, vectorized, from
the segment rules of ITU-T G.711 as the reference C implementation (Sun's g711.c, which CPython's
``audioop`` also follows) states them; nothing depends on ``audioop`` at run time (Python 3.13
removed it). The tests compare every value against ``audioop`` where it still exists.

16-bit linear input is reduced to G.711's native resolution first by an arithmetic right shift:
14 bits for mu-law (``>> 2``), 13 bits for A-law (``>> 3``), as ``audioop.lin2ulaw`` and
``lin2alaw`` do for 2-byte samples.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from ._format import PcmAudio

#: G.711 is an 8 kHz codec; decoded audio carries this rate unless the caller says otherwise.
G711_SAMPLE_RATE_HZ = 8_000

_QUANT_MASK = 0x0F
_SEG_SHIFT = 4
_SEG_MASK = 0x70
_SIGN_BIT = 0x80

_MULAW_BIAS = 0x84  # 132: added to the 16-bit magnitude (33 after the 14-bit shift)
_MULAW_CLIP = 8159  # largest 14-bit magnitude mu-law represents
#: upper ends of the eight segments, on the biased 14-bit magnitude
_MULAW_SEGMENT_ENDS = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])
#: upper ends of the eight segments, on the 13-bit magnitude
_ALAW_SEGMENT_ENDS = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])

_ALL_INT16 = np.arange(-32768, 32768, dtype=np.int32)  # index i holds the sample i - 32768
_ALL_CODES = np.arange(256, dtype=np.int32)


@cache
def _mulaw_encode_table() -> np.ndarray:
    value = _ALL_INT16 >> 2
    negative = value < 0
    magnitude = np.minimum(np.where(negative, -value, value), _MULAW_CLIP) + (_MULAW_BIAS >> 2)
    segment = np.searchsorted(_MULAW_SEGMENT_ENDS, magnitude)  # first end >= magnitude
    code = np.where(segment >= 8, 0x7F,  # the clipped maximum lands past the last segment
                    (segment << _SEG_SHIFT) | ((magnitude >> (segment + 1)) & _QUANT_MASK))
    mask = np.where(negative, 0x7F, 0xFF)  # mu-law inverts every bit; positive keeps sign bit 1
    return _by_uint16_view((code ^ mask).astype(np.uint8))


@cache
def _mulaw_decode_table() -> np.ndarray:
    inverted = ~_ALL_CODES & 0xFF
    segment = (inverted & _SEG_MASK) >> _SEG_SHIFT
    magnitude = (((inverted & _QUANT_MASK) << 3) + _MULAW_BIAS) << segment
    linear = np.where(inverted & _SIGN_BIT, _MULAW_BIAS - magnitude, magnitude - _MULAW_BIAS)
    return linear.astype(np.int16)


@cache
def _alaw_encode_table() -> np.ndarray:
    value = _ALL_INT16 >> 3
    negative = value < 0
    magnitude = np.where(negative, -value - 1, value)
    segment = np.searchsorted(_ALAW_SEGMENT_ENDS, magnitude)
    shift = np.maximum(segment, 1)  # segments 0 and 1 share the same step size
    code = np.where(segment >= 8, 0x7F,
                    (segment << _SEG_SHIFT) | ((magnitude >> shift) & _QUANT_MASK))
    mask = np.where(negative, 0x55, 0xD5)  # A-law inverts the even bits; sign bit 1 = positive
    return _by_uint16_view((code ^ mask).astype(np.uint8))


@cache
def _alaw_decode_table() -> np.ndarray:
    toggled = _ALL_CODES ^ 0x55
    segment = (toggled & _SEG_MASK) >> _SEG_SHIFT
    magnitude = ((toggled & _QUANT_MASK) << 4) + np.where(segment == 0, 8, 0x108)
    magnitude = magnitude << np.maximum(segment - 1, 0)
    linear = np.where(toggled & _SIGN_BIT, magnitude, -magnitude)
    return linear.astype(np.int16)


def _by_uint16_view(table_by_sample: np.ndarray) -> np.ndarray:
    """Reorder a table indexed by ``sample + 32768`` to be indexed by ``sample.view(uint16)``.

    Indexing with the unsigned view of the samples needs no arithmetic per sample.
    """
    return np.roll(table_by_sample, -32768)


def _int16_samples(samples: PcmAudio | np.ndarray) -> np.ndarray:
    array = samples.samples if isinstance(samples, PcmAudio) else samples
    if not isinstance(array, np.ndarray) or array.dtype != np.int16:
        raise ValueError("G.711 encodes int16 samples (a PcmAudio or an int16 numpy array), got "
                         f"{array.dtype if isinstance(array, np.ndarray) else type(array).__name__}")
    return array


def _codes(codes: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    if isinstance(codes, np.ndarray):
        if codes.dtype != np.uint8:
            raise ValueError(f"G.711 codes must be uint8, got {codes.dtype}")
        return codes
    return np.frombuffer(codes, dtype=np.uint8)


def mulaw_encode(samples: PcmAudio | np.ndarray) -> bytes:
    """Encode int16 samples as G.711 mu-law, one byte a sample (the wire payload, e.g. Twilio's).

    ``samples`` is a :class:`PcmAudio` or an int16 array of any shape; G.711 itself is defined at
    8 kHz, and resampling to that rate is the caller's job (see :class:`StreamingResampler`).
    """
    array = _int16_samples(samples)
    return _mulaw_encode_table()[array.view(np.uint16)].tobytes()


def mulaw_decode(codes: bytes | bytearray | memoryview | np.ndarray, *,
                 sample_rate_hz: int = G711_SAMPLE_RATE_HZ) -> PcmAudio:
    """Decode G.711 mu-law bytes (or a uint8 array) to int16 PCM at ``sample_rate_hz``."""
    return PcmAudio(_mulaw_decode_table()[_codes(codes).ravel()], sample_rate_hz)


def alaw_encode(samples: PcmAudio | np.ndarray) -> bytes:
    """Encode int16 samples as G.711 A-law, one byte a sample (see :func:`mulaw_encode`)."""
    array = _int16_samples(samples)
    return _alaw_encode_table()[array.view(np.uint16)].tobytes()


def alaw_decode(codes: bytes | bytearray | memoryview | np.ndarray, *,
                sample_rate_hz: int = G711_SAMPLE_RATE_HZ) -> PcmAudio:
    """Decode G.711 A-law bytes (or a uint8 array) to int16 PCM at ``sample_rate_hz``."""
    return PcmAudio(_alaw_decode_table()[_codes(codes).ravel()], sample_rate_hz)


def g711_round_trip(samples: np.ndarray, *, law: str) -> np.ndarray:
    """Encode and decode int16 ``samples`` in one lookup (the channel model's codec step)."""
    tables = {"mulaw": (_mulaw_encode_table, _mulaw_decode_table),
              "alaw": (_alaw_encode_table, _alaw_decode_table)}
    encode_table, decode_table = tables[law]
    return _round_trip_table(encode_table, decode_table)[samples.view(np.uint16)]


@cache
def _round_trip_table(encode_table: Callable[[], np.ndarray],
                      decode_table: Callable[[], np.ndarray]) -> np.ndarray:
    return decode_table()[encode_table()]
