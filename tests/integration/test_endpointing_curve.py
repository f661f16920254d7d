"""The endpointing curve against products with known endpointing: the fake product listening
on a live line, ending the caller's turn after ``vad_silence_ms`` of silence. The sweep is
examples/sweep-endpointing.yaml with its pauses and the product's threshold set here (one
seeded trial per pause: every call is a few seconds of real time, the cells run at once)."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import voicelab
from voicelab.analysis import endpointing_frame, half_cut_in_pause, load_frames
from voicelab.artifacts import read_json
from voicelab.config import EndpointingAxis, load_suite
from voicelab.errors import ConfigError
from voicelab.runner import plan_matrix

SUITE = Path(__file__).resolve().parents[2] / "examples" / "sweep-endpointing.yaml"
#: a step of 250 ms, no pause within 50 ms of a threshold (the product's detector counts 10 ms
#: frames and its reply has an attack: a pause right at the threshold could go either way)
PAUSES = [0.2, 0.45, 0.7, 0.95, 1.2]
STEP_MS = 250.0


def sweep(folder: Path, *, silence_ms: float, pauses: list[float], trials: int = 1):
    suite = load_suite(SUITE)
    suite = dataclasses.replace(suite, suite=suite.suite.model_copy(update={
        "endpointing": EndpointingAxis(turn=0, pause_seconds=pauses)}))
    return voicelab.run_matrix(suite, voicelab.RunOptions(
        trials=trials,
        concurrency=len(pauses) * trials,
        artifacts_dir=folder,
        overrides=[f"endpoint.settings.vad_silence_ms={silence_ms}"]))


@pytest.fixture(scope="module")
def curves(tmp_path_factory: pytest.TempPathFactory):
    """The sweep against a product ending turns after 500 ms and one after 1000 ms."""
    root = tmp_path_factory.mktemp("endpointing")
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = pool.map(lambda ms: sweep(root / str(ms), silence_ms=ms, pauses=PAUSES),
                        (500, 1000))
        return dict(zip((500, 1000), runs, strict=True))


@pytest.mark.parametrize("threshold_ms", [500, 1000])
def test_the_half_cut_in_pause_finds_the_products_threshold(curves, threshold_ms):
    outcome = curves[threshold_ms]
    (curve,) = outcome.report.endpointing
    assert [p.pause_ms for p in curve.points] == [p * 1000 for p in PAUSES]
    assert all(p.turns == 1 for p in curve.points)
    # shorter pauses are waited through, longer ones cut into: the curve rises once
    cut = [p.cut_ins for p in curve.points]
    assert cut == sorted(cut) and cut[0] == 0 and cut[-1] == 1
    assert curve.half_cut_in == "interpolated"
    assert abs(curve.half_cut_in_pause_ms - threshold_ms) <= STEP_MS
    # a pause the product waited through: it answered about its threshold after the turn
    waited = [p for p in curve.points if p.cut_ins == 0]
    assert all(threshold_ms - 100 <= p.latency_median_ms <= threshold_ms + 1500 for p in waited)
    # the frame and the notebook's functions say the same as the matrix report
    frame = endpointing_frame(load_frames(outcome.run_dir).turns)
    assert half_cut_in_pause(frame) == (curve.half_cut_in_pause_ms, "interpolated")
    assert frame["cut_ins"].tolist() == cut
    # each cell's run report carries its point, and the cells are named by their pause
    cells = sorted(outcome.report.cells, key=lambda c: c.pause_seconds)
    assert [c.pause_seconds for c in cells] == PAUSES
    assert cells[0].cell_id.endswith("__pause-00200ms")
    run_report = read_json(Path(cells[-1].bundle_path) / "run-report.json")
    assert run_report["endpointing"]["points"][0]["cut_ins"] == 1


def test_a_product_that_never_cuts_in_has_probability_0_with_an_honest_interval(tmp_path):
    outcome = sweep(tmp_path, silence_ms=1500, pauses=[0.3, 0.9], trials=2)
    (curve,) = outcome.report.endpointing
    for point in curve.points:
        assert point.turns == 2 and point.cut_ins == 0 and point.cut_in_probability == 0.0
        # two turns without a cut-in do not show it never happens: Wilson's upper bound
        assert point.cut_in_low == 0.0 and 0.6 < point.cut_in_high < 0.7
    assert curve.half_cut_in == "above_range" and curve.half_cut_in_pause_ms is None
    assert outcome.exit_code == 0  # no_cut_in passed on every trial


def test_an_axis_on_a_turn_without_a_bare_pause_is_a_configuration_error(tmp_path):
    suite = load_suite(SUITE)
    suite = dataclasses.replace(suite, suite=suite.suite.model_copy(update={
        "endpointing": EndpointingAxis(turn=0, pause_seconds=[0.5])}))
    with pytest.raises(ConfigError) as caught:
        plan_matrix(suite, overrides=["script.turns.0.response=No pause here"])
    assert "bare {pause} marker" in str(caught.value) and "turns[0]" in str(caught.value)
