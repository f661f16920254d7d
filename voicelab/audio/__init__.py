"""Audio: the canonical format, reading and writing, tone speech, environment mixing, signal analysis,
G.711, a streaming resampler and the telephony channel model.

Nothing here knows about turns or endpoints.
"""

from ._channel import (
    Channel,
    ChannelResult,
    ChannelStats,
    ChannelStream,
    DeliveredPacket,
    PacketRecord,
)
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
from ._g711 import G711_SAMPLE_RATE_HZ, alaw_decode, alaw_encode, mulaw_decode, mulaw_encode
from ._io import read_audio, read_wav_pcm, wav_bytes, write_wav
from ._mixer import MixResult, PreparedEnvironment, mix, prepare_environment
from ._resample import StreamingResampler
from ._signal import SILENCE_THRESHOLD, SignalAnalysis, analyze_signal, analyze_signals
from ._tone import tone_speech

__all__ = [
    "BYTES_PER_SAMPLE",
    "CANONICAL_CHANNELS",
    "CANONICAL_ENCODING",
    "CANONICAL_FORMAT",
    "CANONICAL_SAMPLE_RATE_HZ",
    "G711_SAMPLE_RATE_HZ",
    "PCM16_MAX",
    "PCM16_MIN",
    "SILENCE_THRESHOLD",
    "AudioFormat",
    "Channel",
    "ChannelResult",
    "ChannelStats",
    "ChannelStream",
    "DeliveredPacket",
    "MixResult",
    "PacketRecord",
    "PcmAudio",
    "PreparedEnvironment",
    "SignalAnalysis",
    "StreamingResampler",
    "alaw_decode",
    "alaw_encode",
    "analyze_signal",
    "analyze_signals",
    "mix",
    "mulaw_decode",
    "mulaw_encode",
    "prepare_environment",
    "read_audio",
    "read_wav_pcm",
    "tone_speech",
    "wav_bytes",
    "write_wav",
]
