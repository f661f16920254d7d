"""compare() on real seeded runs of the fake product: an identical pair the gates pass, and an
injected regression (a false "saved" claim plus 400 ms of reply latency) that they catch."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

import voicelab
from voicelab.analysis import Gate, compare, load_frames

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
TRIALS = 12
REGRESSION = ("endpoint.settings.claim_without_tool=true", "endpoint.settings.reply_latency_ms=400")
GATES = (Gate.pass_rate_drop(0.25),
         Gate.metric_increase("first_audio_latency_ms", 100.0, statistic="median"),
         Gate.metric_increase("first_audio_latency_ms", 100.0, statistic="p95"))


def _run(artifacts: Path, *overrides: str) -> Path:
    loaded = voicelab.load_run(EXAMPLE, overrides=list(overrides))
    outcome = asyncio.run(voicelab.arun(loaded, trials=TRIALS, concurrency=4,
                                        artifacts_dir=artifacts))
    return outcome.bundle_path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    artifacts = tmp_path_factory.mktemp("compare")
    return {"baseline": _run(artifacts), "same": _run(artifacts),
            "regressed": _run(artifacts, *REGRESSION)}


def test_an_identical_rerun_passes_the_gates(runs):
    result = compare(runs["baseline"], runs["same"], gates=GATES, n_resamples=2000)
    assert result.pairs == TRIALS and result.unpaired.empty
    rate = result.pass_rate
    assert (rate.baseline.passed, rate.candidate.passed) == (TRIALS, TRIALS)
    assert rate.baseline_only == rate.candidate_only == 0 and rate.mcnemar_p == 1.0
    assert result.flips.empty
    assert result.passed and not result.failed_gates
    statuses = {gate.name: gate.status for gate in result.gates}
    assert statuses["pass_rate_drop"] == "passed"  # +-24 points at 12 pairs: within 25
    assert statuses["first_audio_latency_ms_median_increase"] == "passed"
    # the p95 of 12 trials rests on the slowest one or two: a scheduling hiccup may widen it,
    # but an identical product never shows a regression
    assert statuses["first_audio_latency_ms_p95_increase"] != "failed"


def test_strict_mode_asks_for_more_trials_on_an_identical_rerun(runs):
    result = compare(runs["baseline"], runs["same"],
                     gates=[Gate.pass_rate_drop(0.05, strict=True)], n_resamples=200)
    (gate,) = result.gates
    # all pairs passed twice: the interval is +-z^2/(n+z^2); a 5-point bound needs n >= 19 z^2
    assert gate.status == "failed" and gate.blocks and not result.passed
    assert gate.trials_needed == math.ceil(19 * 1.959963984540054**2) == 73
    assert "about 73 pairs" in gate.message


def test_an_injected_regression_fails_every_gate(runs):
    result = compare(runs["baseline"], runs["regressed"], gates=GATES, n_resamples=2000)
    assert result.pairs == TRIALS
    rate = result.pass_rate
    assert (rate.baseline_only, rate.candidate_only) == (TRIALS, 0)
    assert rate.mcnemar_p == pytest.approx(2 / 2**TRIALS)
    assert rate.difference.estimate == -1.0 and rate.difference.high < -0.25
    assert [gate.status for gate in result.gates] == ["failed"] * 3
    assert not result.passed and len(result.failed_gates) == 3
    for statistic in ("median", "p95"):
        latency = result.metric("first_audio_latency_ms", statistic).difference
        assert latency.low > 300  # 400 ms were injected into every reply
    # the verdicts that flipped say why, with both bundles to open
    flips = result.flips
    assert set(flips["change"]) == {"broke"}
    assert set(flips["verdict"]) >= {"outcome_follow_up_created"}
    assert flips["seed"].nunique() == TRIALS
    for row in flips.itertuples():
        assert Path(row.baseline_path).parent == runs["baseline"]
        assert Path(row.candidate_path).parent == runs["regressed"]
        assert (Path(row.candidate_path) / "trial-report.json").is_file()
        assert "expected" in row.candidate_why
    text = "\n".join(result.lines())
    assert "12 broke, 0 fixed" in text and "gate FAILED: pass_rate_drop" in text


def test_paths_and_loaded_frames_give_the_same_comparison(runs):
    by_path = compare(runs["baseline"], runs["regressed"], seed=5, n_resamples=500)
    by_frames = compare(load_frames(runs["baseline"]), load_frames(runs["regressed"]), seed=5,
                        n_resamples=500)
    document = by_path.to_dict()
    assert document == by_frames.to_dict()
    assert json.loads(json.dumps(document)) == document
    assert document["baseline"]["paths"] == [str(runs["baseline"])]
    assert len(document["flips"]) == len(by_path.flips)


def test_junit_for_both_runs_and_the_gates(runs, tmp_path):
    junitparser = pytest.importorskip("junitparser")
    from voicelab.artifacts import junit_xml

    result = compare(runs["baseline"], runs["regressed"], gates=GATES, n_resamples=500)
    target = tmp_path / "junit.xml"
    junit_xml([runs["baseline"], runs["regressed"]], gates=result.gates, path=target)
    suites = list(junitparser.JUnitXml.fromfile(str(target)))
    assert [(s.tests, s.failures, s.errors) for s in suites] == [
        (TRIALS, 0, 0), (TRIALS, TRIALS, 0), (len(GATES), len(GATES), 0)]
    assert suites[0].name == suites[1].name  # one cell, named the same in both runs
    assert suites[2].name == "compare"
