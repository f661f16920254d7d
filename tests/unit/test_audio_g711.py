"""G.711 in numpy: bit-exact against the standard library's audioop for every sample and code."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from voicelab.audio import (
    G711_SAMPLE_RATE_HZ,
    PcmAudio,
    alaw_decode,
    alaw_encode,
    mulaw_decode,
    mulaw_encode,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # audioop announces its removal
    try:
        import audioop
    except ImportError:  # Python 3.13+: the reference is gone, our code is not
        audioop = None

needs_audioop = pytest.mark.skipif(audioop is None, reason="audioop is not importable")

EVERY_SAMPLE = np.arange(-32768, 32768, dtype=np.int16)
EVERY_CODE = bytes(range(256))
LAWS = {
    "mulaw": (mulaw_encode, mulaw_decode, "lin2ulaw", "ulaw2lin"),
    "alaw": (alaw_encode, alaw_decode, "lin2alaw", "alaw2lin"),
}


@needs_audioop
@pytest.mark.parametrize("law", sorted(LAWS))
def test_encoding_every_int16_value_matches_audioop(law: str) -> None:
    encode, _, reference, _ = LAWS[law]
    ours = np.frombuffer(encode(EVERY_SAMPLE), dtype=np.uint8)
    theirs = np.frombuffer(getattr(audioop, reference)(EVERY_SAMPLE.tobytes(), 2), dtype=np.uint8)
    mismatched = EVERY_SAMPLE[ours != theirs]
    assert mismatched.size == 0, f"{law}: {mismatched.size} samples differ, first {mismatched[:5]}"


@needs_audioop
@pytest.mark.parametrize("law", sorted(LAWS))
def test_decoding_every_code_matches_audioop(law: str) -> None:
    _, decode, _, reference = LAWS[law]
    theirs = np.frombuffer(getattr(audioop, reference)(EVERY_CODE, 2), dtype=np.int16)
    np.testing.assert_array_equal(decode(EVERY_CODE).samples, theirs)


@pytest.mark.parametrize("law", sorted(LAWS))
def test_round_trip_error_is_within_half_a_quantization_step(law: str) -> None:
    """Independent of audioop: the decoded value is the centre of the code's interval, so the
    error grows with the magnitude (logarithmic steps: 16 per segment, segments doubling, the
    coarsest 1024 in 16-bit units for both laws) but stays within half the local step."""
    encode, decode, _, _ = LAWS[law]
    decoded = decode(encode(EVERY_SAMPLE)).samples.astype(np.int64)
    error = np.abs(decoded - EVERY_SAMPLE)
    magnitude = np.abs(EVERY_SAMPLE.astype(np.int64))
    # step at a magnitude is at most magnitude/16 + 16 for both laws (16 steps per segment,
    # segments double); clipping at mu-law's 32124 adds up to 32768 - 32124 at the very top
    allowed = magnitude / 32 + 16 + np.maximum(0, magnitude - 32124)
    assert np.all(error <= allowed)
    # mu-law has a code for zero; A-law's smallest magnitude is 8 (half its first step of 16)
    assert decoded[32768] == {"mulaw": 0, "alaw": 8}[law]


def test_decode_attaches_the_rate_and_accepts_arrays() -> None:
    codes = np.frombuffer(mulaw_encode(PcmAudio(np.array([0, 1000, -1000], dtype=np.int16))),
                          dtype=np.uint8)
    audio = mulaw_decode(codes)
    assert audio.sample_rate_hz == G711_SAMPLE_RATE_HZ == 8000
    assert audio.samples.dtype == np.int16 and audio.num_samples == 3
    assert alaw_decode(b"\xd5\x55", sample_rate_hz=16000).sample_rate_hz == 16000


@pytest.mark.parametrize("bad", [np.zeros(4, dtype=np.float32), np.zeros(4, dtype=np.int32),
                                 [0, 1, 2]])
def test_encode_refuses_anything_but_int16(bad: object) -> None:
    with pytest.raises(ValueError, match="int16"):
        mulaw_encode(bad)  # type: ignore[arg-type]


def test_decode_refuses_wide_codes() -> None:
    with pytest.raises(ValueError, match="uint8"):
        alaw_decode(np.zeros(4, dtype=np.int16))


def test_the_codec_does_not_import_audioop() -> None:
    """audioop is gone in Python 3.13: importing the helpers must not need it."""
    code = ("import sys; import voicelab.audio as a; a.mulaw_encode(a.PcmAudio.silence(0.01)); "
            "print('audioop' in sys.modules)")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert output == "False"
