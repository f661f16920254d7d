"""A self-contained HTML report of a run: report.ipynb executed with papermill, then nbconvert.

Plots are PNG outputs (nbconvert embeds them as ``data:image/png`` images) and the worst turns'
audio are ``<audio>`` elements with WAV data URIs, so the page needs no files beside it. Code
cells are left out of the page. When a cell fails, the partially executed notebook is kept next
to the HTML path (``<output>.ipynb``) and the error names the cell.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ExecutionError

logger = logging.getLogger(__name__)

#: Where report.ipynb lives in a source checkout (notebooks/ beside the package).
#: Shipped inside the package (a link to notebooks/report.ipynb in a checkout, a copy in a wheel).
DEFAULT_NOTEBOOK = Path(__file__).resolve().with_name("report.ipynb")


def _has_trials(run_dir: Path) -> bool:
    return any(True for _ in run_dir.glob("**/trial-report.json"))


def write_report(run_dir: str | os.PathLike[str], *,
                 output_path: str | os.PathLike[str] = "report.html",
                 notebook_path: str | os.PathLike[str] | None = None,
                 parameters: Mapping[str, Any] | None = None, kernel_name: str | None = None,
                 cell_timeout_seconds: float = 600.0) -> Path:
    """Execute the report notebook on ``run_dir`` (a run, a matrix run or a folder of runs) and
    write one HTML page to ``output_path``; returns its path.

    ``parameters`` are passed to the notebook besides ``run_dir`` (e.g. ``worst_turns``).
    Raises :class:`ConfigError` for a missing run or notebook, :class:`ExecutionError` when a
    cell fails.
    """
    import jinja2
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    run_dir = Path(run_dir).expanduser().resolve()
    if not run_dir.is_dir() or not _has_trials(run_dir):
        raise ConfigError("not a run directory (no trial-report.json below it)", source=run_dir)
    notebook = Path(notebook_path) if notebook_path is not None else DEFAULT_NOTEBOOK
    if not notebook.is_file():
        raise ConfigError("report notebook not found (pass notebook_path=)", source=notebook)
    output = Path(output_path).expanduser().resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    kept = output.with_suffix(".ipynb")
    values = {**dict(parameters or {}), "run_dir": str(run_dir)}
    logger.info("executing %s on %s", notebook, run_dir)
    with tempfile.TemporaryDirectory(prefix="voicelab-report-") as scratch:
        executed_path = Path(scratch) / "report.ipynb"
        try:
            papermill.execute_notebook(
                str(notebook), str(executed_path), parameters=values, kernel_name=kernel_name,
                cwd=str(notebook.parent), progress_bar=False, log_output=False,
                request_save_on_cell_execute=False, execution_timeout=cell_timeout_seconds)
        except papermill.PapermillExecutionError as error:
            if executed_path.is_file():
                kept.write_bytes(executed_path.read_bytes())
            raise ExecutionError(
                f"report notebook failed in cell {error.exec_count} ({error.ename}: "
                f"{error.evalue}); the partially executed notebook is at {kept}") from None
        executed = nbformat.read(str(executed_path), as_version=4)
    # The lab template, minus the CDN scripts (require.js, MathJax) a report does not need.
    offline = jinja2.DictLoader({"voicelab-report.html.j2": (
        "{%- extends 'lab/index.html.j2' -%}"
        "{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}"
        "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}")})
    exporter = HTMLExporter(template_name="lab", template_file="voicelab-report.html.j2",
                            extra_loaders=[offline], exclude_input=True,
                            exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(
        executed, resources={"metadata": {"name": f"voicelab report: {run_dir.name}"}})
    output.write_text(body, encoding="utf-8")
    logger.info("report written to %s", output)
    return output


__all__ = ["DEFAULT_NOTEBOOK", "write_report"]
