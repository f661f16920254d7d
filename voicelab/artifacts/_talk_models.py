"""The models of voice-metrics.json's ``talk`` (who talked how much) and ``entities`` (what the
product heard of the scenario's key entities, and whether its audio says what its text says).
Definitions: docs/artifacts.md, "What the agent heard, and what it said"."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ._models import ArtifactModel


class TalkMetrics(ArtifactModel):
    """Who talked how much, from the audible speech on the listener timeline (ms)."""

    #: the user's audible speech (voice activity on the user channel, within the user's turns)
    user_talk_ms: float
    #: the product's audible speech (voice activity on the product channel, as heard)
    product_talk_ms: float
    #: product talk time over user talk time (None: the user did not talk)
    talk_ratio: float | None = None
    #: time both were audible at once
    crosstalk_ms: float
    #: the words of the product's completed, uninterrupted responses (their transcripts), over
    #: those responses' speaking time (first to last audible sample), per minute; None: no
    #: such response with words
    product_words_per_minute: float | None = None
    product_words: int = 0
    product_speaking_ms: float | None = None


class EntityCheck(ArtifactModel):
    """One key entity in one turn: said by the user and heard by the product (``input``), or in
    the product's text and said in its audio (``output``)."""

    name: str
    kind: str
    value: str
    direction: Literal["input", "output"]
    #: the user turn that said it (input), the response whose text has it (output)
    turn_id: str
    #: where the compared words came from: ``wire`` (the product's input transcript),
    #: ``asr:<engine>`` (audio recognized locally); None: no words to compare
    source: str | None = None
    #: the entity occurs in the compared words; None: nothing to compare (why says so)
    correct: bool | None = None
    #: the numbers the compared words say (what was heard or said instead of a number)
    numbers_found: list[str] = Field(default_factory=list)
    #: ``scenario`` (an entity the scenario marks) or ``tool`` (a value of the response's tool
    #: calls or results that its text says)
    origin: Literal["scenario", "tool"] = "scenario"
    why: str = ""


class EntityMetrics(ArtifactModel):
    """The scenario's key entities through the call, in the directions whose verdict the
    scenario configures (``entities_heard``: input; ``entities_spoken``: output)."""

    input: list[EntityCheck] = Field(default_factory=list)
    output: list[EntityCheck] = Field(default_factory=list)
    #: correct input checks over decided ones (None: none decided)
    input_accuracy: float | None = None
    output_accuracy: float | None = None
    #: scenario entities no user turn said (not judged)
    not_said: list[str] = Field(default_factory=list)
