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

__all__ = ["ASR_ENGINE", "ASR_SOURCE", "MIN_SECONDS_PER_WORD", "SPEECH_PROVIDERS", "AzureSpeechError", "Prosody",
           "SpeechCacheStats", "SpeechContext", "SpeechProvider", "SpeechService", "Synthesis",
           "ToneSpeechProvider", "VoiceProblem", "arecognize", "normalized_words",
           "parse_realtime_settings", "provider_voice", "realtime_target", "recognize",
           "recognizer_installed", "recognizer_missing", "metered_synthesis", "rendering_of",
           "shortest_speech_seconds", "turn_prosody", "voice_problem", "ChecksVoice", "ClosesAsync",
           "DeclaresCacheable", "DeclaresSeedDependence", "DeclaresSynthesizeAhead",
           "HasCacheIdentity", "KnowsShortestSpeech", "MetersSynthesis", "ReportsRendering",
           "cacheable", "seed_dependent", "synthesizes_ahead"]
