"""compare() on hand-made frames: pairing by (cell, seed), unpaired and missing counts, flips,
gates (the defaults too), nothing comparable, JSON. Real runs of the fake product are in tests/integration/test_compare.py."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from voicelab.analysis import DEFAULT_GATES, Frames, Gate, compare
from voicelab.errors import ConfigError


def _frames(run_id: str, trials: list[dict], *, latency: dict | None = None) -> Frames:
    """Frames of one run; each trial dict has cell, seed, passed and optional verdicts
    ``{name: passed}``; ``latency[(cell, seed)]`` is that trial's turn latencies (default 500)."""
    rows, turns, verdicts = [], [], []
    for number, trial in enumerate(trials, start=1):
        trial_id = f"trial-{number:03d}"
        rows.append({"run_id": run_id, "cell": trial.get("cell"), "trial_id": trial_id,
                     "seed": trial["seed"], "passed": trial["passed"],
                     "scenario_id": trial.get("scenario", "booking"),
                     "execution_status": trial.get("status", "succeeded"),
                     "path": f"/runs/{run_id}/{trial_id}"})
        for index, value in enumerate((latency or {}).get((trial.get("cell"), trial["seed"]),
                                                          [500.0, 520.0])):
            turns.append({"run_id": run_id, "trial_id": trial_id, "turn_id": f"turn-{index}",
                          "first_audio_latency_ms": value, "dead_air_ms": 0.0,
                          "playback_stall_ms": 0.0})
        for name, passed in trial.get("verdicts", {}).items():
            verdicts.append({"run_id": run_id, "trial_id": trial_id, "name": name,
                             "passed": passed, "critical": True,
                             "why": f"{name} {'held' if passed else 'broke'}"})
    empty = pd.DataFrame({"run_id": pd.Series(dtype=object)})
    verdict_columns = ["run_id", "trial_id", "name", "passed", "critical", "why"]
    return Frames(runs=pd.DataFrame({"run_id": [run_id], "path": [f"/runs/{run_id}"]}),
                  trials=pd.DataFrame(rows),
                  turns=pd.DataFrame(turns) if turns else empty,
                  events=empty, judges=empty,
                  verdicts=pd.DataFrame(verdicts, columns=verdict_columns))


def _sweep(run_id: str, cells: dict[str, list[int]], **kwargs) -> Frames:
    return _frames(run_id, [{"cell": cell, "seed": seed, "passed": True}
                            for cell, seeds in cells.items() for seed in seeds], **kwargs)


def test_sweeps_pair_by_cell_and_seed_and_report_the_rest():
    baseline = _sweep("base", {"a": [1, 2, 3], "b": [1, 2, 3]})
    candidate = _sweep("cand", {"a": [1, 2], "b": [1, 2], "c": [1]})
    result = compare(baseline, candidate, n_resamples=200)
    assert result.pairs == 4
    unpaired = result.unpaired.sort_values(["side", "cell", "seed"])
    assert unpaired[["side", "cell", "seed"]].values.tolist() == [
        ["baseline", "a", 3], ["baseline", "b", 3], ["candidate", "c", 1]]
    assert unpaired["path"].tolist() == ["/runs/base/trial-003", "/runs/base/trial-006",
                                         "/runs/cand/trial-005"]
    assert result.cells["cell"].tolist() == ["a", "b"]
    assert result.cells["pairs"].tolist() == [2, 2]
    assert (result.baseline.trials, result.candidate.trials) == (6, 5)
    assert "unpaired: 2 baseline, 1 candidate" in "\n".join(result.lines())
    document = json.loads(json.dumps(result.to_dict()))
    assert document["unpaired"]["baseline"] == 2 and document["unpaired"]["candidate"] == 1
    assert document["pairs"] == 4


def test_plain_runs_are_one_cell():
    plain = _frames("plain", [{"seed": s, "passed": True} for s in (42, 43)])
    other = _frames("other", [{"seed": s, "passed": True} for s in (42, 43)])
    assert compare(plain, other, n_resamples=200).pairs == 2


@pytest.mark.parametrize(("baseline", "candidate", "reason"), [
    (_frames("plain", [{"seed": 42, "passed": True}]), _sweep("sweep", {"x": [42]}),
     "the baseline is a run and the candidate a sweep"),
    (_sweep("sweep", {"x": [42]}), _frames("plain", [{"seed": 42, "passed": True}]),
     "the candidate is a run and the baseline a sweep"),
    (_frames("full", [{"seed": 42, "passed": True}]), _frames("empty", []),
     "the candidate has no trials"),
    (_frames("empty", []), _frames("full", [{"seed": 42, "passed": True}]),
     "the baseline has no trials"),
    (_frames("a", [{"seed": 42, "passed": True, "scenario": "booking"}]),
     _frames("b", [{"seed": 42, "passed": True, "scenario": "refund"}]),
     "different scenarios (baseline 'booking', candidate 'refund' in cell run)"),
    (_frames("a", [{"seed": 1, "passed": True}]), _frames("b", [{"seed": 2, "passed": False}]),
     "no trial of the candidate has the cell and seed of a baseline trial"),
    (_sweep("a", {"x": [1]}), _sweep("b", {"y": [1]}),
     "no trial of the candidate has the cell and seed of a baseline trial"),
])
def test_nothing_comparable_is_an_error_not_a_pass(baseline, candidate, reason):
    # with a strict gate too: no comparison is made that a gate could wave through
    for gates in (DEFAULT_GATES, [Gate.pass_rate_drop(0.1, strict=True)], []):
        with pytest.raises(ConfigError, match="nothing to compare") as caught:
            compare(baseline, candidate, gates=gates, n_resamples=200)
        assert reason in str(caught.value)


def test_the_default_gates_judge_a_comparison_given_no_gates():
    seeds = range(1, 11)
    baseline = _frames("base", [{"seed": s, "passed": True} for s in seeds])
    broken = _frames("cand", [{"seed": s, "passed": False} for s in seeds])
    result = compare(baseline, broken, n_resamples=200)
    assert [g.name for g in result.gates] == [g.name for g in DEFAULT_GATES] == [
        "pass_rate_drop", "first_audio_latency_ms_p95_increase",
        "response_latency_ms_p95_increase"]
    assert not result.passed
    assert [g.name for g in result.failed_gates] == ["pass_rate_drop"]
    assert compare(baseline, broken, gates=(), n_resamples=200).passed  # switched off
    same = compare(baseline, _frames("same", [{"seed": s, "passed": True} for s in seeds]),
                   n_resamples=200)
    # 10 pairs that all pass twice: an interval of about +-28 points straddles 5, not beyond
    assert same.passed and same.gates[0].status == "inconclusive"


def test_two_trials_with_one_cell_and_seed_on_a_side_are_refused():
    doubled = _frames("twice", [{"seed": 1, "passed": True}, {"seed": 1, "passed": False}])
    with pytest.raises(ConfigError, match="share a cell and seed"):
        compare(doubled, doubled)


def test_pass_rate_counts_and_flips_go_both_ways():
    seeds = range(1, 11)
    baseline = _frames("base", [
        {"seed": s, "passed": s <= 8, "verdicts": {"topics": s <= 8, "exit": True}}
        for s in seeds])
    candidate = _frames("cand", [
        {"seed": s, "passed": s in (1, 2, 9), "verdicts": {"topics": s in (1, 2, 9),
                                                           "exit": True}}
        for s in seeds])
    result = compare(baseline, candidate, n_resamples=200)
    rate = result.pass_rate
    assert (rate.both, rate.baseline_only, rate.candidate_only, rate.neither) == (2, 6, 1, 1)
    assert rate.mcnemar_p == pytest.approx(2 * (1 + 7) / 2**7)  # 1 of 7 discordant
    assert rate.difference.estimate == pytest.approx(-0.5)
    assert rate.difference.low < -0.5 < rate.difference.high < 0
    flips = result.flips
    assert len(flips) == 7 and set(flips["verdict"]) == {"topics"}
    assert (flips["change"] == "broke").sum() == 6
    fixed = flips[flips["change"] == "fixed"].iloc[0]
    assert (fixed["seed"], fixed["baseline_why"], fixed["candidate_why"]) == (
        9, "topics broke", "topics held")
    assert fixed["baseline_path"] == "/runs/base/trial-009"
    assert fixed["candidate_path"] == "/runs/cand/trial-009"


def test_metric_pairs_with_a_missing_value_are_counted_not_hidden():
    seeds = list(range(1, 9))
    baseline = _frames("base", [{"seed": s, "passed": True} for s in seeds])
    slower = {(None, s): [700.0, 720.0] for s in seeds}
    slower[(None, 8)] = [np.nan, np.nan]  # e.g. no product audio in that trial
    candidate = _frames("cand", [{"seed": s, "passed": True} for s in seeds], latency=slower)
    gate = Gate.metric_increase("first_audio_latency_ms", 100.0, statistic="median")
    result = compare(baseline, candidate, gates=[gate], n_resamples=500)
    median = result.metric("first_audio_latency_ms", "median")
    assert median.missing_pairs == 1 and median.difference.n == 7
    assert (median.baseline, median.candidate) == (510.0, 710.0)
    (judged,) = result.gates
    # every pair moved by exactly +200 ms: every resample agrees, so the interval is a point
    assert (median.difference.low, median.difference.high) == (200.0, 200.0)
    assert judged.status == "failed" and not result.passed
    assert "1 pairs missing" in "\n".join(result.lines())


def test_gates_name_only_known_metrics():
    runs = _frames("r", [{"seed": 1, "passed": True}, {"seed": 2, "passed": True}])
    with pytest.raises(ConfigError, match="unknown metric 'first_audio_latncy_ms'"):
        compare(runs, runs, gates=[Gate.metric_increase("first_audio_latncy_ms", 10)])
    # a known metric the bundles lack (older runs) is judged as missing: inconclusive
    result = compare(runs, runs, gates=[Gate.metric_increase("response_latency_ms", 10)],
                     n_resamples=200)
    (gate,) = result.gates
    assert gate.status == "inconclusive" and "no pairs" in gate.message
    with pytest.raises(ValueError, match="statistic"):
        Gate("first_audio_latency_ms", 10.0, "mean")
    with pytest.raises(ValueError, match=">= 0"):
        Gate.pass_rate_drop(-0.1)


def test_compare_is_deterministic_for_a_seed():
    rng = np.random.default_rng(3)
    latency = {(None, s): list(rng.normal(500, 60, 3)) for s in range(1, 16)}
    slower = {key: [v + 30 for v in values] for key, values in latency.items()}
    baseline = _frames("base", [{"seed": s, "passed": True} for s in range(1, 16)],
                       latency=latency)
    candidate = _frames("cand", [{"seed": s, "passed": True} for s in range(1, 16)],
                        latency=slower)
    first = compare(baseline, candidate, seed=11, n_resamples=500).to_dict()
    assert first == compare(baseline, candidate, seed=11, n_resamples=500).to_dict()


def test_a_trial_that_failed_to_execute_counts_as_not_passed_and_is_named():
    baseline = _frames("base", [{"seed": s, "passed": True} for s in (1, 2, 3)])
    candidate = _frames("cand", [{"seed": 1, "passed": True}, {"seed": 2, "passed": True},
                                 {"seed": 3, "passed": False, "status": "failed"}])
    result = compare(baseline, candidate, n_resamples=200)
    assert result.candidate.execution_failures == 1 and result.baseline.execution_failures == 0
    assert result.pass_rate.baseline_only == 1
    assert "cand (3 trials, 1 failed to execute)" in result.lines()[0]
