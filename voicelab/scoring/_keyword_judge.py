"""The built-in ``keywords`` judge: regular expressions over one side's redacted words.

It needs no model and no network, so it is what proves the plug-in judge path end to end, and
a cheap first stage before paid judges: "the assistant confirmed the booking number", "the
assistant never promised a refund".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ..config import StrictModel, parse_settings
from ._evidence import RedactedEvidence
from ._judge_plugins import JudgeVerdict

#: Bounds on what a run file may ask of it (a judge runs once per trial).
MAX_PATTERNS = 100
MAX_PATTERN_CHARS = 500

Pattern = Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_CHARS)]


class KeywordJudgeSettings(StrictModel):
    """``require``: every pattern must match what ``speaker`` said; ``forbid``: none may."""

    require: Annotated[list[Pattern], Field(max_length=MAX_PATTERNS)] = Field(default_factory=list)
    forbid: Annotated[list[Pattern], Field(max_length=MAX_PATTERNS)] = Field(default_factory=list)
    #: whose words are searched: the product's (``assistant``), the simulated user's, or both
    speaker: Literal["assistant", "user", "any"] = "assistant"
    ignore_case: bool = True

    @field_validator("require", "forbid")
    @classmethod
    def _compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"{pattern!r} is not a valid regular expression: "
                                 f"{error}") from None
        return patterns

    @model_validator(mode="after")
    def _something_to_look_for(self) -> KeywordJudgeSettings:
        if not (self.require or self.forbid):
            raise ValueError("give at least one pattern in 'require' or 'forbid'")
        return self


class KeywordJudge:
    """Passes when every ``require`` pattern matches and no ``forbid`` pattern does; its
    score is the share of patterns that went the right way."""

    settings_model = KeywordJudgeSettings

    def __init__(self, settings: Mapping[str, object]):
        self.settings = parse_settings(KeywordJudgeSettings, settings, key=None)
        flags = re.IGNORECASE if self.settings.ignore_case else 0
        self._require = [re.compile(pattern, flags) for pattern in self.settings.require]
        self._forbid = [re.compile(pattern, flags) for pattern in self.settings.forbid]

    def _words(self, evidence: RedactedEvidence) -> str:
        speaker = self.settings.speaker
        return "\n".join(turn["text"] for turn in evidence.transcript
                         if speaker == "any" or turn["role"] == speaker)

    async def judge(self, evidence: RedactedEvidence) -> JudgeVerdict:
        words = self._words(evidence)
        missing = [p.pattern for p in self._require if p.search(words) is None]
        said = [p.pattern for p in self._forbid if p.search(words) is not None]
        total = len(self._require) + len(self._forbid)
        passed = not (missing or said)
        reasons = [f"missing: {', '.join(missing)}"] if missing else []
        reasons += [f"forbidden but said: {', '.join(said)}"] if said else []
        return JudgeVerdict(
            passed=passed, label="pass" if passed else "fail",
            score=(total - len(missing) - len(said)) / total,
            reason="; ".join(reasons) or f"all {total} pattern(s) went the right way")
