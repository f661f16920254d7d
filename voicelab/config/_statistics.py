"""How a run's rates are reported (confidence level, interval) and gated.

A run and a suite both carry ``statistics``; a run's ``gates`` are judged on these intervals.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ._base import StrictModel


class StatisticsConfig(StrictModel):
    """How rates are reported: the confidence level and the interval of a binomial rate."""

    confidence: Annotated[float, Field(gt=0, lt=1)] = 0.95
    #: ``wilson`` (score interval) or ``clopper_pearson`` (exact, conservative)
    interval: Literal["wilson", "clopper_pearson"] = "wilson"


class GateConfig(StrictModel):
    """A statistical gate of a run, judged on the conservative end of an interval.

    ``{metric: pass_rate, min_lower_bound: 0.9}``: the pass rate's lower confidence bound must
    reach 0.9. ``{metric: first_audio_latency_ms, quantile: 0.95, max: 800}``: the upper
    confidence bound of the 95th percentile of a per-response metric must stay at or below 800
    (``min`` instead: its lower bound must reach it, for metrics where more is better). Which
    metric names exist is checked when the run is validated.
    """

    metric: Annotated[str, Field(min_length=1)]
    min_lower_bound: Annotated[float, Field(ge=0, le=1)] | None = None
    quantile: Annotated[float, Field(gt=0, lt=1)] | None = None
    max: float | None = None
    min: float | None = None

    @model_validator(mode="after")
    def _complete(self) -> GateConfig:
        if self.metric == "pass_rate":
            if self.min_lower_bound is None or self.quantile is not None \
                    or self.max is not None or self.min is not None:
                raise ValueError("a pass_rate gate takes 'min_lower_bound' (and no quantile, "
                                 "max or min)")
        elif self.quantile is None or (self.max is None) == (self.min is None) \
                or self.min_lower_bound is not None:
            raise ValueError(f"a {self.metric} gate takes 'quantile' and one of 'max' or 'min' "
                             "(min_lower_bound is for metric: pass_rate)")
        return self
