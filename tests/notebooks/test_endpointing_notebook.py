"""notebooks/endpointing.ipynb: committed clean and parameterized, and executed by papermill on
a two-pause sweep of the fake product (CI also runs it as it is, under nbval)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "endpointing.ipynb"


def test_committed_notebook_is_clean_and_parameterized():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    assert len([c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]) == 1
    assert all(c.outputs == [] and c.execution_count is None
               for c in notebook.cells if c.cell_type == "code"), "clear the outputs"
    parameters = papermill.inspect_notebook(str(NOTEBOOK))
    assert {"suite_path", "pause_seconds", "trials", "overrides", "sweep_dir"} <= set(parameters)


def test_the_notebook_finds_the_threshold_between_the_pauses(tmp_path):
    output = tmp_path / "endpointing.out.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK), str(output), cwd=str(NOTEBOOK.parent), progress_bar=False,
        request_save_on_cell_execute=False,
        parameters={"pause_seconds": [0.4, 1.0], "trials": 1,
                    "overrides": ["endpoint.settings.vad_silence_ms=700"],
                    "artifacts_dir": str(tmp_path / "artifacts")})
    notebook = nbformat.read(output, as_version=4)
    text = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    # 400 ms waited through, 1000 ms cut into: half the time at 700 ms, linear between them
    assert "cuts in half the time at a pause of 700 ms (interpolated)" in text
    assert "-> 700.0 interpolated" in text  # the matrix report's section agrees
    assert sum(1 for c in notebook.cells if c.cell_type == "code"
               for o in c.get("outputs", []) if "image/png" in o.get("data", {})) == 1
