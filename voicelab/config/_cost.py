"""What a suite may spend: the price table (``pricing:``), a budget, and staged suites.

Usage is recorded where it is spent and cost is derived from it (usage x price, docs/cost.md),
so the price table is configuration, never code: voicelab ships no built-in price, only a
dated example table (``voicelab/_templates/pricing.yaml``).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Literal, get_args

from pydantic import Field, JsonValue, field_validator, model_validator

from ._base import NonNegativeFloat, PositiveFloat, StrictModel

#: Where money is spent in a trial: the simulated user's model, the judges, the user's speech
#: synthesis, speech recognition, the product under test (its call minutes and its own model)
#: and the bundle's storage.
Component = Literal["persona", "judge", "speech", "recognition", "product", "storage"]
COMPONENTS: tuple[str, ...] = get_args(Component)

#: What a quantity counts. Token units are disjoint: ``input_token`` is the text input that was
#: not served from a cache, ``cached_input_token`` the text input that was; the audio units of
#: a realtime model likewise (docs/cost.md).
Unit = Literal["input_token", "cached_input_token", "output_token", "audio_input_token",
               "cached_audio_input_token", "audio_output_token", "character", "second",
               "minute", "request", "gigabyte"]
UNITS: tuple[str, ...] = get_args(Unit)

_STAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


class Price(StrictModel):
    """The price of one unit of a component's usage; ``provider`` and ``model`` narrow it
    (the most specific entry that matches wins)."""

    component: Component
    provider: Annotated[str, Field(min_length=1)] | None = None
    model: Annotated[str, Field(min_length=1)] | None = None
    unit: Unit
    price: NonNegativeFloat

    @property
    def specificity(self) -> int:
        """A provider narrows more than a model (a model name alone may be any provider's)."""
        return 2 * (self.provider is not None) + (self.model is not None)


class PricingConfig(StrictModel):
    """``pricing:`` (or the file ``pricing_path:`` names): prices per unit of usage."""

    currency: Annotated[str, Field(min_length=1, max_length=16)]
    #: when the prices were read off the providers' price lists (they change)
    as_of: date | None = None
    prices: list[Price] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_price_per_match(self) -> PricingConfig:
        seen: set[tuple[str, str | None, str | None, str]] = set()
        for index, entry in enumerate(self.prices):
            key = (entry.component, entry.provider, entry.model, entry.unit)
            if key in seen:
                raise ValueError(f"prices[{index}]: a second price for {_key_text(*key)}")
            seen.add(key)
        return self

    def price_of(self, component: str, provider: str | None, model: str | None,
                 unit: str) -> Price | None:
        """The most specific entry for this usage (None: the table has no price for it)."""
        best: Price | None = None
        for entry in self.prices:
            if entry.component != component or entry.unit != unit:
                continue
            if entry.provider is not None and entry.provider != provider:
                continue
            if entry.model is not None and entry.model != model:
                continue
            if best is None or entry.specificity > best.specificity:
                best = entry
        return best


def _key_text(component: str, provider: str | None, model: str | None, unit: str) -> str:
    narrowed = "/".join(part for part in (provider, model) if part)
    return f"{component}{' ' + narrowed if narrowed else ''} per {unit}"


class BudgetConfig(StrictModel):
    """``budget:``: no new trial starts once what was spent, plus the estimate of the trials
    in flight and of the next, would pass ``max_cost`` (in the price table's currency)."""

    max_cost: PositiveFloat


class MinPassRateGate(StrictModel):
    """The stage's pooled pass rate (every counted trial of its cells) is at least this."""

    min_pass_rate: Annotated[float, Field(ge=0, le=1)]


class LowerBoundGate(StrictModel):
    """The lower end of the stage's pooled pass-rate interval (the suite's ``statistics``:
    Wilson 95% by default) is at least this: evidence, not only an estimate, that the rate is
    high enough (as the run report's ``pass_rate`` gate judges)."""

    min_lower_bound: Annotated[float, Field(ge=0, le=1)]


StageGate = Literal["pass_power_k"] | MinPassRateGate | LowerBoundGate


class StageConfig(StrictModel):
    """One stage of a staged suite: the matrix again with ``overrides`` (the keys ``--set``
    takes) and ``trials``; the next stage runs only when this one's ``gate`` passed."""

    name: str
    overrides: dict[str, JsonValue] = Field(default_factory=dict)
    trials: Annotated[int, Field(gt=0)] | None = None
    gate: StageGate = "pass_power_k"

    @field_validator("name")
    @classmethod
    def _a_folder_name(cls, name: str) -> str:
        if not _STAGE_NAME.match(name):
            raise ValueError("a stage name is letters, digits, '.', '_' and '-' (at most 40, "
                             "starting with a letter or digit): it names the stage's cells")
        return name

    @field_validator("overrides")
    @classmethod
    def _keys_as_set_takes_them(cls, overrides: dict[str, JsonValue]
                                ) -> dict[str, JsonValue]:
        for key in overrides:
            if not isinstance(key, str) or not key.strip() or "=" in key:
                raise ValueError(f"{key!r} is not a key --set takes (dotted.key)")
        return overrides

    def set_overrides(self) -> list[str]:
        """The stage's overrides as ``--set`` arguments (values as JSON, which YAML reads)."""
        import json

        return [f"{key}={json.dumps(value)}" for key, value in self.overrides.items()]

    def gate_text(self) -> str:
        gate = self.gate
        if isinstance(gate, MinPassRateGate):
            return f"pass rate >= {gate.min_pass_rate:g}"
        if isinstance(gate, LowerBoundGate):
            return f"pass-rate interval lower bound >= {gate.min_lower_bound:g}"
        return "pass^k (every trial of every cell passed)"
