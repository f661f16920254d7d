"""Local speech recognition with pocketsphinx (the US English model shipped in its wheel).

Used after a conversation to check what was actually *said* in recorded audio (the product's
transcript against its own audio, a persona's speech against its text). Recognition is CPU work:
the async wrapper runs it in a worker thread. A decoder takes about 0.3 s to load, so decoders
are pooled per process (one per concurrent recognition) and reused.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
from typing import TYPE_CHECKING

import numpy as np

from ..audio import SILENCE_THRESHOLD, PcmAudio
from ..errors import MissingDependencyError

if TYPE_CHECKING:
    from pocketsphinx import Config, Decoder

logger = logging.getLogger(__name__)

ASR_SAMPLE_RATE_HZ = 16_000
#: The local recognizer's name, as a recognized transcript's source says it (``asr:pocketsphinx``).
ASR_ENGINE = "pocketsphinx"
#: A recognized transcript's ``text_source``.
ASR_SOURCE = f"asr:{ASR_ENGINE}"

_CONFIG: Config | None = None
_IDLE_DECODERS: list[Decoder] = []
_POOL_LOCK = threading.Lock()


def recognizer_installed() -> bool:
    """The local recognizer can be loaded here (imports nothing)."""
    return importlib.util.find_spec("pocketsphinx") is not None


def recognizer_missing(purpose: str, *, source: str | None = None,
                       key: str | None = None) -> MissingDependencyError:
    """The error (its message the exact ``pip install`` line) for a missing recognizer."""
    return MissingDependencyError("pocketsphinx", extra="speech", purpose=purpose,
                                  source=source, key=key)


def _decoder_config() -> Config:
    """The process-wide pocketsphinx ``Config`` (default en-US model, quiet logging)."""
    global _CONFIG
    if _CONFIG is None:
        try:
            from pocketsphinx import Config
        except ImportError:
            raise recognizer_missing("local speech recognition") from None
        _CONFIG = Config(loglevel="FATAL")
    return _CONFIG


def _acquire_decoder() -> Decoder:
    with _POOL_LOCK:
        config = _decoder_config()
        if _IDLE_DECODERS:
            return _IDLE_DECODERS.pop()
    from pocketsphinx import Decoder

    logger.debug("loading a pocketsphinx decoder")
    return Decoder(config)


def _release_decoder(decoder: Decoder) -> None:
    with _POOL_LOCK:
        _IDLE_DECODERS.append(decoder)


def to_asr_pcm(audio: PcmAudio) -> np.ndarray:
    """``audio`` as 16 kHz int16 samples (soxr high quality)."""
    if audio.sample_rate_hz == ASR_SAMPLE_RATE_HZ or audio.num_samples == 0:
        return audio.samples
    import soxr

    floats = audio.samples.astype(np.float32) / 32768.0
    resampled = soxr.resample(floats, audio.sample_rate_hz, ASR_SAMPLE_RATE_HZ, quality="HQ")
    return np.clip(np.round(resampled * 32768.0), -32768, 32767).astype(np.int16)


def recognize(audio: PcmAudio) -> str:
    """The words pocketsphinx hears in ``audio`` (lowercase, space-separated; "" for none).

    Blocking; use :func:`arecognize` from async code.
    """
    samples = to_asr_pcm(audio)
    if samples.size < ASR_SAMPLE_RATE_HZ // 10:  # under 0.1 s: nothing to recognize
        return ""
    if int(np.max(np.abs(samples.astype(np.int32)))) <= SILENCE_THRESHOLD:
        return ""  # the decoder hallucinates short words ("you") in digital silence
    decoder = _acquire_decoder()
    decoder.start_utt()
    decoder.process_raw(np.ascontiguousarray(samples, dtype="<i2").tobytes(),
                        no_search=False, full_utt=True)
    decoder.end_utt()
    hypothesis = decoder.hyp()
    # Only reached on success: a decoder that failed mid-utterance is dropped, not pooled.
    _release_decoder(decoder)
    if hypothesis is None:
        return ""
    words = [word for word in hypothesis.hypstr.split() if not word.startswith(("<", "["))]
    return " ".join(words)


async def arecognize(audio: PcmAudio) -> str:
    """:func:`recognize` in a worker thread."""
    return await asyncio.to_thread(recognize, audio)
