"""What a paired comparison found: the result types of :func:`voicelab.analysis.compare`.

Kept apart from the comparing itself so the results read on their own: each side's runs and
pass rate, the paired pass rates, each metric's statistic, the cost, and the whole
:class:`Comparison` with its JSON form (``to_dict``, what ``compare --output`` writes) and its
short text (``lines``, what the command prints). Differences are candidate minus baseline.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import pandas as pd

from ..scoring import DifferenceInterval, GateResult, RateInterval
from ._json import Row


@dataclass(frozen=True)
class RunSide:
    """What one side of the comparison holds: its runs, trials and overall pass rate."""

    run_ids: tuple[str, ...]
    paths: tuple[str, ...]
    trials: int
    execution_failures: int
    pass_rate: RateInterval

    def to_dict(self) -> Row:
        return {**asdict(self), "run_ids": list(self.run_ids), "paths": list(self.paths),
                "pass_rate": self.pass_rate.to_dict()}


@dataclass(frozen=True)
class PassRateComparison:
    """Pass rates of the paired trials and their difference. ``baseline_only`` pairs broke in
    the candidate, ``candidate_only`` pairs were fixed by it."""

    baseline: RateInterval
    candidate: RateInterval
    both: int
    candidate_only: int
    baseline_only: int
    neither: int
    mcnemar_p: float
    difference: DifferenceInterval

    def to_dict(self) -> Row:
        return {**asdict(self), "baseline": self.baseline.to_dict(),
                "candidate": self.candidate.to_dict(), "difference": self.difference.to_dict()}


@dataclass(frozen=True)
class MetricComparison:
    """``statistic`` over trials of a per-turn metric (each trial: the mean of its turns)."""

    metric: str
    statistic: str
    baseline: float | None
    candidate: float | None
    difference: DifferenceInterval
    missing_pairs: int

    def to_dict(self) -> Row:
        return {**asdict(self), "difference": self.difference.to_dict()}


@dataclass(frozen=True)
class CostComparison:
    """What the paired trials cost on each side (their known amounts: docs/cost.md), per
    trial and in all; the change is candidate minus baseline (None: a side has no known cost,
    or the sides are priced in different currencies)."""

    baseline_per_trial: float | None
    candidate_per_trial: float | None
    baseline_total: float | None
    candidate_total: float | None
    change_per_trial: float | None
    currency: str | None
    #: trials on either side whose cost leaves some usage out (no price, unknown quantity)
    incomplete_trials: int = 0
    note: str = ""

    def to_dict(self) -> Row:
        return asdict(self)

    def text(self) -> str:
        unit = f" {self.currency}" if self.currency else ""
        line = (f"cost per trial {_money(self.baseline_per_trial)} -> "
                f"{_money(self.candidate_per_trial)}{unit}")
        if self.change_per_trial is not None:
            relative = "" if not self.baseline_per_trial else \
                f", {self.change_per_trial / self.baseline_per_trial:+.0%}"
            line += f": change {self.change_per_trial:+.4g}{unit}{relative}"
        line += (f" (paired trials in all: {_money(self.baseline_total)} -> "
                 f"{_money(self.candidate_total)}{unit})")
        if self.incomplete_trials:
            line += f"; {self.incomplete_trials} trial(s) priced only in part"
        return line + (f"; {self.note}" if self.note else "")


def _money(amount: float | None) -> str:
    return "n/a" if amount is None else f"{amount:.4g}"


@dataclass(frozen=True, eq=False)
class Comparison:
    """The paired comparison of a candidate run against a baseline (see the module docstring).

    ``unpaired``: one row per trial without a partner (side, cell, seed, trial_id, path).
    ``flips``: one row per verdict that changed between paired trials, with both bundles.
    ``cells``: the pass-rate comparison per cell.
    """

    baseline: RunSide
    candidate: RunSide
    confidence: float
    seed: int
    pairs: int
    pass_rate: PassRateComparison
    metrics: tuple[MetricComparison, ...]
    unpaired: pd.DataFrame
    flips: pd.DataFrame
    cells: pd.DataFrame
    gates: tuple[GateResult, ...] = field(default=())
    #: what the paired trials cost (None: neither side's bundles kept a cost)
    cost: CostComparison | None = None

    @property
    def failed_gates(self) -> tuple[GateResult, ...]:
        return tuple(g for g in self.gates if g.blocks)

    @property
    def passed(self) -> bool:
        """No gate blocks (a CI exits 3 otherwise). With ``gates=()``, True."""
        return not self.failed_gates

    def metric(self, metric: str, statistic: str) -> MetricComparison:
        for compared in self.metrics:
            if (compared.metric, compared.statistic) == (metric, statistic):
                return compared
        raise KeyError(f"{metric} {statistic} was not compared")

    def to_dict(self) -> Row:
        """JSON-ready: plain types, NaN as None."""
        unpaired_counts = self.unpaired["side"].value_counts()
        return {
            "confidence": self.confidence, "seed": self.seed,
            "baseline": self.baseline.to_dict(), "candidate": self.candidate.to_dict(),
            "pairs": self.pairs,
            "unpaired": {"baseline": int(unpaired_counts.get("baseline", 0)),
                         "candidate": int(unpaired_counts.get("candidate", 0)),
                         "trials": _records(self.unpaired)},
            "pass_rate": self.pass_rate.to_dict(),
            "metrics": [m.to_dict() for m in self.metrics],
            "cells": _records(self.cells), "flips": _records(self.flips),
            "gates": [g.to_dict() for g in self.gates], "passed": self.passed,
            "cost": self.cost.to_dict() if self.cost is not None else None,
        }

    def lines(self) -> list[str]:
        """A short text summary for a terminal or a log."""
        rate = self.pass_rate
        unpaired = self.unpaired["side"].value_counts()
        out = [f"baseline {_side_text(self.baseline)}, candidate {_side_text(self.candidate)}",
               f"{self.pairs} pairs by (cell, seed); unpaired: "
               f"{int(unpaired.get('baseline', 0))} baseline, "
               f"{int(unpaired.get('candidate', 0))} candidate trials",
               f"pass rate {rate.baseline} -> {rate.candidate}: change "
               f"{_interval_text(rate.difference, percent=True)}; {rate.baseline_only} broke, "
               f"{rate.candidate_only} fixed, exact McNemar p = {rate.mcnemar_p:.3g}"]
        if self.cost is not None:
            out.append(self.cost.text())
        for compared in self.metrics:
            if compared.baseline is None and compared.candidate is None:
                continue
            missing = f", {compared.missing_pairs} pairs missing" if compared.missing_pairs else ""
            unit = _unit(compared.metric)
            out.append(f"{compared.metric} {compared.statistic} {_number(compared.baseline)} -> "
                       f"{_number(compared.candidate)}{unit}: change "
                       f"{_interval_text(compared.difference)}{unit}{missing}")
        if len(self.flips):
            counts = self.flips.groupby(["verdict", "change"], observed=True).size()
            listed = ", ".join(f"{verdict} {change} in {count}"
                               for (verdict, change), count in counts.items())
            out.append(f"{len(self.flips)} verdict flips: {listed}")
        for gate in self.gates:
            mark = "FAILED" if gate.blocks else gate.status
            out.append(f"gate {mark}: {gate.message}")
        return out


def _side_text(side: RunSide) -> str:
    failures = f", {side.execution_failures} failed to execute" if side.execution_failures else ""
    return f"{', '.join(side.run_ids) or '-'} ({side.trials} trials{failures})"


def _unit(metric: str) -> str:
    return " ms" if metric.endswith("_ms") else ""


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _interval_text(interval: DifferenceInterval, *, percent: bool = False) -> str:
    def show(value: float | None) -> str:
        if value is None:
            return "n/a"
        return f"{value * 100:+.1f} points" if percent else f"{value:+.1f}"

    if not interval.defined:
        return f"{show(interval.estimate)} (no interval: {interval.note})"
    return (f"{show(interval.estimate)} ({interval.confidence:.0%} CI {show(interval.low)} to "
            f"{show(interval.high)})")


def _records(frame: pd.DataFrame) -> list[Row]:
    return json.loads(frame.to_json(orient="records", double_precision=15))
