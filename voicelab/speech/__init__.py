"""Speech providers: text to canonical PCM."""

from .._registry import Registry
from ._asr import (
    ASR_ENGINE,
    ASR_SOURCE,
    arecognize,
    recognize,
    recognizer_installed,
    recognizer_missing,
)
from ._azure import AzureSpeechError
from ._cache import SpeechCacheStats, SpeechService
from ._protocol import (
    MIN_SECONDS_PER_WORD,
    ClosesAsync,
    DeclaresCacheable,
    DeclaresSeedDependence,
    DeclaresSynthesizeAhead,
    HasCacheIdentity,
    KnowsShortestSpeech,
    MetersSynthesis,
    ReportsRendering,
    SpeechContext,
    SpeechProvider,
    Synthesis,
    cacheable,
    metered_synthesis,
    rendering_of,
    seed_dependent,
    shortest_speech_seconds,
    synthesizes_ahead,
)
from ._tone import ToneSpeechProvider
from ._voice_live import (
    normalized_words,
    parse_realtime_settings,
    provider_voice,
    realtime_target,
)
from ._voices import ChecksVoice, Prosody, VoiceProblem, turn_prosody, voice_problem

SPEECH_PROVIDERS = Registry("speech provider", group="voicelab.speech", builtins={
    "tone": "voicelab.speech._tone:ToneSpeechProvider",
    "piper": "voicelab.speech._piper:PiperSpeechProvider",
    "espeak": "voicelab.speech._espeak:EspeakSpeechProvider",
    "azure_speech": "voicelab.speech._azure:AzureSpeechProvider",
    "voice_live": "voicelab.speech._voice_live:VoiceLiveSpeechProvider",
})

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "SpeechContext",
    "ChecksVoice",
    "DeclaresCacheable",
    "DeclaresSeedDependence",
    "DeclaresSynthesizeAhead",
    "HasCacheIdentity",
    "KnowsShortestSpeech",
    "MetersSynthesis",
    "ReportsRendering",
]
