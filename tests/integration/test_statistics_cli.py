"""Intervals, gates, JUnit, labels and resume through the CLI (real runs of the fake product)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.analysis import load_frames

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SWEEP = ROOT / "examples" / "sweep-workload-neutral.yaml"


#: the latency gates here judge the product, not the test machine's load (a busy machine would
#: leave degraded trials' latencies out of them: docs/artifacts.md, measurement_quality)
TRUSTED_TIMINGS = ("measurement={max_loop_lag_p99_ms: 1000, max_loop_lag_max_ms: 1000,"
                   " max_first_audio_error_ms: 1000}")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=timeout)


def bundle_of(artifacts: Path) -> Path:
    return next(p.parent for p in artifacts.glob("*/run-report.json"))


# --- gates in the run config, JUnit, labels ---------------------------------------------------

def test_config_gates_block_with_exit_3_and_say_which_and_why(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    gates = ("gates=[{metric: pass_rate, min_lower_bound: 0.25},"
             " {metric: first_audio_latency_ms, quantile: 0.5, max: 1},"
             " {metric: response_latency_ms, quantile: 0.95, max: 5000}]")
    junit = tmp_path / "junit.xml"
    result = cli("run", str(EXAMPLE), "--trials", "3", "--artifacts-dir", str(tmp_path / "a"),
                 "--set", gates, "--set", TRUSTED_TIMINGS, "--label", "nightly",
                 "--junit", str(junit))
    assert result.returncode == 3, result.stdout + result.stderr
    out = result.stdout
    assert "3/3 trial(s) passed" in out  # every trial passed: the gates alone block
    assert "pass rate 100.0% [43.9%, 100.0%] (3/3, Wilson 95%)" in out
    assert "gate passed: pass_rate lower bound >= 25.0%" in out
    assert "gate FAILED: first_audio_latency_ms p50 upper bound <= 1: observed p50" in out
    assert ("gate INCONCLUSIVE: response_latency_ms p95 upper bound <= 5000: observed p95"
            in out) and "needs at least 72 responses" in out
    report = json.loads((bundle_of(tmp_path / "a") / "run-report.json").read_text())
    assert report["exit_code"] == 3 and report["label"] == "nightly"
    assert [g["status"] for g in report["gates"]] == ["passed", "failed", "inconclusive"]
    assert report["gates"][1]["method"] == "order-statistic"
    assert report["gates"][1]["n"] == 6  # the opening and the answer of each of 3 trials
    assert report["pass_rate"] == {"estimate": 1.0, "low": pytest.approx(0.43850, abs=1e-5),
                                   "high": 1.0, "method": "wilson", "confidence": 0.95, "n": 3,
                                   "passed": 3, "inconclusive": 0}
    assert [p["k"] for p in report["pass_curve"]] == [1, 2, 3]
    assert {r["name"] for r in report["verdict_pass_rates"]} >= {"expected_topics"}
    # JUnit, as CI servers read it: one suite (the plain run's one cell), a case per trial
    (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
    assert (suite.tests, suite.failures, suite.errors) == (3, 0, 0)
    assert f"junit: {junit}" in out or "junit: " in out


def test_passing_gates_exit_0_and_clopper_pearson_on_request(tmp_path):
    result = cli("run", str(EXAMPLE), "--trials", "3", "--artifacts-dir", str(tmp_path),
                 "--set", "statistics={confidence: 0.9, interval: clopper_pearson}",
                 "--set", "gates=[{metric: first_audio_latency_ms, quantile: 0.5, "
                          "max: 5000}]", "--set", TRUSTED_TIMINGS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(3/3, Clopper-Pearson 90%)" in result.stdout
    assert "gate passed: first_audio_latency_ms p50 upper bound <= 5000" in result.stdout


@pytest.mark.parametrize(("override", "message"), [
    ("gates=[{metric: latency_p95, quantile: 0.95, max: 800}]",
     "gates[0].metric: unknown metric 'latency_p95'; expected pass_rate or a per-response "
     "metric: response_latency_ms, first_audio_latency_ms"),
    ("gates=[{metric: pass_rate, quantile: 0.5}]", "a pass_rate gate takes 'min_lower_bound'"),
    ("statistics.interval=wald", "statistics.interval"),
])
def test_a_bad_gate_or_statistics_block_is_one_line_exit_2(tmp_path, override, message):
    result = cli("run", str(EXAMPLE), "--trials", "1", "--artifacts-dir", str(tmp_path),
                 "--set", override, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not list(tmp_path.iterdir())  # nothing ran


def test_frames_carry_the_rates_the_curves_and_the_labels(tmp_path):
    runs = []
    for label, overrides in (("before", []),
                             ("after", ["endpoint.settings.claim_without_tool=true"])):
        loaded = voicelab.load_run(EXAMPLE, overrides=overrides)
        runs.append(asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=2,
            label=label,
            artifacts_dir=tmp_path))))
    frames = load_frames([r.bundle_path for r in runs], events=False)
    runs_frame = frames.runs.set_index("label")
    assert runs_frame.loc["before", "pass_rate_estimate"] == 1.0
    assert runs_frame.loc["after", "pass_rate_estimate"] == 0.0
    for label, outcome in zip(("before", "after"), runs, strict=True):
        recorded = outcome.report.pass_rate
        assert recorded is not None
        row = runs_frame.loc[label]
        assert (row["pass_rate_low"], row["pass_rate_high"], row["pass_rate_n"],
                row["pass_rate_method"]) == (recorded.low, recorded.high, recorded.n,
                                             recorded.method)
    assert set(frames.trials["label"].astype(str)) == {"before", "after"}
    verdicts = frames.rates[frames.rates["kind"] == "verdict"]
    broken = verdicts[(verdicts["name"] == "outcome_follow_up_created")]
    assert sorted(broken["estimate"]) == [0.0, 1.0]
    curve = frames.curves[frames.curves["run_id"].astype(str) == runs[0].report.run_id]
    assert list(curve["k"]) == [1, 2] and list(curve["pass_power_k"]) == [1.0, 1.0]


def test_plan_reports_the_trials_per_cell_for_an_interval_width():
    result = cli("plan", str(SWEEP), "--width", "0.2", timeout=60)
    assert result.returncode == 0, result.stderr
    # Wilson at p = 1/2 has width z / sqrt(n + z^2): <= 0.2 from n = 93
    assert ("95% Wilson, at most 0.2 wide (+-10.0%): 93 trial(s) per cell at any observed "
            "rate") in result.stdout
    assert "the worst case needs 372 conversation(s) for the 4 cell(s)" in result.stdout
    bad = cli("plan", str(SWEEP), "--width", "1.5", timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--width: must be a number more than 0 and at most 1" in bad.stderr and not bad.stdout


# --- resume -----------------------------------------------------------------------------------

LATENCY = "endpoint.settings.reply_latency_ms=700"  # each trial takes ~1.5 s: one is in flight
PLANNED = 5


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, interrupt_after_first_trial) -> tuple[Path, dict[str, str]]:
    """A 5-trial run stopped by SIGINT once trial-001 is written. Calls go on while earlier
    ones are scored, so on a loaded machine the interrupt may land a trial or two later."""
    artifacts = tmp_path_factory.mktemp("resume")
    process = interrupt_after_first_trial(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--trials", str(PLANNED),
         "--concurrency", "1", "--artifacts-dir", str(artifacts), "--set", LATENCY], artifacts,
        wait_seconds=60)
    assert process.returncode == 130, process.stdout + process.stderr
    bundle = bundle_of(artifacts)
    return bundle, _digests(bundle / "trial-001")


def test_resume_after_sigint_completes_the_bundle(interrupted, tmp_path):
    bundle, finished = interrupted
    copy = tmp_path / bundle.name
    shutil.copytree(bundle, copy, symlinks=True)
    before = json.loads((copy / "run-report.json").read_text())
    assert before["status"] == "interrupted" and before["planned_trials"] == PLANNED
    reasons = [t["exit_reason"] for t in before["trials"]]
    done = reasons.count("endpoint_completion")
    # the finished trials, then the one in flight when the interrupt landed (if one was)
    assert 1 <= done < PLANNED and reasons[done:] in ([], ["cancelled"])
    assert before["pass_rate"]["n"] == done  # an interrupted trial is no evidence
    # the run file is the one the bundle names, and the --set overrides the ones it keeps
    assert before["overrides"] == [LATENCY]
    result = cli("run", "--resume", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"resuming with the run's --set overrides (kept in the bundle): {LATENCY}" in \
        result.stdout
    report = json.loads((copy / "run-report.json").read_text())
    assert report["status"] == "complete" and report["exit_code"] == 0
    assert report["run_id"] == before["run_id"] and report["started_at"] == before["started_at"]
    assert len(report["resumed_at"]) == 1
    assert [(t["trial_id"], t["seed"], t["exit_reason"]) for t in report["trials"]] == [
        (f"trial-{index:03d}", 41 + index, "endpoint_completion")
        for index in range(1, PLANNED + 1)]
    assert report["pass_rate"]["n"] == PLANNED and report["passed_trials"] == PLANNED
    assert _digests(copy / "trial-001") == finished  # the finished trial is untouched
    assert report["trials"][0] == before["trials"][0]
    assert f"resumed: {PLANNED - done} of {PLANNED} planned trial(s) to run" in \
        (copy / "evaluator.log").read_text()
    assert f"{PLANNED}/{PLANNED} trial(s) passed" in result.stdout


def test_resume_refuses_another_configuration_and_needs_a_bundle(interrupted, tmp_path):
    bundle, _ = interrupted
    conflicting = cli("run", "--resume", str(bundle), "--set",
                      "endpoint.settings.reply_latency_ms=0", timeout=60)
    assert conflicting.returncode == 2, conflicting.stdout + conflicting.stderr
    lines = conflicting.stderr.strip().splitlines()
    assert lines == [f"voice-evaluator: error: --set endpoint.settings.reply_latency_ms=0: "
                     f"conflicts with the run's --set {LATENCY} (kept in the bundle): a resumed "
                     "run keeps its configuration"]
    changed = cli("run", "--resume", str(bundle), "--set", "endpoint.settings.stall_ms=900",
                  timeout=60)
    assert changed.returncode == 2, changed.stdout + changed.stderr
    lines = changed.stderr.strip().splitlines()
    assert len(lines) == 1 and "the suite hash differs" in lines[0]
    assert json.loads((bundle / "run-report.json").read_text())["status"] == "interrupted"
    missing = cli("run", "--resume", str(tmp_path), timeout=60)
    assert missing.returncode == 2 and "not a run bundle (no run-report.json)" in missing.stderr
    lone = cli("run", str(EXAMPLE), "--rerun-failed", timeout=60)
    assert lone.returncode == 2 and "--rerun-failed needs --resume DIR" in lone.stderr


def test_rerun_failed_runs_the_trials_that_did_not_pass_again(tmp_path):
    loaded = voicelab.load_run(EXAMPLE, overrides=["endpoint.settings.claim_without_tool=true"])
    first = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path)))
    assert first.report.passed_trials == 0
    started = [t.report.started_at for t in first.trials]
    kept = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(resume=first.bundle_path)))
    assert [t.report.started_at for t in kept.trials] == started  # nothing to run
    again = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        resume=first.bundle_path,
        rerun_failed=True)))
    assert all(a != b for a, b in zip((t.report.started_at for t in again.trials), started,
                                      strict=True))
    extended = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        resume=first.bundle_path,
        trials=3)))
    assert extended.report.planned_trials == 3 and extended.report.executed_trials == 3
    assert [t.summary.seed for t in extended.trials] == [42, 43, 44]


def test_sweep_resume_runs_the_missing_cells_and_trials(tmp_path):
    first = cli("sweep", str(SWEEP), "--trials", "2", "--artifacts-dir", str(tmp_path), "--set",
                "endpoint.settings.reply_latency_ms=5")
    assert first.returncode == 0, first.stdout + first.stderr
    sweep = next(p.parent for p in tmp_path.glob("*/matrix-report.json"))
    matrix = json.loads((sweep / "matrix-report.json").read_text())
    # the margins: each persona over both environments, each environment over both personas
    margins = {(m["dimension"], m["value"]): m for m in matrix["margins"]}
    assert margins[("persona", "Jordan")]["cells"] == 2
    assert margins[("persona", "Jordan")]["pass_rate"]["n"] == 4
    assert matrix["pass_rate"]["n"] == 8 and all(c["pass_rate"]["n"] == 2
                                                 for c in matrix["cells"])
    assert "persona Jordan: 100.0% [51.0%, 100.0%] (4/4, Wilson 95%)" in first.stdout
    cells = sorted(p for p in sweep.iterdir() if p.is_dir())
    untouched = _digests(cells[0] / "trial-001")
    shutil.rmtree(cells[1])                        # a cell that never started
    shutil.rmtree(cells[2] / "trial-002")          # a trial that never ran
    assert matrix["overrides"] == ["endpoint.settings.reply_latency_ms=5"]
    resumed = cli("sweep", "--resume", str(sweep))  # the --set is not given again
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming with the sweep's --set overrides (kept in the bundle): " \
           "endpoint.settings.reply_latency_ms=5" in resumed.stdout
    matrix = json.loads((sweep / "matrix-report.json").read_text())
    assert matrix["status"] == "complete" and matrix["executed_trials"] == 8
    assert len(matrix["resumed_at"]) == 1
    assert (cells[1] / "trial-002" / "trial-report.json").is_file()
    assert (cells[2] / "trial-002" / "trial-report.json").is_file()
    assert _digests(cells[0] / "trial-001") == untouched
