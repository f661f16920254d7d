"""A persona's voice as a speech engine applies it: per-turn rate and pitch from the seed.

Every provider that honours the persona's ``speech`` settings derives a turn's prosody here, so
the same trial seed and text always get the same rate and pitch (and the speech cache can key on
them), and a different seed gets different ones when the persona asks for jitter.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..config import PersonaSpeech

if TYPE_CHECKING:
    from ._protocol import SpeechContext


@dataclass(frozen=True)
class Prosody:
    """Multipliers of an engine's own speaking rate and pitch (1.0: unchanged)."""

    rate: float = 1.0
    pitch: float = 1.0

    @property
    def neutral(self) -> bool:
        return self.rate == 1.0 and self.pitch == 1.0


def _jittered(base: float, jitter: float, rng: random.Random) -> float:
    draw = rng.uniform(-jitter, jitter)  # drawn even without jitter: the streams stay aligned
    return round(base * (1.0 + draw), 4) if jitter else base


def turn_prosody(speech: PersonaSpeech | None, *, seed: int, text: str) -> Prosody:
    """The rate and pitch of the turn that says ``text`` in a trial seeded ``seed``."""
    if speech is None:
        return Prosody()
    digest = hashlib.sha256(f"prosody\x00{seed}\x00{text}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "little"))
    return Prosody(rate=_jittered(speech.rate, speech.rate_jitter, rng),
                   pitch=_jittered(speech.pitch, speech.pitch_jitter, rng))


def prosody_configured(speech: PersonaSpeech | None) -> bool:
    """Whether the persona asks for any rate or pitch other than the engine's own."""
    return speech is not None and (speech.rate != 1.0 or speech.pitch != 1.0
                                   or varies_with_seed(speech))


def varies_with_seed(speech: PersonaSpeech | None) -> bool:
    """Whether the persona's prosody depends on the trial's seed (it has jitter)."""
    return speech is not None and bool(speech.rate_jitter or speech.pitch_jitter)


def primary_language(language: str) -> str:
    """``de`` from ``de-DE`` (lowercase)."""
    return language.split("-", 1)[0].lower()


@dataclass(frozen=True)
class VoiceProblem:
    """Why a provider cannot give the persona its voice: ``key`` is ``language`` (the
    scenario's, else the persona's) or ``speech.voice`` (the persona's)."""

    key: str
    message: str


@runtime_checkable
class ChecksVoice(Protocol):
    """An optional speech provider ability (a classmethod): what keeps it from speaking in the
    persona's voice and language, before any call."""

    def voice_problem(self, settings: Mapping[str, object],
                      context: SpeechContext) -> VoiceProblem | None: ...


def voice_problem(provider_cls: type, settings: Mapping[str, object], context: SpeechContext,
                  *, provider_name: str) -> VoiceProblem | None:
    """What keeps the provider from speaking in the persona's voice and language (None:
    nothing, or the provider does not say: one without ``voice_problem`` speaks any language,
    as tones do)."""
    if not isinstance(provider_cls, ChecksVoice):
        return None
    problem = provider_cls.voice_problem(settings, context)
    if problem is not None and problem.key == "language":
        return VoiceProblem("language", f"language {context.language!r}: speech_provider "
                                        f"{provider_name!r} {problem.message}")
    return problem
