"""Estimates from a previous run's measured usage, and a matrix plan's cells estimated.

``plan --from`` prices an earlier run's or sweep's trials again: their costs are read back from
its folder by cell (stage, scenario, persona, environment), and a cell of the plan is estimated
from the ones that match it, else from its configuration (:mod:`._cost_estimate`). It is its own
module because it reads bundles and walks a plan, where the configuration estimate only
computes from one loaded run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..artifacts import TrialCost, UnpricedItem, Usage
from ..config import PricingConfig
from ..cost import price_usage
from ._cost_estimate import CostEstimate, estimate_from_config

# --- from a previous run's measured usage -----------------------------------------------------

def usage_of_cost(cost: TrialCost) -> list[Usage]:
    """A trial's usage as its cost lists it (the quantities summed per unit)."""
    return [Usage(component=item.component, provider=item.provider, model=item.model,
                  quantities={item.unit: item.quantity},
                  estimated=[item.unit] if item.estimated else [])
            for item in cost.items]


def estimate_from_measured(costs: Sequence[TrialCost], *, trials: int,
                           pricing: PricingConfig | None) -> CostEstimate:
    """``trials`` priced from earlier trials' measured usage (their bills, priced again under
    ``pricing``): the cheapest, the mean and the dearest trial, times ``trials``."""
    bills = [price_usage(usage_of_cost(cost), pricing) for cost in costs]
    totals = [bill.total for bill in bills if bill.total is not None]
    seen: dict[tuple[object, ...], UnpricedItem] = {}
    for bill in bills:
        for item in bill.unpriced:
            seen.setdefault((item.component, item.provider, item.model, item.unit, item.reason),
                            item)
    mean = math.fsum(totals) / len(totals) if totals else None
    return CostEstimate(
        currency=pricing.currency if pricing else None,
        low=min(totals) * trials if totals else None,
        expected=mean * trials if mean is not None else None,
        high=max(totals) * trials if totals else None, per_trial=mean, trials=trials,
        source="measured", unpriced=list(seen.values()))


# --- a matrix plan's cells -------------------------------------------------------------------

#: Which cell measured usage is matched to: (stage, scenario, persona, environment).
CellKey = tuple[str | None, str, str, str]


@dataclass(frozen=True)
class CellCost:
    """One cell's estimate in a plan."""

    cell_id: str
    stage: str | None
    estimate: CostEstimate


def read_measured_costs(path: str | os.PathLike[str]) -> dict[CellKey, list[TrialCost]]:
    """Each cell's trial costs in an earlier run or sweep (a local folder; ``latest``
    followed), by (stage, scenario, persona, environment): the measured usage ``plan --from``
    prices again. Trials without a cost (written before it was kept) are left out."""
    from pathlib import Path

    from ..artifacts import (
        MATRIX_REPORT,
        TRIAL_REPORT,
        check_tree,
        find_trial_dirs,
        read_json,
        read_trial_report_json,
        resolve_local_latest,
    )
    from ..errors import ConfigError

    root = resolve_local_latest(Path(path)).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError("no such run or sweep folder", source=root, key="from")
    check_tree(root)  # regular files and folders only, before anything is read
    stages: dict[Path, str | None] = {}
    for matrix in root.rglob(MATRIX_REPORT):
        for cell in read_json(matrix).get("cells") or []:
            if isinstance(cell, dict) and isinstance(cell.get("cell_id"), str):
                stage = cell.get("stage")
                stages[(matrix.parent / cell["cell_id"]).resolve()] = \
                    stage if isinstance(stage, str) else None
    measured: dict[CellKey, list[TrialCost]] = {}
    for trial_dir in find_trial_dirs(root):
        report = read_trial_report_json(trial_dir / TRIAL_REPORT)
        cost = report.get("cost")
        if not isinstance(cost, dict):
            continue
        key: CellKey = (stages.get(trial_dir.parent.resolve()), str(report.get("scenario_id")),
                        str(report.get("persona")), str(report.get("environment")))
        measured.setdefault(key, []).append(TrialCost.model_validate(cost))
    if not measured:
        raise ConfigError("no trial with a recorded cost (runs written before costs were kept "
                          "have none)", source=root, key="from")
    return measured


def matrix_costs(plan: Any, *, measured: Mapping[CellKey, Sequence[TrialCost]] | None = None
                 ) -> list[CellCost]:
    """Each cell of ``plan`` (a :class:`voicelab.runner.MatrixPlan`) estimated for its trials:
    from ``measured`` usage when it holds the cell's (same stage, scenario, persona and
    environment), else from its configuration with the suite's assumed lengths."""
    spec = plan.suite.suite
    costs = []
    for cell in plan.cells:
        loaded, trials = cell.plan.loaded, plan.trials_of(cell)
        found = (measured or {}).get((cell.stage, cell.scenario, cell.persona, cell.environment))
        if found:
            estimate = estimate_from_measured(found, trials=trials, pricing=loaded.run.pricing)
        else:
            estimate = estimate_from_config(
                loaded, trials=trials, pricing=loaded.run.pricing,
                user_turn_seconds=spec.assumed_user_turn_seconds,
                response_seconds=spec.assumed_response_seconds, speech_cls=cell.plan.speech_cls,
                output_transcripts=cell.plan.abilities.capabilities["output_transcripts"],
                endpoint_settings=cell.plan.endpoint_settings)
        costs.append(CellCost(cell.cell_id, cell.stage, estimate))
    return costs
