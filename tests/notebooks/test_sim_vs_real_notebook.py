"""notebooks/sim-vs-real.ipynb: committed clean and parameterized, and executed by papermill
with its defaults (the simulated side built against the fake product, a plain caller; the real
side the shipped datasets/production-calls ingested: callers who speak slower, pause, barge in
and call from a humming room) and with bundles given. CI also runs it as it is, under nbval."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "sim-vs-real.ipynb"


def execute(tmp_path: Path, **parameters) -> tuple[str, int]:
    output = tmp_path / "sim-vs-real.out.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(output), cwd=str(NOTEBOOK.parent),
                               progress_bar=False, request_save_on_cell_execute=False,
                               parameters=parameters)
    notebook = nbformat.read(output, as_version=4)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "\n".join(str(o.get("data", {}).get("text/markdown", "")) + o.get("text", "")
                   for o in outputs)
    return text, sum(1 for o in outputs if "image/png" in o.get("data", {}))


def test_committed_notebook_is_clean_and_parameterized():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    assert len([c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]) == 1
    assert notebook.metadata.kernelspec.name == "python3"
    assert all(c.outputs == [] and c.execution_count is None
               for c in notebook.cells if c.cell_type == "code"), "clear the outputs"
    parameters = papermill.inspect_notebook(str(NOTEBOOK))
    assert {name: p["inferred_type_name"] for name, p in parameters.items()} == {
        "simulated_run": "str", "real_run": "str", "trials": "int", "alpha": "float",
        "test": "str", "min_pause_ms": "float", "qq_metrics": "list[str]"}


def test_the_defaults_name_the_shipped_callers_differences(tmp_path):
    text, pictures = execute(tmp_path, trials=4)
    summary = next(line for line in text.splitlines()
                   if line.startswith("Compared with the simulation"))
    for difference in ("real callers speak longer turns", "real callers barge in more often",
                       "real callers spend more of a turn pausing",
                       "real callers call from noisier places", "real callers speak slower"):
        assert difference in summary
    assert pictures == 5  # the distributions and four QQ plots


def test_the_same_bundle_on_both_sides_differs_in_nothing(tmp_path):
    """Given bundles are read, not built: one run against itself."""
    import voicelab

    example = Path(__file__).resolve().parents[2] / "examples" / "run-workload-neutral-voice.yaml"
    run = voicelab.run(example, voicelab.RunOptions(
        trials=3,
        artifacts_dir=tmp_path / "artifacts"))
    text, _ = execute(tmp_path, simulated_run=str(run.bundle_path), real_run=str(run.bundle_path),
                      qq_metrics=["user_turn_ms"])
    assert "No caller metric differs between the simulation and the real calls" in text
    assert text.count(str(run.bundle_path)) == 2
