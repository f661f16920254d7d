"""Speech providers: text to canonical PCM."""

from .._registry import Registry
from ._asr import ASR_ENGINE, arecognize, recognize, recognizer_installed, recognizer_missing
from ._azure import AzureSpeechError
from ._cache import SpeechCacheStats, SpeechService
from ._protocol import SpeechContext, SpeechProvider, Synthesis
from ._tone import ToneSpeechProvider

SPEECH_PROVIDERS = Registry("speech provider", {
    "tone": "voicelab.speech._tone:ToneSpeechProvider",
    "piper": "voicelab.speech._piper:PiperSpeechProvider",
    "azure_speech": "voicelab.speech._azure:AzureSpeechProvider",
    "voice_live": "voicelab.speech._voice_live:VoiceLiveSpeechProvider",
})

__all__ = ["SPEECH_PROVIDERS", "AzureSpeechError", "SpeechCacheStats", "SpeechContext",
           "SpeechProvider", "SpeechService", "Synthesis", "ToneSpeechProvider", "arecognize",
           "recognize", "ASR_ENGINE", "recognizer_installed", "recognizer_missing"]
