"""The research notebooks: committed clean, and executed by papermill with small parameters.

CI also runs them as they are with ``pytest --nbval-lax notebooks/``.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ("sweep", "report", "labeling", "compare")
WIDGET = "application/vnd.jupyter.widget-view+json"


def outputs(notebook: nbformat.NotebookNode) -> list[dict]:
    return [output for cell in notebook.cells if cell.cell_type == "code"
            for output in cell.get("outputs", [])]


def mime_count(notebook: nbformat.NotebookNode, mime: str, *, containing: str = "") -> int:
    return sum(1 for output in outputs(notebook)
               if mime in output.get("data", {}) and containing in str(output["data"][mime]))


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebook_is_clean_and_parameterized(name):
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(notebook)
    tagged = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert notebook.metadata.kernelspec.name == "python3"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "clear the outputs"
    parameters = papermill.inspect_notebook(str(NOTEBOOKS / f"{name}.ipynb"))
    assert parameters  # they parse; and each is typed for `papermill --help-notebook`
    assert {n: p["inferred_type_name"] for n, p in parameters.items()
            if p["inferred_type_name"] in ("None", "", None)} == {}


def execute(name: str, tmp_path: Path, **parameters) -> nbformat.NotebookNode:
    output = tmp_path / f"{name}.out.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(output),
                               parameters=parameters, cwd=str(NOTEBOOKS), progress_bar=False,
                               request_save_on_cell_execute=False)
    return nbformat.read(output, as_version=4)


@pytest.mark.slow
def test_sweep_runs_a_matrix(tmp_path):
    notebook = execute("sweep", tmp_path, trials=1, concurrency=2,
                       artifacts_dir=str(tmp_path / "artifacts"), worst_turns=2)
    assert list((tmp_path / "artifacts").glob("*/matrix-report.json"))
    assert mime_count(notebook, "image/png") >= 5  # heatmap, 2 latency, silence, timeline
    # the worst turns, and the matrix browser's static copy for pages without its widget
    assert mime_count(notebook, "text/html", containing="data:audio/ogg;base64,") == 2
    assert mime_count(notebook, "text/html", containing='class="voicelab-static-copy"') == 1
    assert mime_count(notebook, WIDGET) == 2  # the progress bar (tqdm.auto), the matrix browser
    assert any("4 cell(s), 4/4 trial(s) passed" in "".join(o.get("text", ""))
               for o in outputs(notebook))


@pytest.mark.slow
def test_report_produces_a_run_when_given_none(tmp_path):
    notebook = execute("report", tmp_path, trials=2, worst_turns=2,
                       overrides=["endpoint.settings.stall_ms=900"])
    assert mime_count(notebook, "image/png") >= 4
    audio = [o for o in outputs(notebook)
             if "data:audio/ogg;base64," in str(o.get("data", {}).get("text/html", ""))]
    assert len(audio) == 1 and str(audio[0]["data"]["text/html"]).count("<audio") == 2
    assert mime_count(notebook, "text/markdown", containing="2 trial(s)") == 1


def test_labeling_shows_the_widget_and_reads_labels(tmp_path):
    labels_path = tmp_path / "labels.csv"
    labels_path.write_text("run_id,trial_id,criterion,human_label,annotator,note,labeled_at\n"
                           "r,trial-001,polite,pass,ana,,2026-01-01T00:00:00Z\n")
    notebook = execute("labeling", tmp_path, trials=1, criteria=["polite", "on_topic"],
                       annotator="ana", labels_path=str(labels_path))
    assert mime_count(notebook, WIDGET) == 2  # the example run's progress bar, the labeler
    assert mime_count(notebook, "text/markdown", containing="['polite', 'on_topic']") == 1
    assert mime_count(notebook, "text/html", containing="trial-001") >= 1  # the saved labels
    assert json.loads(json.dumps(notebook.metadata.papermill.parameters))["annotator"] == "ana"
