"""Matplotlib figures from frames: latency and silence distributions, the product's voice,
pass rates with their intervals, pass@k / pass^k curves, one timeline.

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global figure
state, nothing to close); a notebook displays it as the cell's value (``%matplotlib inline``
registers the PNG formatter). matplotlib is imported inside the functions. A metric name that is
no per-response metric is a one-line ``ValueError``; a distribution with a single value (every
dead air 0 ms) is said in words instead of drawn as an empty axis.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._embed import channel_path, read_trial_audio, retention_note
from ._frames import Frames, check_metric, load_frames
from ._rates import pass_curve_table, pass_rate_table

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_ENVELOPE_POINTS = 4000


def _plain_ticks(axes: Axes) -> None:
    """Tick labels as the numbers themselves: no ``1e9`` multiplier and no ``+1.000e3`` offset
    in the corner, which a reader of latencies or sample counts has to add up in their head."""
    from matplotlib.ticker import ScalarFormatter

    for axis in (axes.xaxis, axes.yaxis):
        formatter = axis.get_major_formatter()
        if isinstance(formatter, ScalarFormatter):
            formatter.set_useOffset(False)
            formatter.set_scientific(False)


@functools.cache
def _figure_class() -> type[Figure]:
    from matplotlib.figure import Figure

    class PlainFigure(Figure):
        """A figure whose axes print plain numbers (:func:`_plain_ticks`)."""

        def subplots(self, *args: Any, **kwargs: Any) -> Any:
            created = super().subplots(*args, **kwargs)
            for axes in np.atleast_1d(created).ravel():
                _plain_ticks(axes)
            return created

    return PlainFigure


def _figure(width_in: float, height_in: float) -> Figure:
    return _figure_class()(figsize=(width_in, height_in), layout="constrained")


def _groups(frame: pd.DataFrame, metric: str, by: str | None) -> list[tuple[str, np.ndarray]]:
    """(label, finite values) per group, in category order; one unlabeled group when ``by`` is
    None or absent."""
    if metric not in frame.columns:
        return []
    values = pd.to_numeric(frame[metric], errors="coerce")
    if by is None or by not in frame.columns:
        finite = values.dropna().to_numpy(dtype=float)
        return [("all", finite)] if finite.size else []
    result = []
    for label, part in values.groupby(frame[by], observed=True, sort=True):
        finite = part.dropna().to_numpy(dtype=float)
        if finite.size:
            result.append((str(label), finite))
    return result


def _no_data(axes: Axes, what: str) -> None:
    _note(axes, f"no {what}")


def _note(axes: Axes, text: str) -> None:
    axes.text(0.5, 0.5, text, ha="center", va="center", transform=axes.transAxes,
              color="grey", wrap=True)
    axes.set_xticks([])
    axes.set_yticks([])


def _single_value(groups: list[tuple[str, np.ndarray]]) -> float | None:
    """The value every response has, when they all have the same one (nothing to draw)."""
    everything = np.concatenate([values for _, values in groups])
    return float(everything[0]) if everything.size and np.ptp(everything) == 0 else None


def _constant(axes: Axes, metric: str, value: float, groups: list[tuple[str, np.ndarray]]
              ) -> None:
    count = sum(values.size for _, values in groups)
    _note(axes, f"{metric}: all {count} responses are {value:g}\n(a single value: no "
                "distribution to draw)")


def _ecdf(axes: Axes, groups: list[tuple[str, np.ndarray]], *, xlabel: str) -> None:
    for label, values in groups:
        ordered = np.sort(values)
        share = np.arange(0, ordered.size + 1) / ordered.size
        axes.step(np.concatenate([ordered[:1], ordered]), share, where="post",
                  label=f"{label} (n={ordered.size})")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("share of responses")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)


def _histogram(axes: Axes, groups: list[tuple[str, np.ndarray]], *, xlabel: str,
               bins: int) -> None:
    everything = np.concatenate([values for _, values in groups])
    edges = np.histogram_bin_edges(everything, bins=bins)
    for label, values in groups:
        axes.hist(values, bins=list(edges), alpha=0.55, label=label)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("responses")
    axes.grid(alpha=0.3)


def plot_latency(turns: pd.DataFrame, *, metric: str = "first_audio_latency_ms",
                 by: str | None = "persona", bins: int = 30) -> Figure:
    """ECDF and histogram of a per-response latency, one line/colour per value of ``by``."""
    check_metric(turns, metric)
    figure = _figure(11, 4)
    ecdf_axes, hist_axes = figure.subplots(1, 2)
    groups = _groups(turns, metric, by)
    if not groups:
        _no_data(ecdf_axes, metric)
        _no_data(hist_axes, metric)
        return figure
    value = _single_value(groups)
    if value is not None:
        _constant(ecdf_axes, metric, value, groups)
        hist_axes.set_axis_off()
        return figure
    _ecdf(ecdf_axes, groups, xlabel=metric)
    _histogram(hist_axes, groups, xlabel=metric, bins=bins)
    ecdf_axes.legend(title=by, fontsize="small")
    figure.suptitle(f"{metric} by {by}" if by else metric)
    return figure


def _ecdf_panels(turns: pd.DataFrame, metrics: Sequence[str], *, by: str | None, title: str,
                 columns: int) -> Figure:
    """One ECDF panel per metric (``columns`` panels a row), one line per value of ``by``."""
    for metric in metrics:
        check_metric(turns, metric)
    rows = -(-len(metrics) // columns)
    width = min(columns, len(metrics))
    figure = _figure(4.2 * width, 3.8 * rows)
    panels = np.atleast_1d(figure.subplots(rows, width)).ravel()
    for axes, metric in zip(panels, metrics, strict=False):
        groups = _groups(turns, metric, by)
        value = _single_value(groups) if groups else None
        if value is not None:
            _constant(axes, metric, value, groups)
        elif groups:
            _ecdf(axes, groups, xlabel=metric)
            axes.legend(title=by, fontsize="x-small")
        else:
            _no_data(axes, metric)
    for axes in panels[len(metrics):]:
        axes.set_axis_off()
    figure.suptitle(title)
    return figure


def plot_silence(turns: pd.DataFrame, *, by: str | None = "environment",
                 metrics: Sequence[str] = ("dead_air_ms", "playback_stall_ms",
                                           "output_silence_ratio")) -> Figure:
    """ECDFs of dead air, playback stalls and the silent share of each response."""
    return _ecdf_panels(turns, metrics, by=by, title="dead air and silence per response",
                        columns=len(metrics))


#: the per-reply product-voice columns of the turns frame (``speech_metrics: true``)
PRODUCT_VOICE_METRICS = ("output_speech_rate_onsets_per_s", "output_pitch_median_hz",
                         "output_pitch_range_semitones", "output_loudness_dbfs",
                         "output_pause_count", "output_longest_pause_ms",
                         "overlap_with_user_ms")


def plot_product_voice(turns: pd.DataFrame, *, by: str | None = "persona",
                       metrics: Sequence[str] = PRODUCT_VOICE_METRICS) -> Figure:
    """ECDFs of the product's voice per reply as the listener heard it: speech rate, pitch,
    loudness, pauses and overlap with the user (definitions: docs/artifacts.md). Empty panels
    say so when the run had no ``speech_metrics``."""
    return _ecdf_panels(turns, metrics, by=by, title="the product's voice per reply",
                        columns=4)


def _label_columns(frame: pd.DataFrame, columns: str | Sequence[str]) -> pd.Series:
    names = [columns] if isinstance(columns, str) else list(columns)
    text = frame[names[0]].astype(str)
    for name in names[1:]:
        text = text + " / " + frame[name].astype(str)
    return text


def plot_pass_rate_heatmap(trials: pd.DataFrame, *, rows: str | Sequence[str] | None = None,
                           columns: str | Sequence[str] = "environment",
                           confidence: float = 0.95, method: str = "wilson") -> Figure:
    """Share of passed trials per matrix cell with its confidence interval, annotated
    ``rate [low, high] (passed/trials)``. ``rows`` defaults to the persona, prefixed by the
    scenario when there are several. Interrupted trials are left out, as in the run report."""
    from matplotlib import colormaps

    if rows is None:
        several = "scenario_id" in trials.columns and trials["scenario_id"].nunique() > 1
        rows = ("scenario_id", "persona") if several else "persona"
    if trials.empty:
        figure = _figure(5, 3)
        _no_data(figure.subplots(), "trials")
        return figure
    labeled = trials.assign(_row=_label_columns(trials, rows).to_numpy(),
                            _column=_label_columns(trials, columns).to_numpy())
    rates = pass_rate_table(labeled, by=["_row", "_column"], confidence=confidence,
                            method=method)
    rate = rates.pivot(index="_row", columns="_column", values="estimate")
    cell = rates.set_index(["_row", "_column"])
    longest = max((len(str(label)) for label in rate.index), default=0)
    figure = _figure(max(4.5, 1.8 * rate.shape[1] + 0.08 * longest + 2.5),
                     max(2.5, 0.8 * rate.shape[0] + 1.5))
    axes = figure.subplots()
    values = rate.to_numpy(dtype=float)
    image = axes.imshow(np.ma.masked_invalid(values), cmap=colormaps["RdYlGn"], vmin=0,
                        vmax=1, aspect="auto")
    axes.set_xticks(range(values.shape[1]), labels=list(rate.columns), rotation=20, ha="right")
    axes.set_yticks(range(values.shape[0]), labels=list(rate.index))
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            one = cell.loc[(rate.index[i], rate.columns[j])]
            axes.text(j, i, f"{value:.0%}\n[{one['low']:.0%}, {one['high']:.0%}]\n"
                            f"({int(one['passed'])}/{int(one['n'])})",
                      ha="center", va="center", fontsize="small")
    figure.colorbar(image, ax=axes, label="pass rate")
    row_name = rows if isinstance(rows, str) else " / ".join(rows)
    column_name = columns if isinstance(columns, str) else " / ".join(columns)
    axes.set_ylabel(row_name)
    axes.set_xlabel(column_name)
    label = "Wilson" if method == "wilson" else "Clopper-Pearson"
    axes.set_title(f"pass rate per cell [{confidence:.0%} {label} interval]")
    return figure


def plot_pass_curves(trials: pd.DataFrame, *, by: str | Sequence[str] | None = "run_id"
                     ) -> Figure:
    """The unbiased pass^k (all of k trials pass: solid) and pass@k (at least one passes:
    dashed) over k = 1..n, one colour per group of ``by``. pass^k falling fast with k is a
    flaky product even when its pass rate looks fine."""
    figure = _figure(7.5, 4)
    axes = figure.subplots()
    names = [] if by is None else [by] if isinstance(by, str) else list(by)
    names = [name for name in names if name in trials.columns]
    curves = pass_curve_table(trials, by=names or None) if len(trials) else pd.DataFrame()
    if curves.empty:
        _no_data(axes, "trials")
        return figure
    keys = curves[names].astype(str).agg(" / ".join, axis=1) if names else \
        pd.Series("all", index=curves.index)
    for (label, group), colour in zip(curves.groupby(keys, sort=True),
                                      _colours(keys.nunique()), strict=True):
        n, passed = int(group["n"].iloc[0]), int(group["passed"].iloc[0])
        axes.plot(group["k"], group["pass_power_k"], marker="o", markersize=3, color=colour,
                  label=f"{label} pass^k ({passed}/{n})")
        axes.plot(group["k"], group["pass_at_k"], linestyle="--", color=colour, alpha=0.6,
                  label=f"{label} pass@k")
    axes.set_xlabel("k (trials)")
    axes.set_ylabel("probability")
    axes.set_ylim(-0.02, 1.02)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    axes.set_title("unbiased pass^k (all k pass) and pass@k (one of k passes)")
    return figure


def _colours(count: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    return [palette(i % 10) for i in range(count)]


def _envelope(samples: np.ndarray, sample_rate_hz: int) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, peak magnitude) at about ``_ENVELOPE_POINTS`` points: max |x| per block."""
    block = max(1, samples.size // _ENVELOPE_POINTS)
    usable = samples[: samples.size - samples.size % block].astype(np.int32)
    peaks = np.abs(usable.reshape(-1, block)).max(axis=1) if usable.size else usable
    seconds = (np.arange(peaks.size) * block + block / 2) / sample_rate_hz
    return seconds, peaks / 32768.0


def plot_timeline(source: Frames | str | os.PathLike[str], *, run_id: str | None = None,
                  trial_id: str | None = None) -> Figure:
    """One trial on the listener timeline: both channels' waveforms, each response's playback,
    commits, first audio, interruptions and tool calls. ``source``: frames or a trial folder."""
    frames = source if isinstance(source, Frames) else load_frames(source)
    one = frames.select(run_id=run_id, trial_id=trial_id)
    trial = one.trials.iloc[0]
    trial_dir = Path(trial["path"])
    events, turns = one.events, one.turns
    figure = _figure(12, 4.5)
    user_axes, product_axes = figure.subplots(2, 1, sharex=True)
    for axes, channel, colour in ((user_axes, "user", "tab:blue"),
                                  (product_axes, "product", "tab:orange")):
        if channel_path(trial_dir, channel) is not None:
            samples, rate = read_trial_audio(trial_dir, channel=channel)
            seconds, peaks = _envelope(samples, rate)
            axes.fill_between(seconds, -peaks, peaks, color=colour, linewidth=0)
        elif (note := retention_note(trial_dir)) is not None:
            axes.text(0.5, 0.5, note, transform=axes.transAxes, ha="center", va="center",
                      fontsize="small", color="grey")
        axes.set_ylim(-1.05, 1.05)
        axes.set_ylabel(channel)
        axes.grid(alpha=0.25)
    for turn in turns.itertuples(index=False):  # a handful of responses per trial
        start, end = turn.playback_start_ms, turn.playback_end_ms
        if pd.notna(start) and pd.notna(end):
            product_axes.axvspan(start / 1e3, end / 1e3, color="tab:orange", alpha=0.08)
            product_axes.text(start / 1e3, 0.92, str(turn.turn_id), fontsize="x-small")
    marks = [
        (user_axes, events[events["event_type"] == "user.turn_committed"]["listener_ms"],
         "tab:green", "--", "commit"),
        (product_axes, turns["playback_start_ms"], "tab:red", "-", "first audio heard"),
        (user_axes, events[events["event_type"] == "user.barge_in"]["listener_ms"],
         "tab:purple", "-", "barge-in"),
        (product_axes, events[events["event_type"] == "product.interruption"]["listener_ms"],
         "tab:purple", ":", "product interruption"),
    ]
    for axes, at_ms, colour, style, label in marks:
        for index, value in enumerate(pd.to_numeric(at_ms, errors="coerce").dropna()):
            axes.axvline(value / 1e3, color=colour, linestyle=style, linewidth=1.2,
                         label=label if index == 0 else None)
    calls = events[events["event_type"] == "product.tool_call"]
    for index, (at_ms, attributes) in enumerate(zip(calls["listener_ms"], calls["attributes"],
                                                    strict=True)):
        name = str((attributes or {}).get("name", "tool"))
        product_axes.axvline(at_ms / 1e3, color="black", linestyle="-.", linewidth=1,
                             label="tool call" if index == 0 else None)
        product_axes.text(at_ms / 1e3, -0.95, f" {name}", fontsize="x-small")
    for axes in (user_axes, product_axes):
        if axes.get_legend_handles_labels()[0]:
            axes.legend(loc="upper right", fontsize="x-small")
    product_axes.set_xlabel("listener timeline (s)")
    user_axes.set_title(f"{trial['run_id']} / {trial['trial_id']}: "
                        f"{'passed' if trial['passed'] else 'failed'} ({trial['exit_reason']})")
    return figure


def figure_png(figure: Figure, *, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (for reports and tests)."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


__all__ = ["figure_png", "plot_latency", "plot_pass_curves", "plot_pass_rate_heatmap",
           "plot_silence", "plot_timeline"]
