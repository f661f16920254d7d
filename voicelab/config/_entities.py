"""Key entities a scenario marks: the numbers, names, dates and times a caller says that the
product must hear exactly (and, when it says them back, say exactly). See docs/artifacts.md,
"What the agent heard, and what it said"."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator

from ._base import StrictModel

#: ``number``: compared as digits ("4471", "four four seven one", "forty-four seventy-one");
#: ``time``: a clock time ("16:00", "4 pm", "sixteen hundred"); ``text``, ``name``, ``date``:
#: compared as words (case, punctuation and number words aside: "March 3rd" is "march third")
EntityKind = Literal["number", "time", "date", "name", "text"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class EntitySpec(StrictModel):
    """One key entity of a scenario: ``{name: account_number, value: "4471", kind: number}``."""

    name: Annotated[str, Field(min_length=1, max_length=64)]
    value: Annotated[str, Field(min_length=1, max_length=200)]
    kind: EntityKind = "text"

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise ValueError("an entity's name is a word (letters, digits, _ . -)")
        return name

    @field_validator("value")
    @classmethod
    def _something_to_compare(cls, value: str) -> str:
        if not re.search(r"[A-Za-z0-9]", value):
            raise ValueError("an entity's value needs a letter or a digit")
        return value


#: Where the words the product heard come from (run config ``transcription.product_input``):
#: ``auto``, the product's input transcript when its wire sends one for the turn, else the
#: user's audio as the product received it, recognized locally; ``wire``: input transcripts
#: only; ``asr``: always recognized.
ProductInputTranscription = Literal["auto", "wire", "asr"]
