"""Saturation honesty: a trial whose event loop lagged says so, and its timing verdicts are
inconclusive; a trial on a free loop is not degraded.

The lag is made for real: a persona loaded by dotted path (as a user's own persona would be)
blocks the event loop with synchronous sleeps while the conversation runs. No lag figure is
asserted tightly (a busy machine adds its own): the blocked trial's lateness is bounded below by
the blocks themselves, and the free trial is judged against generous tolerances.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import read_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
#: each block stalls the loop this long (s), three times per reply
BLOCK_SECONDS = 0.15

BLOCKING_PERSONA = f'''
import asyncio
import time

from voicelab.personas._scripted import ScriptedPersona


class BlockingPersona(ScriptedPersona):
    """The scripted persona, but its reply blocks the event loop (a synchronous client call)."""

    async def reply(self, response):
        for _ in range(3):
            time.sleep({BLOCK_SECONDS})
            await asyncio.sleep(0.03)
        return await super().reply(response)
'''


def _run_file(folder: Path, *, persona_mode: str) -> Path:
    """The seed example's run config beside a custom persona module."""
    (folder / "blocking_persona.py").write_text(BLOCKING_PERSONA, encoding="utf-8")
    text = EXAMPLE.read_text(encoding="utf-8")
    for name in ("scenario", "persona", "data", "script"):
        text = text.replace(f"{name}-workload-neutral-voice.yaml",
                            str(EXAMPLE.parent / f"{name}-workload-neutral-voice.yaml"))
    text = text.replace("persona_mode: scripted", f"persona_mode: {persona_mode}")
    text = text.replace("artifacts_dir: ../artifacts/workload-neutral-voice",
                        f"artifacts_dir: {folder / 'artifacts'}")
    path = folder / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


#: a timing verdict to make inconclusive (generous: only the degradation may fail it)
LATENCY_VERDICT = "scenario.eval_spec.max_first_audio_latency_ms=60000"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=180, cwd=cwd)


@pytest.fixture(scope="module")
def blocked(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    folder = tmp_path_factory.mktemp("blocked")
    run_file = _run_file(folder, persona_mode="blocking_persona.BlockingPersona")
    done = _cli("run", str(run_file), "--trials", "2", "--concurrency", "2", "--quiet",
                "--set", LATENCY_VERDICT, cwd=folder)
    bundle = Path(json.loads((folder / "artifacts" / "latest" / "run-report.json")
                             .read_text())["bundle_path"])
    return done, bundle


def test_a_blocked_loop_degrades_the_trial_and_its_timing_verdicts(blocked):
    done, bundle = blocked
    for trial in ("trial-001", "trial-002"):
        metrics = read_json(bundle / trial / "voice-metrics.json")
        quality = metrics["measurement_quality"]
        assert quality["degraded"] is True, quality
        lag = quality["loop_lag_ms"]
        # a tick asleep when a block began wakes at least a block minus one interval late
        assert lag["max"] >= BLOCK_SECONDS * 1000 - lag["interval_ms"]
        assert lag["ticks"] >= 3 and lag["p50"] <= lag["p99"] <= lag["max"]
        assert quality["tolerances"] == {"max_loop_lag_p99_ms": 20.0,
                                         "max_loop_lag_max_ms": 25.0}
        assert any(reason.startswith("loop lag max") for reason in quality["reasons"])
        # the timing metrics are still written
        assert metrics["turns"] and metrics["turns"][0]["first_audio_latency_ms"] is not None
        report = read_json(bundle / trial / "trial-report.json")
        assert report["measurement_degraded"] is True
        verdicts = {v["name"]: v for v in report["verdicts"]}
        latency = verdicts["first_audio_latency"]
        assert latency["status"] == "inconclusive" and latency["passed"] is False
        assert latency["observed"] is not None and "event loop lagged" in latency["why"]
        # a verdict that does not rest on the clock is judged as usual
        assert verdicts["expected_exit"]["status"] == "passed"
        assert report["passed"] is False  # a critical inconclusive verdict fails the trial
    run_report = read_json(bundle / "run-report.json")
    assert run_report["degraded_trials"] == 2
    assert [t["measurement_degraded"] for t in run_report["trials"]] == [True, True]
    assert done.returncode == 3, done.stderr
    assert "measurement degraded in 2 of 2 trial(s)" in done.stdout
    assert "fewer concurrent trials per worker" in done.stdout
    assert "first_audio_latency" in done.stdout  # the verdict's failing rate is listed


def test_rescoring_a_degraded_bundle_judges_the_recorded_lag_again(blocked, tmp_path):
    _, bundle = blocked
    result = voicelab.rescore(bundle, output=tmp_path / "again")
    for trial in ("trial-001", "trial-002"):
        assert (tmp_path / "again" / trial / "voice-metrics.json").read_bytes() == \
            (bundle / trial / "voice-metrics.json").read_bytes()
    assert all(t.report.measurement_degraded for t in result.trials)
    assert read_json(tmp_path / "again" / "run-report.json")["degraded_trials"] == 2


def test_a_free_loop_leaves_the_trial_trusted(tmp_path):
    # generous tolerances: a busy test machine lags too, but not by a second
    outcome = voicelab.run(EXAMPLE, trials=2, artifacts_dir=tmp_path, overrides=[
        LATENCY_VERDICT, "measurement.max_loop_lag_p99_ms=1000",
        "measurement.max_loop_lag_max_ms=1000"])
    assert outcome.exit_code == 0
    assert outcome.report.degraded_trials == 0
    for trial in ("trial-001", "trial-002"):
        quality = read_json(outcome.bundle_path / trial / "voice-metrics.json")[
            "measurement_quality"]
        assert quality["degraded"] is False and quality["reasons"] == []
        assert quality["loop_lag_ms"]["ticks"] >= 1
        assert quality["tolerances"]["max_loop_lag_max_ms"] == 1000.0
        verdicts = {v["name"]: v for v in read_json(
            outcome.bundle_path / trial / "trial-report.json")["verdicts"]}
        assert verdicts["first_audio_latency"]["status"] == "passed"


def test_a_lag_budget_lowers_the_concurrency_and_says_so(tmp_path):
    run_file = _run_file(tmp_path, persona_mode="blocking_persona.BlockingPersona")
    done = _cli("run", str(run_file), "--trials", "6", "--concurrency", "4", "--quiet",
                "--set", "measurement.lag_budget_ms=5", cwd=tmp_path)
    report = json.loads((tmp_path / "artifacts" / "latest" / "run-report.json").read_text())
    assert report["lag_budget_ms"] == 5.0
    # every trial's lag p99 is over 100 ms: the first to finish halves the limit at least once
    assert report["lowest_concurrency"] <= 2
    assert report["executed_trials"] == 6 and report["degraded_trials"] == 6
    assert f"lag budget 5 ms (loop-lag p99): lowest concurrency {report['lowest_concurrency']}" \
        in done.stdout
    log = (Path(report["bundle_path"]) / "evaluator.log").read_text()
    assert "over the 5 ms budget: concurrency 4 -> 2" in log


def test_a_bad_tolerance_is_a_configuration_error(tmp_path):
    run_file = _run_file(tmp_path, persona_mode="scripted")
    done = _cli("run", str(run_file), "--set", "measurement.max_loop_lag_p99_ms=-5",
                cwd=tmp_path)
    assert done.returncode == 2
    assert "measurement.max_loop_lag_p99_ms" in done.stderr
    assert "Traceback" not in done.stderr
    assert textwrap.dedent(done.stderr).count("\n") == 1
