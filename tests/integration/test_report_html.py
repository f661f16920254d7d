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
AUDIO = re.compile(r'<audio[^>]*src="data:audio/wav;base64,UklGR')  # "RIFF", base64-encoded


@pytest.fixture(scope="module")
def stalled_run(tmp_path_factory) -> Path:
    loaded = voicelab.load_run(EXAMPLE, overrides=["endpoint.settings.stall_ms=1200",
                                                   "endpoint.settings.stall_on_response=2"])
    outcome = asyncio.run(voicelab.arun(loaded, trials=2,
                                        artifacts_dir=tmp_path_factory.mktemp("report")))
    return outcome.bundle_path


@pytest.mark.slow
def test_report_embeds_plots_and_audio(stalled_run, tmp_path):
    output = write_report(stalled_run, output_path=tmp_path / "out" / "report.html",
                          parameters={"worst_turns": 2})
    page = output.read_text(encoding="utf-8")
    assert len(IMAGE.findall(page)) >= 4  # latency, silence, pass rate, timeline
    assert len(AUDIO.findall(page)) == 2  # the two worst turns
    assert stalled_run.name in page and "trial-001" in page
    assert "Every verdict passed." in page
    # self-contained: nothing to fetch (no CDN scripts, no linked files)
    assert not re.search(r'<script[^>]*\ssrc="http', page)
    assert not re.search(r'<link[^>]*href="http', page)
    assert "import voicelab" not in page  # code cells are left out
    assert not output.with_suffix(".ipynb").exists()


def test_a_failing_cell_keeps_the_executed_notebook(stalled_run, tmp_path):
    output = tmp_path / "report.html"
    with pytest.raises(ExecutionError, match="KeyError") as caught:
        write_report(stalled_run, output_path=output,
                     parameters={"latency_metric": "no_such_metric"})
    kept = output.with_suffix(".ipynb")
    assert kept.is_file() and str(kept) in str(caught.value)
    assert "no_such_metric" in kept.read_text(encoding="utf-8")
    assert not output.exists()


def test_not_a_run_directory(tmp_path):
    with pytest.raises(ConfigError, match="not a run directory"):
        write_report(tmp_path, output_path=tmp_path / "r.html")
