"""Simulation against reality, drawn: QQ plots and both sides' distributions (matplotlib is
imported inside the functions, like the other plots)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ._realism import CALLER_METRICS, PRODUCTION, SIMULATION
from ._realism_stats import BehaviourSource, _behaviour, _values

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _sides(simulated: BehaviourSource, real: BehaviourSource
           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    return _behaviour(simulated, SIMULATION), _behaviour(real, PRODUCTION)


def plot_qq(simulated: BehaviourSource, real: BehaviourSource, metric: str) -> Figure:
    """Quantiles of the real calls (y) against the simulation's (x) for one metric, with the
    line y = x: points above it are real callers with more of the metric at that quantile."""
    from ._plots import _figure, _no_data

    sim, rea = _sides(simulated, real)
    x, y = _values(sim, metric), _values(rea, metric)
    figure = _figure(5, 5)
    axes = figure.subplots()
    unit = CALLER_METRICS.get(metric, "")
    if not x.size or not y.size:
        _no_data(axes, f"{metric} on the {'simulated' if not x.size else 'real'} side")
        return figure
    points = min(max(x.size, y.size), 200)
    probabilities = (np.arange(points) + 0.5) / points
    qx, qy = np.quantile(x, probabilities), np.quantile(y, probabilities)
    axes.scatter(qx, qy, s=14)
    low, high = float(min(qx.min(), qy.min())), float(max(qx.max(), qy.max()))
    axes.plot([low, high], [low, high], color="grey", linewidth=0.8, linestyle="--")
    axes.set_xlabel(f"simulated {metric} ({unit}), n={x.size}")
    axes.set_ylabel(f"real {metric} ({unit}), n={y.size}")
    axes.set_title(f"Q-Q: {metric}")
    return figure


def plot_realism(simulated: BehaviourSource, real: BehaviourSource, *,
                 metrics: Sequence[str] | None = None) -> Figure:
    """Both sides' distributions (empirical CDFs), one panel per metric."""
    from ._plots import _figure, _no_data

    sim, rea = _sides(simulated, real)
    present = set(sim["metric"].astype(object)) | set(rea["metric"].astype(object))
    chosen = list(metrics) if metrics is not None else [m for m in CALLER_METRICS
                                                         if m in present]
    columns = min(3, max(1, len(chosen)))
    rows = max(1, -(-len(chosen) // columns))
    figure = _figure(4 * columns, 3 * rows)
    grid = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    for axes, metric in zip(grid, chosen, strict=False):
        drawn = False
        for label, frame, color in (("simulated", sim, "C0"), ("real", rea, "C1")):
            values = np.sort(_values(frame, metric))
            if values.size:
                axes.step(values, np.arange(1, values.size + 1) / values.size, where="post",
                          color=color, label=f"{label} (n={values.size})")
                drawn = True
        if not drawn:
            _no_data(axes, metric)
            continue
        axes.set_xlabel(f"{metric} ({CALLER_METRICS.get(metric, '')})")
        axes.set_ylabel("fraction")
        axes.legend(fontsize="small")
    for axes in grid[len(chosen):]:
        axes.set_visible(False)
    figure.suptitle("callers: simulated against real")
    return figure
