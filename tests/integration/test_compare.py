"""compare() on real seeded runs of the fake product: an identical pair the gates pass, and an
injected regression (a false "saved" claim plus 400 ms of reply latency) that they catch; the
same through ``voice-evaluator compare`` (exit codes, JSON, JUnit, the HTML report)."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
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
    outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=TRIALS,
        concurrency=4,
        artifacts_dir=artifacts)))
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


# --- the command line -------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", "compare", *args],
                          capture_output=True, text=True, timeout=180)


GATE_OPTIONS = ("--max-pass-rate-drop", "0.25", "--max-latency-p95-increase-ms", "100",
                "--max-response-latency-p95-increase-ms", "100")


def test_cli_passes_an_identical_rerun_with_exit_0(runs, tmp_path):
    junitparser = pytest.importorskip("junitparser")
    output, junit = tmp_path / "comparison.json", tmp_path / "junit.xml"
    result = _cli(str(runs["baseline"]), str(runs["same"]), *GATE_OPTIONS,
                  "--max-increase", "dead_air_ms:median=50", "--output", str(output),
                  "--junit", str(junit), "--seed", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "12 pairs by (cell, seed)" in result.stdout
    assert "gate FAILED" not in result.stdout
    assert "\ncell " not in result.stdout  # no cell flipped
    document = json.loads(output.read_text())
    assert document["passed"] is True and document["seed"] == 3
    assert [g["name"] for g in document["gates"]] == [
        "pass_rate_drop", "first_audio_latency_ms_p95_increase",
        "response_latency_ms_p95_increase", "dead_air_ms_median_increase"]
    assert not any(g["blocks"] for g in document["gates"])
    suites = list(junitparser.JUnitXml.fromfile(str(junit)))
    cell = "workload-neutral-voice-exchange__Jordan__quiet"
    assert [s.name for s in suites] == [f"baseline.{cell}", f"candidate.{cell}", "compare"]
    assert suites[-1].tests == 4
    assert sum(s.failures for s in suites) == 0
    ids = [(case.classname, case.name) for suite in suites for case in suite]
    assert len(ids) == len(set(ids)) == 2 * TRIALS + 4  # no test id twice


def test_cli_without_gate_options_judges_the_default_gates(runs, tmp_path):
    result = _cli(str(runs["baseline"]), str(runs["regressed"]))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "gates: pass_rate_drop, first_audio_latency_ms_p95_increase, " \
           "response_latency_ms_p95_increase (defaults: " in result.stdout
    assert "gate FAILED: pass_rate_drop: " in result.stdout
    # the cell that flipped since the baseline (its every trial passed there, none here)
    [flip] = [line for line in result.stdout.splitlines() if line.startswith("cell ")]
    assert "/ Jordan / quiet: FLAKY 50.0%" in flip and "(12/24 over 2 run(s))" in flip
    assert flip.endswith("flipped pass -> fail since the last run")
    # a gate option replaces its default; --no-default-gates leaves only the given ones
    relaxed = _cli(str(runs["baseline"]), str(runs["regressed"]), "--no-default-gates",
                   "--max-increase", "dead_air_ms:p95=1000")
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert "gates: dead_air_ms_p95_increase (no defaults)" in relaxed.stdout
    assert "gate FAILED" not in relaxed.stdout


def test_cli_with_nothing_to_compare_exits_2_with_the_reason(runs, tmp_path):
    empty = tmp_path / "empty-run"
    empty.mkdir()
    report = json.loads((runs["baseline"] / "run-report.json").read_text())
    report.update(trials=[], trial_count=0, executed_trials=0, passed_trials=0)
    (empty / "run-report.json").write_text(json.dumps(report))
    result = _cli(str(runs["baseline"]), str(empty))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing to compare: the candidate has no trials" in lines[0]


def test_cli_catches_the_injected_regression_with_exit_3(runs, tmp_path):
    html = tmp_path / "compare.html"
    result = _cli(str(runs["baseline"]), str(runs["regressed"]), *GATE_OPTIONS,
                  "--html", str(html))
    assert result.returncode == 3, result.stdout + result.stderr
    out = result.stdout
    for gate in ("pass_rate_drop", "first_audio_latency_ms_p95_increase",
                 "response_latency_ms_p95_increase"):
        assert f"gate FAILED: {gate}: " in out and "(evidence of a regression)" in out
    assert "12 broke, 0 fixed, exact McNemar p = 0.000488" in out
    page = html.read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') >= 3  # pass^k and the distributions
    assert "outcome_follow_up_created" in page and "file://" in page  # flips, with links
    assert "3 gate(s) block" in page
    assert "pass_to_fail" in page  # the cell that flipped since the baseline


def test_cli_strict_mode_says_how_many_trials_would_be_needed(runs):
    result = _cli(str(runs["baseline"]), str(runs["same"]), "--max-pass-rate-drop", "0.05",
                  "--strict")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "about 73 pairs would be needed" in result.stdout


@pytest.mark.parametrize(("extra", "message"), [
    (("--max-increase", "latency:p95=100"), "unknown metric 'latency'"),
    (("--max-increase", "dead_air_ms=100"), "expected METRIC:STATISTIC=VALUE"),
    (("--max-pass-rate-drop", "-1"), "--max-pass-rate-drop: must be a number at least 0"),
    (("--seed", "-1"), "--seed: must be a whole number from 0"),
    (("--max-increase", "dead_air_ms:p95=nan"), "the allowed increase must be a number"),
    (("--confidence", "95"), "--confidence: must be between 0 and 1"),
])
def test_cli_bad_input_is_one_line_exit_2(runs, extra, message):
    result = _cli(str(runs["baseline"]), str(runs["same"]), *extra)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_cli_refuses_a_folder_that_is_no_run(runs, tmp_path):
    result = _cli(str(runs["baseline"]), str(tmp_path))
    assert result.returncode == 2
    assert "CANDIDATE: not a run or sweep folder" in result.stderr
