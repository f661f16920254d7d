"""A seeded hesitation profile: pauses put into an LLM persona's replies reproducibly.

``persona_settings.hesitation`` of the synthesizer persona (docs/endpointing.md)::

    hesitation: {probability: 0.3, pause_seconds: [0.4, 1.5], max_pauses: 1}

At each gap between two words of a reply (in order, at most ``max_pauses`` times) the user
pauses with ``probability``, for a length drawn uniformly from ``pause_seconds`` (to 10 ms).
The draws come from the trial's seed and the turn's number only, so the same trial says the
same turns with the same pauses (whatever the model's wording, the n-th gap of the n-th turn
makes the same draw).
"""

from __future__ import annotations

from typing import Annotated, TypedDict

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..config import MAX_PAUSE_SECONDS

#: Separates this stream of draws from the trial's other seeded streams.
_STREAM = 0x4E5


class HesitationProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    probability: Annotated[float, Field(ge=0, le=1)]
    pause_seconds: tuple[Annotated[float, Field(gt=0, le=MAX_PAUSE_SECONDS)],
                         Annotated[float, Field(gt=0, le=MAX_PAUSE_SECONDS)]]
    max_pauses: Annotated[int, Field(ge=1, le=10)] = 1

    @model_validator(mode="after")
    def _ordered(self) -> HesitationProfile:
        low, high = self.pause_seconds
        if low > high:
            raise ValueError("pause_seconds is [shortest, longest]")
        return self


class Hesitation(TypedDict, total=False):
    """The ``UserTurn`` fields of a turn said with pauses (none: said in one go)."""

    pieces: tuple[str, ...]
    pauses_seconds: tuple[float, ...]


def hesitate(text: str, profile: HesitationProfile | None, *, seed: int, turn: int
             ) -> Hesitation:
    """``UserTurn`` fields of ``text`` said with the profile's pauses (``pieces``,
    ``pauses_seconds``); {} when it pauses nowhere."""
    words = text.split()
    if profile is None or len(words) < 2:
        return {}
    rng = np.random.default_rng([_STREAM, seed & 0xFFFFFFFF, turn])
    low, high = profile.pause_seconds
    gaps: list[tuple[int, float]] = []
    for gap in range(1, len(words)):
        pause = round(float(rng.uniform(low, high)), 2)
        if float(rng.random()) < profile.probability:
            gaps.append((gap, max(0.01, pause)))
            if len(gaps) == profile.max_pauses:
                break
    if not gaps:
        return {}
    bounds = [0, *(gap for gap, _ in gaps), len(words)]
    pieces = tuple(" ".join(words[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))
    return {"pieces": pieces, "pauses_seconds": tuple(pause for _, pause in gaps)}
