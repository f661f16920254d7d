"""`voice-evaluator rescore --set`: the evidence of a run judged again with a changed
threshold, recorded in the new run report; keys that changed what was said are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.cli._init import init_suite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    suite = tmp_path_factory.mktemp("rescore-set") / "suite"
    init_suite(suite)
    outcome = voicelab.run(suite / "run.yaml", voicelab.RunOptions(
        trials=2,
        workers=1,
        artifacts_dir=suite / "runs",
        overrides=["scenario.eval_spec.max_first_audio_latency_ms=null",
                                      "scenario.eval_spec.concise_max_words=200"]))
    assert outcome.exit_code == 0
    return outcome.bundle_path


def _rescore(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", "rescore", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)


def test_a_changed_threshold_rejudges_the_evidence_and_is_recorded(bundle, tmp_path):
    copy = tmp_path / "strict"
    done = _rescore(str(bundle), "--output", str(copy), "--set",
                    "scenario.eval_spec.concise_max_words=1", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "changed: concise" in done.stdout
    assert "re-scored with: scenario.eval_spec.concise_max_words=1" in done.stdout
    report = json.loads((copy / "run-report.json").read_text())
    assert report["rescore_overrides"] == ["scenario.eval_spec.concise_max_words=1"]
    assert report["passed_trials"] == 0 and report["exit_code"] == 3
    trial = json.loads((copy / "trial-001" / "trial-report.json").read_text())
    assert any(v["name"] == "concise" and not v["passed"] for v in trial["verdicts"])
    # the original is untouched, and what each trial recorded stays what it recorded
    assert json.loads((bundle / "run-report.json").read_text())["passed_trials"] == 2
    resolved = json.loads((copy / "trial-001" / "resolved-scenario.json").read_text())
    assert resolved["resolved"]["eval_spec"]["concise_max_words"] == 200


@pytest.mark.parametrize(("override", "says"), [
    ("endpoint.settings.uri=ws://elsewhere", "cannot be re-scored"),
    ("persona.name=Sam", "cannot be re-scored"),
    ("quality_evaluation.timeout_seconds=5", "only with --judges"),
    ("measurement.max_loop_lag_p99_ms=-1", "greater than 0"),
])
def test_a_key_that_cannot_be_rescored_is_one_line_and_exit_2(bundle, tmp_path, override,
                                                               says):
    done = _rescore(str(bundle), "--output", str(tmp_path / "copy"), "--set", override,
                    cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    key = override.partition("=")[0]
    assert done.stderr.count("\n") == 1 and key in done.stderr and says in done.stderr
    assert "Traceback" not in done.stderr
