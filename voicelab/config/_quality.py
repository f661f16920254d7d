"""``quality_evaluation:``: the run's judges (LLM criteria, Azure evaluators, judge classes)
and the redaction of the evidence they are shown."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ._base import PositiveFloat, StrictModel


class CustomJudge(StrictModel):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_\-]+$")]
    criteria: Annotated[str, Field(min_length=1)]
    is_critical: bool = False
    labels: list[str] = Field(default_factory=lambda: ["pass", "fail"])
    passing_labels: list[str] = Field(default_factory=lambda: ["pass"])


class AzureEvaluator(StrictModel):
    type: Literal["task_adherence", "groundedness", "coherence"]
    threshold: float | None = None
    is_critical: bool = False


class Redaction(StrictModel):
    patterns: list[str] = Field(default_factory=list)
    sensitive_fields: list[str] = Field(default_factory=list)
    replacement: str = "[REDACTED]"

    @field_validator("patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        import re

        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {error}") from None
        return patterns


class JudgeConfig(StrictModel):
    """A judge a class runs (``quality_evaluation.judges``): a built-in name, a name an
    installed distribution registers under ``voicelab.judges``, or ``module:Class``; its
    ``settings`` are the class's own, checked when the run is validated."""

    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_\-]+$")]
    judge: Annotated[str, Field(min_length=1)]
    is_critical: bool = False
    settings: dict[str, object] = Field(default_factory=dict)


class QualityEvaluation(StrictModel):
    provider: Literal["azure_openai", "openai"] | None = None
    timeout_seconds: PositiveFloat = 60.0
    azure_api_version: str = "2025-04-01-preview"
    custom_judges: list[CustomJudge] = Field(default_factory=list)
    azure_evaluators: list[AzureEvaluator] = Field(default_factory=list)
    #: judges a registered class runs, after the LLM judges (no provider needed)
    judges: list[JudgeConfig] = Field(default_factory=list)
    redaction: Redaction = Field(default_factory=Redaction)

    @model_validator(mode="after")
    def _names_unique(self) -> QualityEvaluation:
        """A judge's name keys its result, its calibration and its column: one per judge."""
        names = [judge.name for judge in self.custom_judges] + [
            judge.name for judge in self.judges]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"judge names must be unique: {', '.join(repeated)} repeated")
        return self

    @property
    def has_llm_judges(self) -> bool:
        """Whether any judge calls a language model (and so needs a provider)."""
        return bool(self.custom_judges or self.azure_evaluators)

    @property
    def has_judges(self) -> bool:
        return self.has_llm_judges or bool(self.judges)
