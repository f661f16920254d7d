"""write_report: report.ipynb executed with papermill, exported as one self-contained page."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import voicelab
from voicelab.analysis import write_report
from voicelab.errors import ConfigError, ExecutionError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
IMAGE = re.compile(r'<img[^>]*src="data:image/png;base64,')
AUDIO = re.compile(r'<audio[^>]*src="data:audio/ogg;base64,T2dnUw')  # "OggS", base64-encoded


@pytest.fixture(scope="module")
def stalled_run(tmp_path_factory) -> Path:
    loaded = voicelab.load_run(EXAMPLE, overrides=["endpoint.settings.stall_ms=1200",
                                                   "endpoint.settings.stall_on_response=2"])
    outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path_factory.mktemp("report"))))
    return outcome.bundle_path


@pytest.mark.slow
def test_report_embeds_plots_and_audio(stalled_run, tmp_path):
    output = write_report(stalled_run, output_path=tmp_path / "out" / "report.html",
                          parameters={"worst_turns": 2})
    page = output.read_text(encoding="utf-8")
    assert len(IMAGE.findall(page)) >= 4  # latency, silence, pass rate, timeline
    assert len(AUDIO.findall(page)) == 2  # the two worst turns
    assert stalled_run.name in page and "trial-001" in page
    assert "Every trial passed." in page
    assert "34.2%" in page  # the lower end of the pass rate's interval: 2/2, Wilson 95%
    assert "overflow-x: auto" in page  # wide tables scroll inside the page
    assert ">NaN<" not in page and ">nan<" not in page  # missing values are blank cells
    assert "executes this notebook" not in page  # no notebook-usage paragraph
    # self-contained: nothing to fetch (no CDN scripts, no linked files)
    assert not re.search(r'<script[^>]*\ssrc="http', page)
    assert not re.search(r'<link[^>]*href="http', page)
    assert "import voicelab" not in page  # code cells are left out
    assert not output.with_suffix(".ipynb").exists()


@pytest.mark.slow
def test_several_labeled_runs_side_by_side_with_every_failing_trial(tmp_path):
    """Two runs given: split by their labels; every failing trial with its reasons, its
    transcript and its audio (not only the worst turns)."""
    runs = []
    for label, overrides in (("baseline", []),
                             ("candidate", ["endpoint.settings.claim_without_tool=true"])):
        loaded = voicelab.load_run(EXAMPLE, overrides=overrides)
        runs.append(asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=2,
            label=label,
            artifacts_dir=tmp_path / "runs"))).bundle_path)
    output = write_report(runs, output_path=tmp_path / "report.html",
                          parameters={"worst_turns": 1})
    page = output.read_text(encoding="utf-8")
    assert "shown side by side by run" in page
    assert page.count("did not pass, exit endpoint_completion") == 2  # both candidate trials
    assert "verdict outcome_follow_up_created: persisted follow_up_created" in page
    assert page.count("Please record the plan and save the reminder.") >= 2  # transcripts
    assert len(AUDIO.findall(page)) == 2 + 1  # each failing trial's call, the worst turn
    for label in ("baseline", "candidate"):
        assert f"{label} pass^k" in page or label in page


@pytest.mark.slow
def test_a_report_of_ten_failing_trials_stays_within_its_size_budget(tmp_path):
    from voicelab.analysis._report import REPORT_SIZE_BUDGET_BYTES

    loaded = voicelab.load_run(EXAMPLE, overrides=["endpoint.settings.claim_without_tool=true"])
    run = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=10,
        concurrency=5,
        artifacts_dir=tmp_path / "runs"))).bundle_path
    output = write_report(run, output_path=tmp_path / "report.html")
    page = output.read_text(encoding="utf-8")
    assert len(AUDIO.findall(page)) == 10 + 3  # every failing call, the three worst turns
    assert output.stat().st_size < REPORT_SIZE_BUDGET_BYTES
    # counts are integers (a measured figure may be 10.0 ms: only the count's cell is checked),
    # headers and words are not broken
    assert ">10<" in page and ">10.000000<" not in page
    assert "break-word; }" in page and "word-break: break-word" not in page


def test_a_failing_cell_keeps_the_executed_notebook(stalled_run, tmp_path):
    output = tmp_path / "report.html"
    with pytest.raises(ExecutionError, match="unknown metric 'no_such_metric'") as caught:
        write_report(stalled_run, output_path=output,
                     parameters={"latency_metric": "no_such_metric"})
    assert "\n" not in str(caught.value)  # one line
    kept = output.with_suffix(".ipynb")
    assert kept.is_file() and str(kept) in str(caught.value)
    assert "no_such_metric" in kept.read_text(encoding="utf-8")
    assert not output.exists()


def test_not_a_run_directory(tmp_path):
    with pytest.raises(ConfigError, match="not a run directory"):
        write_report(tmp_path, output_path=tmp_path / "r.html")
