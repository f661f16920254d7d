"""Plots from frames of real bundles: what each figure draws."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import voicelab
from voicelab.analysis import (
    Frames,
    figure_png,
    load_frames,
    plot_latency,
    plot_pass_rate_heatmap,
    plot_silence,
    plot_timeline,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> Frames:
    root = tmp_path_factory.mktemp("plots")
    outcomes = []
    for settings in ([], ["endpoint.settings.stall_ms=1200", "endpoint.settings.stall_on_response=2"]):
        loaded = voicelab.load_run(EXAMPLE, overrides=settings)
        outcomes.append(asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=2,
            artifacts_dir=root))))
    return load_frames([o.bundle_path for o in outcomes])


def test_latency_ecdf_and_histogram_per_group(frames):
    figure = plot_latency(frames.turns, by="run_id")
    ecdf, histogram = figure.axes
    assert len(ecdf.get_lines()) == 2  # one ECDF per run
    for line in ecdf.get_lines():
        shares = line.get_ydata()
        assert shares[0] == 0 and shares[-1] == 1 and np.all(np.diff(shares) >= 0)
    total = sum(patch.get_height() for patch in histogram.patches)
    assert total == frames.turns["first_audio_latency_ms"].notna().sum()
    assert figure_png(figure).startswith(PNG_MAGIC)


def test_silence_panels_show_the_stall(frames):
    figure = plot_silence(frames.turns, by="run_id")
    assert [axes.get_xlabel() for axes in figure.axes[:3]] == [
        "dead_air_ms", "playback_stall_ms", "output_silence_ratio"]
    stall_axes = figure.axes[1]
    largest = max(float(np.max(line.get_xdata())) for line in stall_axes.get_lines())
    assert largest == pytest.approx(frames.turns["playback_stall_ms"].max())
    assert largest > 500


def test_pass_rate_heatmap_annotates_cells(frames):
    trials = frames.trials.copy()
    trials["passed"] = [True, False, True, True]
    figure = plot_pass_rate_heatmap(trials, rows="run_id", columns="environment")
    texts = sorted(text.get_text() for text in figure.axes[0].texts)
    # the rate, its Wilson 95% interval, the counts
    assert texts == ["100%\n[34%, 100%]\n(2/2)", "50%\n[9%, 91%]\n(1/2)"]
    empty = plot_pass_rate_heatmap(trials.iloc[:0])
    assert "no trials" in empty.axes[0].texts[0].get_text()


def test_timeline_marks_commits_first_audio_and_tool_calls(frames):
    trial = frames.trials.iloc[0]
    figure = plot_timeline(frames, run_id=trial["run_id"], trial_id=trial["trial_id"])
    user_axes, product_axes = figure.axes
    assert len(user_axes.collections) == 1 and len(product_axes.collections) == 1  # waveforms
    labels = set(user_axes.get_legend_handles_labels()[1]) | set(
        product_axes.get_legend_handles_labels()[1])
    assert {"commit", "first audio heard", "tool call"} <= labels
    assert any(text.get_text().strip() == "save_reminder" for text in product_axes.texts)
    commit = frames.events[(frames.events["run_id"] == trial["run_id"])
                           & (frames.events["trial_id"] == trial["trial_id"])
                           & (frames.events["event_type"] == "user.turn_committed")]
    drawn = [line.get_xdata()[0] for line in user_axes.get_lines()
             if line.get_label() == "commit"]
    assert drawn == pytest.approx(list(commit["listener_ms"] / 1000))
    from_folder = plot_timeline(Path(trial["path"]))
    assert len(from_folder.axes) == 2


def test_plots_survive_missing_columns():
    empty = pd.DataFrame({"persona": pd.Series(dtype="category")})
    figure = plot_latency(empty)
    assert "no first_audio_latency_ms" in figure.axes[0].texts[0].get_text()


def test_a_single_valued_distribution_is_said_and_pass_curves_are_drawn(frames):
    from voicelab.analysis import plot_pass_curves

    silent = frames.turns.assign(dead_air_ms=0.0)
    figure = plot_silence(silent, metrics=("dead_air_ms",))
    assert f"all {len(silent)} responses are 0" in figure.axes[0].texts[0].get_text()
    assert not figure.axes[0].get_lines()  # no empty ECDF drawn
    with pytest.raises(ValueError, match="^unknown metric 'latency'; per-response metrics: "):
        plot_latency(frames.turns, metric="latency")
    curves = plot_pass_curves(frames.trials, by="run_id")
    assert len(curves.axes[0].get_lines()) == 2 * frames.trials["run_id"].nunique()


def test_product_voice_panels_draw_what_was_measured_and_say_what_was_not():
    from voicelab.analysis import PRODUCT_VOICE_METRICS, plot_product_voice

    rng = np.random.default_rng(7)
    turns = pd.DataFrame({"persona": pd.Categorical(["calm"] * 6 + ["rushed"] * 6),
                          "output_pitch_median_hz": rng.normal(180.0, 15.0, 12),
                          "output_loudness_dbfs": rng.normal(-20.0, 2.0, 12),
                          "overlap_with_user_ms": 0.0})
    figure = plot_product_voice(turns)
    panels = {axes.get_xlabel(): axes for axes in figure.axes if axes.get_xlabel()}
    assert set(panels) == {"output_pitch_median_hz", "output_loudness_dbfs"}
    assert len(panels["output_pitch_median_hz"].get_lines()) == 2  # one ECDF per persona
    notes = [text.get_text() for axes in figure.axes for text in axes.texts]
    assert "no output_speech_rate_onsets_per_s" in notes  # not measured: said, not drawn
    assert any(note.startswith("overlap_with_user_ms: all 12 responses are 0") for note in notes)
    assert len(figure.axes) == 8 and len(PRODUCT_VOICE_METRICS) == 7  # 2 rows of 4, one spare
