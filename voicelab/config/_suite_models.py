"""The suite file: a matrix of scenarios x personas x environments x trials over a base run,
with its endpointing sweep, prices, budget and stages (loading it: ``_suite``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ._base import PositiveFloat, StrictModel
from ._cost import BudgetConfig, PricingConfig, StageConfig
from ._pauses import check_pause_seconds
from ._statistics import StatisticsConfig


class SuitePersona(StrictModel):
    """One persona of a matrix, with the script and data it speaks from."""

    persona: Path
    script: Path | None = None
    data: Path | None = None
    persona_mode: str | None = None


class EndpointingAxis(StrictModel):
    """A suite's endpointing sweep (docs/endpointing.md): every cell once per pause length,
    given to the bare ``{pause}`` marker of script turn ``turn`` (``script.turns.N.pauses``)."""

    turn: Annotated[int, Field(ge=0)] = 0
    pause_seconds: Annotated[list[float], Field(min_length=1, max_length=100)]

    @field_validator("pause_seconds")
    @classmethod
    def _pauses_in_range(cls, values: list[float]) -> list[float]:
        for value in values:
            check_pause_seconds(value)
        if len(set(values)) != len(values):
            raise ValueError("each pause length once")
        return values


class SuiteConfig(StrictModel):
    name: str = ""
    base: Path = Field(description="a run config every cell inherits (endpoint, speech, seeds...)")
    scenarios: list[Path] = Field(default_factory=list)
    personas: list[SuitePersona] = Field(default_factory=list)
    environments: list[Path | Literal["quiet"]] = Field(default_factory=list)
    trials: Annotated[int, Field(gt=0)] = 1
    concurrency: Annotated[int, Field(gt=0)] = 2
    artifacts_dir: Path | str | None = None  # a folder or a store URL, as the run's
    assumed_response_seconds: PositiveFloat = 5.0
    assumed_user_turn_seconds: PositiveFloat = 3.0
    #: when given, every cell reports with it (else each cell keeps its base run's)
    statistics: StatisticsConfig | None = None
    #: the endpointing curve: every cell once per pause length (docs/endpointing.md)
    endpointing: EndpointingAxis | None = None
    #: when given, every cell is priced with it (else each cell keeps its base run's)
    pricing: PricingConfig | None = None
    pricing_path: Path | None = None
    #: the most the sweep may spend (docs/cost.md); ``--max-cost`` replaces it
    budget: BudgetConfig | None = None
    #: run the matrix once per stage, cheap stages first; a stage whose gate fails stops the
    #: sweep (docs/cost.md)
    stages: list[StageConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _stages_and_prices(self) -> SuiteConfig:
        if self.pricing is not None and self.pricing_path is not None:
            raise ValueError("give pricing or pricing_path, not both")
        names = [stage.name for stage in self.stages]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"two stages are named {name!r}")
        return self
