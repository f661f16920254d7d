"""The endpointing curve from the turns frame: cut-in probability and latency over pause length.

The numbers are the run report's (:mod:`voicelab.scoring`: the same grouping, intervals and
interpolated half-cut-in pause), computed from whichever turns the frame holds (a sweep's
cells, several runs, one product's runs side by side with ``by``). docs/endpointing.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..config import StatisticsConfig
from ..scoring import Hesitation, curve_of, endpointing_curve

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_POINT_COLUMNS = ("pause_ms", "turns", "cut_ins", "cut_in_probability", "cut_in_low",
                  "cut_in_high", "latency_turns", "latency_median_ms", "latency_median_low_ms",
                  "latency_median_high_ms")


#: What a curve's x-axis is: the nominal pause the script asked for, or the silence an 8 kHz
#: phone line carries around it (docs/endpointing.md), by the turns frame's column.
PAUSE_AXES = {"nominal": "user_pauses_ms", "phone_band": "user_pauses_phone_band_ms"}


def _observations(turns: pd.DataFrame, *, pause: str = "nominal",
                  bin_ms: float | None = None) -> list[Hesitation]:
    if pause not in PAUSE_AXES:
        raise ValueError(f"unknown pause axis {pause!r}; expected one of "
                         f"{', '.join(PAUSE_AXES)}")
    column = PAUSE_AXES[pause]
    if column not in turns.columns or "product_cut_in" not in turns.columns:
        return []
    found = []
    latency = turns["response_latency_ms"] if "response_latency_ms" in turns.columns \
        else pd.Series([None] * len(turns), index=turns.index)
    for pauses, cut_in, late in zip(turns[column], turns["product_cut_in"], latency,
                                    strict=True):
        if not isinstance(pauses, list | tuple | np.ndarray) or cut_in is None \
                or pd.isna(cut_in):
            continue
        lengths = [float(p) for p in pauses if p is not None and not pd.isna(p)]
        if not lengths:
            continue
        longest = max(lengths)
        if bin_ms:
            longest = round(longest / bin_ms) * bin_ms
        found.append(Hesitation(longest, bool(cut_in),
                                None if late is None or pd.isna(late) else float(late)))
    return found


def _groups(turns: pd.DataFrame, by: str | None) -> list[tuple[str | None, pd.DataFrame]]:
    if by is None:
        return [(None, turns)]
    if by not in turns.columns:
        raise ValueError(f"the turns frame has no column {by!r}")
    return [(str(label), part) for label, part in turns.groupby(by, observed=True, sort=True)]


def endpointing_frame(turns: pd.DataFrame, *, by: str | None = None,
                      statistics: StatisticsConfig | None = None, pause: str = "nominal",
                      bin_ms: float | None = None) -> pd.DataFrame:
    """One row per pause length (and value of ``by``): hesitation turns, cut-ins, the cut-in
    probability with its interval, the waited-through latency's median with its interval, and
    the group's ``half_cut_in_pause_ms`` (how it was found: ``half_cut_in``).

    ``pause``: the x-axis, ``nominal`` (the script's pause) or ``phone_band`` (the silence an
    8 kHz phone line carries around it: longer by the edges of the neighbouring words outside
    the telephone band); ``bin_ms`` groups the pauses to that step (the phone-band silences
    differ turn by turn: 20 ms makes points of them)."""
    statistics = statistics or StatisticsConfig()
    rows = []
    for label, part in _groups(turns, by):
        curve = endpointing_curve(_observations(part, pause=pause, bin_ms=bin_ms), statistics)
        if curve is None:
            continue
        for point in curve.points:
            values = point.model_dump()
            row = {column: values.get(column) for column in _POINT_COLUMNS}
            row.update(half_cut_in_pause_ms=curve.half_cut_in_pause_ms,
                       half_cut_in=curve.half_cut_in)
            rows.append({by: label, **row} if by is not None else row)
    columns = [*([by] if by is not None else []), *_POINT_COLUMNS, "half_cut_in_pause_ms",
               "half_cut_in"]
    return pd.DataFrame(rows, columns=columns)


def half_cut_in_pause(frame: pd.DataFrame) -> tuple[float | None, str]:
    """The pause (ms) at which an endpointing frame's product cuts in half the time, and how it
    was found (``interpolated``, ``at_point``, ``below_range``, ``above_range``, ``no_data``);
    a frame of one group (``by=None``)."""
    if frame.empty:
        return None, "no_data"
    from ..artifacts import EndpointingPoint

    points = [EndpointingPoint(**{c: (None if pd.isna(row[c]) else row[c])
                                  for c in _POINT_COLUMNS}) for _, row in frame.iterrows()]
    curve = curve_of(points)
    return curve.half_cut_in_pause_ms, curve.half_cut_in


def _describe(pause: object, how: object) -> str:
    if how in ("interpolated", "at_point") and pause is not None and not pd.isna(pause):
        return f"half the time at {float(pause):.0f} ms"  # type: ignore[arg-type]
    return {"below_range": "cuts in half the time below the shortest pause",
            "above_range": "never cuts in half the time in the measured range"}.get(
                str(how), "no hesitation turns")


def plot_endpointing(frame: pd.DataFrame, *, by: str | None = None) -> Figure:
    """Cut-in probability (with its interval) and the waited-through latency (median with its
    interval) over pause length; the half-cut-in pause marked."""
    from ._plots import _figure, _no_data

    figure = _figure(11, 4)
    rate_axes, latency_axes = figure.subplots(1, 2)
    if frame.empty:
        _no_data(rate_axes, "hesitation turns")
        _no_data(latency_axes, "hesitation turns")
        return figure
    groups = [(None, frame)] if by is None else \
        [(str(label), part) for label, part in frame.groupby(by, observed=True, sort=True)]
    for label, part in groups:
        part = part.sort_values("pause_ms")
        pause = part["pause_ms"].to_numpy(dtype=float)
        rate = part["cut_in_probability"].to_numpy(dtype=float)
        errors = np.vstack([rate - part["cut_in_low"].to_numpy(dtype=float),
                            part["cut_in_high"].to_numpy(dtype=float) - rate])
        first = part.iloc[0]
        name = _describe(first["half_cut_in_pause_ms"], first["half_cut_in"])
        line = rate_axes.errorbar(pause, rate, yerr=errors, marker="o", capsize=3,
                                  label=f"{label}: {name}" if label else name)
        half = first["half_cut_in_pause_ms"]
        if half is not None and not pd.isna(half):
            rate_axes.axvline(float(half), linestyle=":", color=line.lines[0].get_color())
        waited = part[part["latency_median_ms"].notna()]
        if not waited.empty:
            median = waited["latency_median_ms"].to_numpy(dtype=float)
            low = waited["latency_median_low_ms"].to_numpy(dtype=float)
            high = waited["latency_median_high_ms"].to_numpy(dtype=float)
            spread = np.vstack([np.nan_to_num(median - low), np.nan_to_num(high - median)])
            latency_axes.errorbar(waited["pause_ms"].to_numpy(dtype=float), median,
                                  yerr=spread, marker="o", capsize=3, label=label)
    rate_axes.axhline(0.5, color="grey", linewidth=0.8)
    rate_axes.set_ylim(-0.05, 1.05)
    rate_axes.set_xlabel("pause (ms)")
    rate_axes.set_ylabel("P(cut-in)")
    rate_axes.legend(fontsize="small")
    latency_axes.set_xlabel("pause (ms)")
    latency_axes.set_ylabel("response latency when it waited (ms, median)")
    if by is not None:
        latency_axes.legend(title=by, fontsize="small")
    figure.suptitle("endpointing: cut-ins and latency over the caller's pause")
    return figure
