"""What runs cost, as tables and a figure: the cost of each group of trials beside its pass rate,
and a staged sweep's stages (docs/cost.md).

The amounts are the trials' known amounts (``cost_total``: usage with a price); a group whose
trials left usage unpriced says how many (``unpriced_trials``), so a partial sum is never read as
the whole cost.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pydantic import JsonValue

from ..artifacts import MATRIX_REPORT, read_json, resolve_local_latest
from ._json import JsonObject, Row, object_or_empty
from ._rates import pass_rate_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COMPONENTS = ("persona", "judge", "speech", "recognition", "product", "storage")


def _by(trials: pd.DataFrame, by: str | Sequence[str]) -> list[str]:
    columns = [by] if isinstance(by, str) else list(by)
    return [c for c in columns if c in trials.columns and trials[c].notna().any()]


def cost_table(trials: pd.DataFrame, *, by: str | Sequence[str] = "cell") -> pd.DataFrame:
    """Per group of ``trials`` (a frames' trials): trials, the pass rate with its interval, the
    cost in all and per trial, each component's share, and the trials priced only in part.
    Empty when no trial kept a cost."""
    if "cost_total" not in trials.columns:
        return pd.DataFrame()
    keys = _by(trials, by)
    frame = trials.assign(_all="all") if not keys else trials
    keys = keys or ["_all"]
    rates = pass_rate_table(frame, by=keys)
    grouped = frame.groupby(keys, observed=True, sort=True)
    totals = pd.to_numeric(frame["cost_total"], errors="coerce")
    table = pd.DataFrame({
        "trials": grouped.size(),
        "cost_total": totals.groupby([frame[k] for k in keys], observed=True).sum(min_count=1),
        "cost_per_trial": totals.groupby([frame[k] for k in keys], observed=True).mean()})
    for component in COMPONENTS:
        column = f"cost_{component}"
        if column in frame.columns:
            table[column] = pd.to_numeric(frame[column], errors="coerce").groupby(
                [frame[k] for k in keys], observed=True).sum(min_count=1)
    unpriced = pd.to_numeric(frame.get("cost_unpriced", pd.Series(0, index=frame.index)),
                             errors="coerce").fillna(0) > 0
    table["unpriced_trials"] = unpriced.groupby([frame[k] for k in keys], observed=True).sum()
    if "cost_currency" in frame.columns:
        table["currency"] = frame["cost_currency"].astype(object).groupby(
            [frame[k] for k in keys], observed=True).first()
    table = table.reset_index()
    merged = table.merge(rates[[*keys, "estimate", "low", "high"]].rename(columns={
        "estimate": "pass_rate", "low": "pass_rate_low", "high": "pass_rate_high"}),
        on=keys, how="left")
    return merged.drop(columns=["_all"], errors="ignore")


def stage_table(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
                ) -> pd.DataFrame:
    """The stages of staged sweeps (their ``matrix-report.json``): each stage's status, gate
    and why, trials and cost, in order; empty when none of ``paths`` is a staged sweep."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    rows: list[Row] = []
    for given in paths:
        folder = resolve_local_latest(Path(given)).expanduser()
        if not (folder / MATRIX_REPORT).is_file():
            continue
        report = read_json(folder / MATRIX_REPORT)
        for order, stage in enumerate(report.get("stages") or [], 1):
            if not isinstance(stage, dict):
                continue
            cost: JsonObject = object_or_empty(stage.get("cost"))
            rows.append({"sweep": report.get("label") or report.get("run_id"), "order": order,
                         "stage": stage.get("name"), "status": stage.get("status"),
                         "gate": stage.get("gate"), "reason": stage.get("reason"),
                         "cells": stage.get("cells"), "trials": stage.get("trials"),
                         "passed_trials": stage.get("passed_trials"),
                         "cost_total": cost.get("total"), "currency": cost.get("currency"),
                         "unpriced": _count(cost.get("unpriced"))})
    return pd.DataFrame(rows)


def plot_cost_and_pass_rate(trials: pd.DataFrame, *, by: str | Sequence[str] = "cell"
                            ) -> Figure:
    """Two panels sharing the groups of ``trials``: the cost per trial (stacked by component;
    hatched where some usage had no price), and the pass rate with its interval."""
    from matplotlib.figure import Figure

    table = cost_table(trials, by=by)
    figure = Figure(figsize=(10, 1.4 + 0.45 * max(1, len(table))), layout="constrained")
    cost_axes, rate_axes = figure.subplots(1, 2, sharey=True)
    if table.empty:
        for axes in (cost_axes, rate_axes):
            axes.text(0.5, 0.5, "no trial kept a cost", ha="center", va="center",
                      transform=axes.transAxes)
        return figure
    keys = _by(trials, by)
    labels = [" / ".join(str(row[k]) for k in keys) or "all" for _, row in table.iterrows()]
    positions = np.arange(len(table))
    left = np.zeros(len(table))
    for component in COMPONENTS:
        column = f"cost_{component}"
        if column not in table.columns:
            continue
        per_trial = (table[column].fillna(0) / table["trials"]).to_numpy(dtype=float)
        if not per_trial.any():
            continue
        cost_axes.barh(positions, per_trial, left=left, label=component)
        left += per_trial
    partial = table["unpriced_trials"].to_numpy() > 0
    if partial.any():
        cost_axes.barh(positions[partial], left[partial], fill=False, hatch="//",
                       edgecolor="grey", label="priced in part")
    currency = next((str(c) for c in table.get("currency", pd.Series(dtype=object)).dropna()),
                    "")
    cost_axes.set_xlabel(f"cost per trial{' (' + currency + ')' if currency else ''}")
    cost_axes.set_yticks(positions, labels)
    cost_axes.invert_yaxis()
    cost_axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncols=4,
                     fontsize="small", frameon=False)
    rate = table["pass_rate"].to_numpy(dtype=float)
    low = table["pass_rate_low"].to_numpy(dtype=float)
    high = table["pass_rate_high"].to_numpy(dtype=float)
    rate_axes.errorbar(rate, positions, xerr=[rate - low, high - rate], fmt="o", capsize=3)
    rate_axes.set_xlim(-0.02, 1.02)
    rate_axes.set_xlabel("pass rate (interval)")
    figure.suptitle("Cost per trial beside the pass rate")
    return figure


__all__ = ["cost_table", "plot_cost_and_pass_rate", "stage_table"]


def _count(items: JsonValue) -> int:
    """How many items a list field holds (none when it was left out or null)."""
    return len(items) if isinstance(items, list) else 0
