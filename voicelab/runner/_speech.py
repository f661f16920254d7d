"""Opening the run's speech provider (shared by all trials) behind the caching service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import LoadedRun
from ..speech import (
    ClosesAsync,
    SpeechContext,
    SpeechService,
    Synthesis,
    cacheable,
    metered_synthesis,
    rendering_of,
    synthesizes_ahead,
)


class _UncachedSpeech:
    """A provider seen through the service interface, for providers that are cheap to call."""

    def __init__(self, provider: Any, name: str):
        self.provider = provider
        self.name = name
        self.synthesize_ahead = synthesizes_ahead(provider)

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> Synthesis:
        audio, usage = await metered_synthesis(self.provider, self.name, text, voice=voice,
                                               seed=seed)
        rendering = rendering_of(self.provider, text, seed=seed)
        return Synthesis(audio=audio, provider=self.name, voice=voice, text=text, cached=False,
                         metadata={"rendering": rendering} if rendering else {}, usage=usage)

    async def aclose(self) -> None:
        if isinstance(self.provider, ClosesAsync):
            await self.provider.aclose()


def open_speech(loaded: LoadedRun, provider_cls: type, *, cache_dir: Path | None) -> Any:
    """The run's speech provider (resolved by validation) behind the caching service."""
    name = loaded.run.speech_provider
    context = SpeechContext.for_run(loaded, cache_dir=cache_dir)
    provider = provider_cls(loaded.run.speech_settings, context)
    if not cacheable(provider_cls):
        return _UncachedSpeech(provider, name)
    return SpeechService(provider, settings=loaded.run.speech_settings, cache_dir=cache_dir)
