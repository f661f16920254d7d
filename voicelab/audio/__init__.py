"""Audio: the canonical format, reading and writing, tone speech, environment mixing, signal analysis,
G.711, a streaming resampler, the telephony channel model and voice activity detection.

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
from ._echo import EchoPath, add_echo, room_impulse_response
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
from ._io import (
    channel_count,
    read_audio,
    read_channels,
    read_wav_pcm,
    wav_buffer,
    wav_bytes,
    write_wav,
)
from ._line_codecs import build_codec
from ._mixer import MixResult, PreparedEnvironment, mix, prepare_environment
from ._polyphase import FixedLatencyResampler, kaiser_lowpass
from ._resample import StreamingResampler
from ._signal import (
    AUDIBLE_BRIDGE_SECONDS,
    SILENCE_THRESHOLD,
    TELEPHONE_BAND_HZ,
    SignalAnalysis,
    analyze_signal,
    analyze_signals,
    audible_edges,
    silence_around,
    telephone_band,
)
from ._tone import EDGE_SECONDS as TONE_EDGE_SECONDS
from ._tone import tone_speech, tone_speech_seconds
from ._vad import (
    FRAME_MS,
    VAD_BACKENDS,
    SpeechBounds,
    StreamingVad,
    VadTransition,
    detect_speech,
    speech_bounds,
)

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "kaiser_lowpass",
    "CANONICAL_SAMPLE_RATE_HZ",
    "G711_SAMPLE_RATE_HZ",
    "Channel",
    "FixedLatencyResampler",
    "ChannelStream",
    "PcmAudio",
    "StreamingResampler",
    "StreamingVad",
    "alaw_decode",
    "alaw_encode",
    "analyze_signal",
    "detect_speech",
    "mix",
    "mulaw_decode",
    "mulaw_encode",
    "prepare_environment",
    "speech_bounds",
    "tone_speech",
]
