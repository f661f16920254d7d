"""Audio: the canonical format, reading and writing, tone speech, environment mixing, signal analysis.

Nothing here knows about turns or endpoints.
"""

from ._format import (
    BYTES_PER_SAMPLE,
    CANONICAL_CHANNELS,
    CANONICAL_ENCODING,
    CANONICAL_FORMAT,
    CANONICAL_SAMPLE_RATE_HZ,
    PCM16_MAX,
    PCM16_MIN,
    AudioFormat,
    PcmAudio,
)
from ._io import read_audio, read_wav_pcm, wav_bytes, write_wav
from ._mixer import MixResult, PreparedEnvironment, mix, prepare_environment
from ._signal import SILENCE_THRESHOLD, SignalAnalysis, analyze_signal, analyze_signals
from ._tone import tone_speech

__all__ = [
    "BYTES_PER_SAMPLE",
    "CANONICAL_CHANNELS",
    "CANONICAL_ENCODING",
    "CANONICAL_FORMAT",
    "CANONICAL_SAMPLE_RATE_HZ",
    "PCM16_MAX",
    "PCM16_MIN",
    "SILENCE_THRESHOLD",
    "AudioFormat",
    "MixResult",
    "PcmAudio",
    "PreparedEnvironment",
    "SignalAnalysis",
    "analyze_signal",
    "analyze_signals",
    "mix",
    "prepare_environment",
    "read_audio",
    "read_wav_pcm",
    "tone_speech",
    "wav_bytes",
    "write_wav",
]
