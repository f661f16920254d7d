"""What a trial used and what it cost: the usage every paid call records, the trial's cost
(``trial-report.json`` ``cost``) and the sums of runs, cells, stages and sweeps.

Usage is a fact of the call (recorded as it happens, kept in ``voice-events.jsonl`` and on each
judge's result); cost is derived from it under a price table, so ``rescore --pricing`` prices an
old run under a new table. A quantity that is not known is ``null``, never 0, and an amount that
cannot be computed (no price, unknown quantity) is listed in ``unpriced``, never summed as 0
(docs/cost.md). Versioning: see :mod:`._models`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from ..config import Component, Unit


class ArtifactModel(BaseModel):
    """As :class:`._models.ArtifactModel` (a reader keeps fields a newer voicelab wrote);
    declared here because the trial report's models use these."""

    model_config = ConfigDict(extra="allow")

#: A quantity as recorded (an int stays an int: token counts are exact).
Quantity = int | float


class Usage(ArtifactModel):
    """What one paid call (or a component over the call) used.

    ``quantities`` maps each unit to how much of it was used; ``None``: the provider did not
    say and no documented rule estimates it. ``estimated`` names the units whose quantity comes
    from such a rule (docs/cost.md), not from the provider's own count."""

    component: Component
    provider: str | None = None
    model: str | None = None
    quantities: dict[Unit, Quantity | None] = Field(default_factory=dict)
    estimated: list[Unit] = Field(default_factory=list)
    #: what it was spent on, for a reader (``turn-002``, ``response resp_0003``)
    purpose: str | None = None

    @model_serializer(mode="wrap")
    def _purpose_when_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        if data.get("purpose", False) is None:
            del data["purpose"]
        return data


class CostItem(ArtifactModel):
    """One line of a trial's bill: a component's usage of one unit, summed over its calls."""

    component: Component
    provider: str | None = None
    model: str | None = None
    unit: Unit
    #: None: some call's quantity is not known
    quantity: Quantity | None = None
    #: per unit, from the price table (None: the table has no price for it)
    price: float | None = None
    #: ``quantity x price`` (None: either is not known)
    amount: float | None = None
    #: some of the quantity comes from a documented estimate, not the provider's count
    estimated: bool = False


class UnpricedItem(ArtifactModel):
    """Usage whose amount is not known: no price in the table, or its quantity not known."""

    component: Component
    provider: str | None = None
    model: str | None = None
    unit: Unit
    reason: Literal["no_price", "unknown_quantity"]


class TrialCost(ArtifactModel):
    """``trial-report.json`` ``cost``: the trial's usage priced (docs/cost.md).

    ``total`` sums the items whose amount is known; what it leaves out is in ``unpriced`` (a
    total with an empty ``unpriced`` is the whole cost). ``total`` is None when no item has a
    known amount (and there was usage): an unknown cost is never reported as 0."""

    currency: str | None = None
    total: float | None = None
    items: list[CostItem] = Field(default_factory=list)
    unpriced: list[UnpricedItem] = Field(default_factory=list)


class CostSummary(ArtifactModel):
    """The cost of several trials: a run (one cell), a sweep's cell, a stage or a sweep.

    ``total`` and ``by_component`` sum the trials' known amounts (None: none known);
    ``unpriced`` is every kind of usage some trial could not price; ``trials`` the trials
    summed (those with a trial report)."""

    currency: str | None = None
    total: float | None = None
    by_component: dict[Component, float | None] = Field(default_factory=dict)
    trials: int = 0
    unpriced: list[UnpricedItem] = Field(default_factory=list)
    #: some quantity summed is a documented estimate, not a provider's count
    estimated: bool = False


class BudgetState(ArtifactModel):
    """A run's or sweep's budget (``--max-cost``, a suite's ``budget:``) and what it spent."""

    max_cost: float
    currency: str | None = None
    #: the known amounts of the trials that ran
    spent: float = 0.0
    #: trials not started because the budget would have been passed
    trials_not_started: int = 0


class StageOutcome(ArtifactModel):
    """One stage of a staged sweep (docs/cost.md)."""

    name: str
    status: Literal["passed", "failed", "not_run"]
    #: what the stage's gate asked, and what it found (or why the stage did not run)
    gate: str
    reason: str = ""
    cells: int = 0
    #: trials that ran (executed or not), and passed
    trials: int = 0
    passed_trials: int = 0
    cost: CostSummary | None = None
