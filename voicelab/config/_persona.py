"""The persona file (the simulated user) and the script its scripted mode speaks from.

A script turn is validated whole here (its pause markers, keys and barge-in kind), so a turn that
cannot be spoken is refused when the run is validated, not during a call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ._base import NonNegativeFloat, StrictModel
from ._pauses import (
    MAX_PAUSES_PER_SCRIPT,
    SpokenPieces,
    check_pause_count,
    count_pause_markers,
    has_pause_markers,
    split_pauses,
)
from ._voice import LanguageTag, VoicedPersona


class SessionBehavior(StrictModel):
    conclude_quickly: bool = False
    decline_extras: bool = False
    interrupts: bool = False
    patience: Literal["low", "normal", "high"] = "normal"


class PersonaConfig(VoicedPersona):
    name: Annotated[str, Field(min_length=1)]
    experience_level: str | None = None
    communication_style: str | None = None
    specialization: str | None = None
    language: LanguageTag = "en-US"
    description: str = ""
    goals: list[str] = Field(default_factory=list)
    session_behavior: SessionBehavior = Field(default_factory=SessionBehavior)

    @property
    def is_concise(self) -> bool:
        return (self.communication_style or "").strip().lower() == "concise"


class ScriptTurn(StrictModel):
    """One line of a script (docs/scripts.md): said in reply to the first product response whose
    transcript contains one of ``keywords`` (any response when there are none)."""

    #: a label for people (what the product says that this turn answers): never matched
    trigger: str = ""
    response: str = ""
    #: case-insensitive substrings of the product's transcript that make this turn the reply
    keywords: list[str] = Field(default_factory=list)
    #: the trial does not need this turn said: the ``script_turns_said`` verdict leaves it out,
    #: and a script whose unsaid turns are all optional is complete
    optional: bool = False
    audio_path: Path | None = None
    interrupt_after_seconds: NonNegativeFloat | None = None
    #: ``speech``: an ordinary turn (a barge-in when it has ``interrupt_after_seconds``);
    #: ``interruption``: a barge-in the product should stop for; ``backchannel``: a short
    #: acknowledgement spoken ``interrupt_after_seconds`` into the product's speech, after which
    #: the user keeps listening (the product should keep talking). See docs/probes.md.
    kind: Literal["speech", "backchannel", "interruption"] = "speech"
    #: keys pressed on the user's phone after the turn's speech (0-9, * and #), for adapters
    #: that carry DTMF (twilio); a turn may press keys and say nothing
    dtmf: Annotated[str, Field(pattern=r"^[0-9*#]+$")] | None = None
    #: the lengths (seconds) of the bare ``{pause}`` markers in ``response``, in order; a
    #: marker may also carry its own, ``{pause: 1.2}`` (docs/endpointing.md)
    pauses: list[float] | None = None

    @property
    def spoken(self) -> SpokenPieces:
        """``response`` split at its pause markers (validated with the turn)."""
        return split_pauses(self.response, self.pauses)

    @field_validator("response")
    @classmethod
    def _pauses_bounded(cls, response: str) -> str:
        check_pause_count(count_pause_markers(response))
        return response

    @field_validator("pauses")
    @classmethod
    def _lengths_bounded(cls, pauses: list[float] | None) -> list[float] | None:
        check_pause_count(len(pauses or ()))
        return pauses

    @model_validator(mode="after")
    def _has_something_to_say(self) -> ScriptTurn:
        if self.pauses is not None or has_pause_markers(self.response):
            self.spoken  # noqa: B018 - raises ValueError naming a bad marker or length
            if self.audio_path is not None:
                raise ValueError("pause markers need a 'response' text to synthesize, not an "
                                 "'audio_path'")
        if not self.response.strip() and self.audio_path is None and self.dtmf is None:
            raise ValueError("a script turn needs a 'response' text, an 'audio_path' or 'dtmf' "
                             "keys to press")
        if self.kind != "speech" and self.interrupt_after_seconds is None:
            raise ValueError(f"a '{self.kind}' turn is spoken into the product's speech: it "
                             f"needs 'interrupt_after_seconds'")
        if self.kind == "backchannel" and self.dtmf is not None:
            raise ValueError("a 'backchannel' turn cannot press dtmf keys")
        if self.dtmf is not None and self.interrupt_after_seconds is not None:
            if self.kind != "interruption":
                raise ValueError("keys pressed into the product's speech are a key barge-in: "
                                 "set kind: interruption (docs/ivr.md)")
            if self.response.strip() or self.audio_path is not None:
                raise ValueError("a key barge-in presses keys only: it cannot also have "
                                 "'response' or 'audio_path' (say it in a turn of its own)")
        return self


class ScriptConfig(StrictModel):
    persona_voice: str | None = None
    post_script_completion_wait_seconds: NonNegativeFloat = 0.0
    repeat_request: str = "Sorry, could you repeat that?"
    max_repeat_requests: Annotated[int, Field(ge=0)] = 2
    turns: list[ScriptTurn] = Field(default_factory=list)

    @field_validator("turns")
    @classmethod
    def _pauses_bounded(cls, turns: list[ScriptTurn]) -> list[ScriptTurn]:
        check_pause_count(sum(len(turn.spoken.pauses_seconds) for turn in turns
                              if turn.pauses is not None or has_pause_markers(turn.response)),
                          most=MAX_PAUSES_PER_SCRIPT, what="the script")
        return turns
