"""The `SpeechProvider` protocol: text in, canonical PCM out.

Constructor contract: ``Provider(settings, context)`` where ``settings`` is the run's
``speech_settings`` mapping and ``context`` a :class:`SpeechContext`. The constructor must not
open connections or import a cloud SDK at module import time. An optional classmethod
``check(settings, context)`` is called by ``validate``: it raises
:class:`~voicelab.errors.ConfigError` (or ``MissingDependencyError``) for a missing package or
credential without any network call.

An optional classmethod ``shortest_speech_seconds(text, context)`` says how long the sound of
``text`` lasts at least, from its first word to its last (validation refuses a script turn that
cannot fit in the scenario's time limit); a provider without it is held to
``MIN_SECONDS_PER_WORD`` (:func:`shortest_speech_seconds`).

Usage (docs/cost.md): each synthesis that calls the provider is recorded on the trial that
asked for it (a cache hit spends nothing) as the characters sent and the seconds of audio made.
A provider that knows better what it was billed (a realtime model's tokens) offers
``synthesize_metered(text, *, voice, seed) -> (PcmAudio, list[Usage])`` beside ``synthesize``.

An optional class attribute ``synthesize_ahead`` (default ``True``) says whether the runner
synthesizes every turn a persona already knows (a script's turns and its repeat request) before
the call, so no synthesis delay sits between a decision to speak and the first sample. A
provider whose synthesis costs about a millisecond of CPU sets it to ``False``: each turn is
synthesized when it is spoken, and a turn never spoken (most repeat requests) costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from ..artifacts import Usage
from ..audio import PcmAudio
from ..config import LoadedRun, PersonaSpeech, Providers, SecretScrubber


@dataclass(frozen=True)
class SpeechContext:
    """What a speech provider is built with: the run's providers, its secrets' scrubber and
    the folder its relative paths start from."""

    providers: Providers = field(default_factory=Providers)
    scrubber: SecretScrubber = field(default_factory=SecretScrubber)
    base_dir: Path = field(default_factory=Path.cwd)
    cache_dir: Path | None = None
    environ: Mapping[str, str] | None = None
    #: the persona's voice (engine voice, rate, pitch), for providers that honour it
    persona_speech: PersonaSpeech | None = None
    #: the language the persona speaks (the scenario's, else the persona's)
    language: str | None = None

    @classmethod
    def for_run(cls, loaded: LoadedRun, *, cache_dir: Path | None = None) -> SpeechContext:
        """The context a run's speech provider gets."""
        return cls(providers=loaded.run.providers, scrubber=loaded.scrubber,
                   base_dir=loaded.base_dir, cache_dir=cache_dir,
                   persona_speech=loaded.persona.speech,
                   language=loaded.scenario.language or loaded.persona.language)


@runtime_checkable
class SpeechProvider(Protocol):
    name: str

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> PcmAudio:
        """Speak ``text`` exactly, returning canonical PCM (24 kHz mono pcm_s16le)."""

    async def aclose(self) -> None:
        """Release clients and sessions; safe to call twice."""


# Optional abilities of a provider, each checked with ``isinstance`` on the provider (or, for a
# class attribute or classmethod, on its class) where it is used.


@runtime_checkable
class NamedProvider(Protocol):
    """Says its name for the record (else its class's name is used)."""

    name: str


@runtime_checkable
class DeclaresSynthesizeAhead(Protocol):
    """Says whether the runner synthesizes known turns before the call (default: it does)."""

    synthesize_ahead: bool


@runtime_checkable
class DeclaresCacheable(Protocol):
    """Says whether its audio may be cached (default: not)."""

    cacheable: bool


@runtime_checkable
class DeclaresSeedDependence(Protocol):
    """Says whether the same text sounds different under another seed (default: it does)."""

    seed_dependent: bool


@runtime_checkable
class HasCacheIdentity(Protocol):
    """What identifies its audio in the cache, instead of the whole ``speech_settings``."""

    cache_identity: Mapping[str, JsonValue]


@runtime_checkable
class KnowsShortestSpeech(Protocol):
    """A classmethod: the least time the sound of ``text`` lasts."""

    def shortest_speech_seconds(self, text: str, context: SpeechContext) -> float: ...


@runtime_checkable
class ReportsRendering(Protocol):
    """What it applies to ``text`` beyond its settings (voice, rate, pitch), for the record."""

    def rendering(self, text: str, *, seed: int) -> Mapping[str, JsonValue]: ...


@runtime_checkable
class MetersSynthesis(Protocol):
    """Synthesizes and says what it was billed (a realtime model's tokens)."""

    async def synthesize_metered(self, text: str, *, voice: str | None,
                                 seed: int) -> tuple[PcmAudio, list[Usage]]: ...


@runtime_checkable
class ClosesAsync(Protocol):
    """Holds clients or sessions to release (``aclose``; safe to call twice)."""

    async def aclose(self) -> None: ...


def synthesizes_ahead(provider: object) -> bool:
    """Whether known turns are synthesized before the call with ``provider`` (or its class)."""
    return bool(provider.synthesize_ahead) if isinstance(provider, DeclaresSynthesizeAhead) \
        else True


def cacheable(provider: object) -> bool:
    """Whether ``provider``'s (or its class's) audio may be cached."""
    return bool(provider.cacheable) if isinstance(provider, DeclaresCacheable) else False


def seed_dependent(provider: object) -> bool:
    """Whether ``provider``'s (or its class's) audio changes with the seed."""
    return bool(provider.seed_dependent) if isinstance(provider, DeclaresSeedDependence) \
        else True


#: How long a word lasts at least when its provider does not say: no voice says more than 20
#: words a second (fast speech is 4 to 6; an engine at twice its rate about 10), so a script
#: turn refused by this bound could never have been said in time.
MIN_SECONDS_PER_WORD = 0.05


def shortest_speech_seconds(provider_cls: type, text: str, context: SpeechContext) -> float:
    """A lower bound of how long ``text`` sounds when ``provider_cls`` says it: the provider's
    own ``shortest_speech_seconds`` (tone's is computed as it renders), else
    ``MIN_SECONDS_PER_WORD`` for each word (a text without spaces counts as one word)."""
    if isinstance(provider_cls, KnowsShortestSpeech):
        return float(provider_cls.shortest_speech_seconds(text, context))
    return MIN_SECONDS_PER_WORD * len(text.split())


def rendering_of(provider: object, text: str, *, seed: int) -> dict[str, JsonValue] | None:
    """What ``provider`` applies to ``text`` beyond its settings (voice, rate, pitch), for the
    record, when it says (an optional ``rendering(text, *, seed)`` method)."""
    return dict(provider.rendering(text, seed=seed)) if isinstance(provider, ReportsRendering) \
        else None


@dataclass(frozen=True)
class Synthesis:
    """What the runner records about one synthesized utterance."""

    audio: PcmAudio
    provider: str
    voice: str | None
    text: str
    cached: bool = False
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    #: what the provider call spent (empty: it was not called, a cache hit)
    usage: list[Usage] = field(default_factory=list)


async def metered_synthesis(provider: SpeechProvider, name: str, text: str, *, voice: str | None,
                            seed: int) -> tuple[PcmAudio, list[Usage]]:
    """``provider``'s synthesis of ``text`` and what it spent: its own account
    (``synthesize_metered``) or the characters sent and seconds made."""
    from ..cost import speech_usage

    if isinstance(provider, MetersSynthesis):
        audio, usage = await provider.synthesize_metered(text, voice=voice, seed=seed)
        return audio, list(usage)
    audio = await provider.synthesize(text, voice=voice, seed=seed)
    duration = audio.duration_seconds if isinstance(audio, PcmAudio) else 0.0
    return audio, [speech_usage(provider=name, voice=voice, text=text, audio_seconds=duration)]
