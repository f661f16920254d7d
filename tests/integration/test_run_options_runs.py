"""``arun(config, options)`` and ``arun_matrix(suite, options)`` run as the keyword form did."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

import pytest

import voicelab
from voicelab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SUITE = ROOT / "examples" / "sweep-workload-neutral.yaml"


def test_a_run_with_options_writes_its_bundle_without_a_warning(tmp_path):
    options = voicelab.RunOptions(trials=1, artifacts_dir=tmp_path, label="new form",
                                  run_id="options-run", scoring="loop")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        outcome = asyncio.run(voicelab.arun(EXAMPLE, options))
    assert outcome.bundle_path == (tmp_path / "options-run").resolve()
    assert outcome.report.label == "new form" and outcome.report.trial_count == 1
    assert (tmp_path / "latest").is_symlink()


def test_the_keyword_form_runs_the_same_run(tmp_path):
    with pytest.warns(DeprecationWarning, match="RunOptions"):
        outcome = voicelab.run(EXAMPLE, trials=1, artifacts_dir=tmp_path, run_id="keywords")
    assert outcome.report.run_id == "keywords" and outcome.report.trial_count == 1


def test_a_sweep_with_options_passes_them_to_every_cell(tmp_path):
    options = voicelab.RunOptions(trials=1, artifacts_dir=tmp_path, label="swept",
                                  only=["trial-001"], scoring="loop")
    outcome = asyncio.run(voicelab.arun_matrix(SUITE, options))
    assert outcome.report.conversations == 4 and outcome.report.label == "swept"
    assert {cell.report.label for cell in outcome.cells} == {"swept"}


def test_a_sweep_refuses_a_scoring_mode_before_its_folder_exists(tmp_path):
    with pytest.raises(ConfigError) as refused:
        asyncio.run(voicelab.arun_matrix(SUITE, voicelab.RunOptions(
            trials=1, artifacts_dir=tmp_path, scoring="nowhere")))
    assert refused.value.key == "scoring"
    assert not any(tmp_path.iterdir())
