"""How a persona sounds: its disfluency profile and its voice (engine voice, rate, pitch).

Both are applied from the trial's seed (``voicelab.personas`` makes the text disfluent,
``voicelab.speech`` applies the voice), so the same seed gives the same words and samples.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ._base import StrictModel

Probability = Annotated[float, Field(ge=0, le=1)]
#: a BCP 47 language tag as written in configs (``en-US``, ``de``, ``en-GB-scotland``)
LanguageTag = Annotated[str, Field(pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")]

DisfluencyProfileName = Literal["none", "light", "heavy"]


class DisfluencyConfig(StrictModel):
    """Per scripted turn, the probability of each kind of disfluency (at most one of each)."""

    #: a filler ("um", "uh", "you know") at the start of the turn or after a comma
    fillers: Probability = 0.0
    #: the turn's first words started twice ("I want- I want to")
    restarts: Probability = 0.0
    #: a wrong weekday, month or digit said first and corrected ("Monday, no, Tuesday"); only
    #: in a turn that has such a word
    self_corrections: Probability = 0.0
    #: the fillers to choose from; empty: the persona's language's usual ones
    filler_words: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @property
    def active(self) -> bool:
        return bool(self.fillers or self.restarts or self.self_corrections)


#: The named profiles a persona may give instead of the probabilities.
DISFLUENCY_PROFILES: dict[str, DisfluencyConfig] = {
    "none": DisfluencyConfig(),
    "light": DisfluencyConfig(fillers=0.3, restarts=0.1, self_corrections=0.1),
    "heavy": DisfluencyConfig(fillers=0.7, restarts=0.3, self_corrections=0.3),
}


class PersonaSpeech(StrictModel):
    """The persona's voice, for engines that have voices and prosody controls.

    ``rate`` and ``pitch`` are multipliers of the engine's own (1.0: unchanged); each turn
    gets its own seeded jitter, uniform within ``± *_jitter`` of them.
    """

    #: the engine's voice name (espeak: ``en-us``, ``en-gb-scotland``, ``de``, ...); absent:
    #: the engine's voice for the language (the scenario's, else the persona's)
    voice: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    rate: Annotated[float, Field(ge=0.5, le=2.0)] = 1.0
    rate_jitter: Annotated[float, Field(ge=0, le=0.4)] = 0.0
    pitch: Annotated[float, Field(ge=0.5, le=2.0)] = 1.0
    pitch_jitter: Annotated[float, Field(ge=0, le=0.4)] = 0.0


def disfluency_from_profile(value: object) -> Any:
    """A named profile (``light``) as its probabilities; anything else unchanged."""
    if isinstance(value, str) and value in DISFLUENCY_PROFILES:
        return DISFLUENCY_PROFILES[value].model_dump()
    if isinstance(value, str):
        raise ValueError(f"unknown disfluency profile {value!r}; use one of "
                         f"{', '.join(DISFLUENCY_PROFILES)} or a mapping of probabilities")
    return value


class VoicedPersona(StrictModel):
    """The persona fields of this module (``PersonaConfig`` inherits them)."""

    disfluency: DisfluencyConfig = Field(default_factory=DisfluencyConfig)
    speech: PersonaSpeech = Field(default_factory=PersonaSpeech)

    @field_validator("disfluency", mode="before")
    @classmethod
    def _named_profile(cls, value: object) -> Any:
        return disfluency_from_profile(value)
