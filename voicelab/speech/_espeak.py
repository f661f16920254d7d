"""eSpeak NG text-to-speech, offline, in over a hundred languages and accents.

The library and its voice data come inside the ``espeakng-loader`` wheel (``voicelab[speech]``);
nothing is downloaded. Each utterance is synthesized by a short-lived child process
(``_espeak_child.py``, about 40 ms): the library carries state from one synthesis to the next
within a process, and a fresh process is what makes the same request give the same samples.

The voice is the persona's ``speech.voice`` (``en-us``, ``en-gb-scotland``, ``de``, ...), else the
voice for the language the persona speaks (the scenario's ``language``, else the persona's). The
persona's rate and pitch, with their seeded per-turn jitter, scale ``rate_wpm`` and ``pitch``.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import importlib.util
import json
import logging
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..audio import PcmAudio
from ..errors import ConfigError, ExecutionError, MissingDependencyError
from ._piper import _to_canonical, parse_speech_settings
from ._protocol import SpeechContext
from ._voices import VoiceProblem, primary_language, turn_prosody

logger = logging.getLogger(__name__)

CHILD_SCRIPT = Path(__file__).with_name("_espeak_child.py")
EMPTY_TEXT_SECONDS = 0.2
MIN_RATE_WPM, MAX_RATE_WPM = 80, 450
MAX_PITCH = 99
DEFAULT_LANGUAGE = "en-US"
_PCM_BYTES_LIMIT = 64 * 1024 * 1024  # ~25 minutes at 22 kHz: far beyond any turn


class EspeakSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rate_wpm: int = Field(175, ge=MIN_RATE_WPM, le=MAX_RATE_WPM,
                          description="words per minute before the persona's rate")
    pitch: int = Field(50, ge=0, le=MAX_PITCH, description="eSpeak's base pitch (0-99)")
    volume: float = Field(0.5, gt=0, le=1, description="peak level as a fraction of full scale")
    timeout_seconds: float = Field(30.0, gt=0, le=600)


@functools.lru_cache(maxsize=1)
def _library_paths() -> tuple[str, str]:
    if importlib.util.find_spec("espeakng_loader") is None:
        raise MissingDependencyError("espeakng-loader", extra="speech",
                                     purpose="speech_provider 'espeak'", key="speech_provider")
    import espeakng_loader

    return str(espeakng_loader.get_library_path()), str(espeakng_loader.get_data_path())


class EspeakVoice(TypedDict):
    """One voice of the installed eSpeak NG, as its child process lists it."""

    name: str
    identifier: str
    #: its language codes, the first the one it is named for (``en-us``)
    languages: list[str]


def _request(command: str, **fields: JsonValue) -> bytes:
    library, data = _library_paths()
    return json.dumps({"library": library, "data": data, "command": command, **fields}).encode()


def _child_command() -> list[str]:
    # -I -S: the child needs only the standard library, and starts in about 20 ms without site
    return [sys.executable, "-I", "-S", str(CHILD_SCRIPT)]


def _child_failure(what: str, returncode: int | None, stderr: bytes) -> ExecutionError:
    detail = stderr.decode("utf-8", "replace").strip().splitlines()
    return ExecutionError(f"eSpeak NG {what} failed (exit {returncode}): "
                          f"{detail[-1][:300] if detail else 'no message'}")


@functools.lru_cache(maxsize=1)
def espeak_voices() -> tuple[EspeakVoice, ...]:
    """Every voice of the installed eSpeak NG: ``name``, ``identifier`` and ``languages``."""
    request = _request("voices")
    try:
        done = subprocess.run(_child_command(), input=request, capture_output=True, timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ExecutionError(f"eSpeak NG voice listing failed: {error}") from None
    if done.returncode != 0:
        raise _child_failure("voice listing", done.returncode, done.stderr)
    return tuple(json.loads(done.stdout))


def _fold(text: str) -> str:
    return text.strip().replace("_", "-").casefold()


def find_voice(requested: str, voices: tuple[EspeakVoice, ...]) -> EspeakVoice | None:
    """The voice named ``requested`` (its language code, file name, identifier or name)."""
    wanted = _fold(requested)
    for voice in voices:
        identifier = str(voice["identifier"])
        names = {_fold(identifier), _fold(identifier.rsplit("/", 1)[-1]), _fold(voice["name"])}
        if voice["languages"]:
            names.add(_fold(voice["languages"][0]))
        if wanted in names:
            return voice
    return None


def voice_for_language(language: str, voices: tuple[EspeakVoice, ...]) -> EspeakVoice | None:
    """The voice for ``language``: the one named by it (``en-us``), else by its primary subtag
    (``de`` for ``de-AT``), else one that lists the subtag, preferring the country of the
    language's own name (``fr-fr`` for ``fr``), then the shortest identifier."""
    folded, primary = _fold(language), primary_language(language)
    for wanted in (folded, primary):
        for voice in voices:
            if voice["languages"] and _fold(voice["languages"][0]) == wanted:
                return voice
    candidates = [voice for voice in voices if primary in map(_fold, voice["languages"])]
    if not candidates:
        return None
    return min(candidates, key=lambda voice: (_fold(voice["languages"][0]) != f"{primary}-{primary}",
                                              len(voice["identifier"]), voice["identifier"]))


def _speaks(voice: EspeakVoice, language: str) -> bool:
    primary = primary_language(language)
    return any(primary_language(code) == primary for code in voice["languages"])


class EspeakSpeechProvider:
    """eSpeak NG at 22.05 kHz, peak-normalized and resampled to 24 kHz mono pcm_s16le.

    ``voice`` (the script's ``persona_voice``) is ignored like piper's: it usually names a cloud
    voice; the persona's ``speech.voice`` or language chooses the eSpeak voice.
    """

    name = "espeak"
    cacheable = True
    #: the per-turn rate and pitch, and eSpeak's own random seed, come from the trial's seed
    seed_dependent = True

    def __init__(self, settings: Mapping[str, object] | None = None,
                 context: SpeechContext | None = None):
        self.context = context or SpeechContext()
        self.settings = parse_speech_settings(EspeakSettings, settings)
        _library_paths()
        self.persona_speech = self.context.persona_speech
        self.language = self.context.language or DEFAULT_LANGUAGE
        self._voice: EspeakVoice | None = None

    @classmethod
    def check_settings(cls, settings: Mapping[str, object], context: SpeechContext) -> None:
        cls(settings, context)

    @classmethod
    def voice_problem(cls, settings: Mapping[str, object],
                      context: SpeechContext) -> VoiceProblem | None:
        """The persona's voice is unknown, or it (or eSpeak) cannot speak the language."""
        provider = cls(settings, context)
        try:
            provider.voice()
        except ConfigError as error:
            return VoiceProblem(error.key or "language", error.message)
        return None

    def voice(self) -> EspeakVoice:
        """The eSpeak voice this persona speaks with (listed once per process)."""
        if self._voice is not None:
            return self._voice
        voices = espeak_voices()
        requested = self.persona_speech.voice if self.persona_speech is not None else None
        if requested is not None:
            voice = find_voice(requested, voices)
            if voice is None:
                known = ", ".join(sorted(str(v["languages"][0]) for v in voices
                                         if v["languages"])[:12])
                raise ConfigError(f"eSpeak NG has no voice {requested!r} (voices include "
                                  f"{known}, ...)", key="speech.voice")
            if not _speaks(voice, self.language):
                raise ConfigError(f"cannot speak it in the persona's voice {requested!r} "
                                  f"({voice['name']})", key="language")
        else:
            voice = voice_for_language(self.language, voices)
            if voice is None:
                raise ConfigError("cannot speak it: eSpeak NG has no voice for it",
                                  key="language")
        self._voice = voice
        return voice

    @property
    def cache_identity(self) -> dict[str, JsonValue]:
        """What the audio depends on besides (text, seed): settings, voice choice, engine."""
        try:
            version = importlib.metadata.version("espeakng-loader")
        except importlib.metadata.PackageNotFoundError:
            version = None
        speech = self.persona_speech.model_dump(mode="json") if self.persona_speech else None
        return {**self.settings.model_dump(mode="json"), "persona_speech": speech,
                "language": self.language, "engine": f"espeakng-loader {version}"}

    def _parameters(self, text: str, seed: int) -> dict[str, JsonValue]:
        prosody = turn_prosody(self.persona_speech, seed=seed, text=text)
        rate_wpm = min(MAX_RATE_WPM, max(MIN_RATE_WPM,
                                         round(self.settings.rate_wpm * prosody.rate)))
        pitch = min(MAX_PITCH, max(0, round(self.settings.pitch * prosody.pitch)))
        return {"voice": str(self.voice()["identifier"]), "rate_wpm": rate_wpm, "pitch": pitch,
                "rate": prosody.rate, "pitch_factor": prosody.pitch}

    def rendering(self, text: str, *, seed: int) -> dict[str, JsonValue]:
        return self._parameters(text, seed)

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> PcmAudio:
        if not text.strip():
            return PcmAudio.silence(EMPTY_TEXT_SECONDS)
        if self._voice is None:
            await asyncio.to_thread(self.voice)
        parameters = self._parameters(text, seed)
        request = _request("synthesize", text=text, seed=seed, voice=parameters["voice"],
                           rate_wpm=parameters["rate_wpm"], pitch=parameters["pitch"])
        process = await asyncio.create_subprocess_exec(
            *_child_command(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        try:
            async with asyncio.timeout(self.settings.timeout_seconds):
                stdout, stderr = await process.communicate(request)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise ExecutionError(f"eSpeak NG synthesis took over "
                                 f"{self.settings.timeout_seconds:g} s") from None
        if process.returncode != 0:
            raise _child_failure("synthesis", process.returncode, stderr)
        return self._decode(stdout)

    def _decode(self, reply: bytes) -> PcmAudio:
        if len(reply) < 4 or len(reply) > _PCM_BYTES_LIMIT or len(reply) % 2:
            raise ExecutionError(f"eSpeak NG returned {len(reply)} bytes, not 16-bit PCM")
        native_rate_hz = int.from_bytes(reply[:4], "little")
        samples = np.frombuffer(reply[4:], dtype="<i2").astype(np.float32) / 32768.0
        if not samples.size:
            return PcmAudio.silence(EMPTY_TEXT_SECONDS)
        peak = float(np.max(np.abs(samples)))
        if peak > 0:
            samples *= self.settings.volume / peak
        return PcmAudio(_to_canonical(samples, native_rate_hz=native_rate_hz))

    async def aclose(self) -> None:
        return None
