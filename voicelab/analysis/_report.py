"""Self-contained HTML reports: a notebook executed with papermill, then nbconvert.

``write_report`` renders runs (report.ipynb); ``write_compare_report`` a baseline against a
candidate (compare.ipynb). Plots are PNG outputs (nbconvert embeds them as ``data:image/png``
images) and audio are ``<audio>`` elements with data URIs, so the page needs no files beside
it. Audio is Ogg Opus (:mod:`._embed`): a report of 10 failing trials stays under
:data:`REPORT_SIZE_BUDGET_BYTES`. Code cells are left out of the page, and wide tables scroll
fit the page's width (their cells wrap) instead of being cut by it. When a cell fails, the partially executed notebook is kept next to the HTML path
(``<output>.ipynb``) and the error names the cell.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from .._extras import REPORT_MODULES, require_modules
from ..artifacts import local_folder
from ..errors import ConfigError, ExecutionError

logger = logging.getLogger(__name__)

#: The size a report of 10 trials, every one failing (each call's audio, the worst turns, the
#: plots), stays under: its audio is Ogg Opus (:mod:`._embed`). Tested.
REPORT_SIZE_BUDGET_BYTES = 3_000_000

#: The kernel's own log says nothing a reader of the report can act on: its start-up warning
#: (the IPKernelApp's "running over TCP without encryption": a kernel on 127.0.0.1 that lives
#: for one report) and, on a busy machine, "KeyboardInterrupt caught in kernel" when it is shut
#: down after the last cell. Only its critical lines print; a failing cell or a dead kernel is
#: reported by the notebook's execution as before.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]

#: Shipped inside the package (links to notebooks/*.ipynb in a checkout, copies in a wheel).
DEFAULT_NOTEBOOK = Path(__file__).resolve().with_name("report.ipynb")
COMPARE_NOTEBOOK = Path(__file__).resolve().with_name("compare.ipynb")

# Tables fit the page's width where they can: headers break only where show_table marked a
# break (after each "_", so first_audio_latency_ms_p50 is not one 26-letter column), cells
# wrap between words. One still wider than the page scrolls inside it, never widens or is cut
# by it; printed, it is shown whole.
_PAGE_CSS = """
<style>
  .jp-RenderedHTMLCommon table { display: block; max-width: 100%; overflow-x: auto;
                                  font-size: 12px; margin-left: 0; }
  .jp-RenderedHTMLCommon th { word-break: normal; overflow-wrap: normal; hyphens: none;
                              white-space: normal; }
  .jp-RenderedHTMLCommon td { max-width: 40em; white-space: normal; word-break: normal;
                              overflow-wrap: break-word; }
  .jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon td { padding: 0.3em 0.5em; }
  .jp-RenderedImage img { max-width: 100%; height: auto; }
  @media print { .jp-RenderedHTMLCommon table { display: table; overflow: visible; } }
</style>
"""


def _has_trials(run_dir: Path) -> bool:
    return any(True for _ in run_dir.glob("**/trial-report.json"))


def _run_folder(path: str | os.PathLike[str]) -> Path:
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir() or not _has_trials(folder):
        raise ConfigError("not a run directory (no trial-report.json below it)", source=folder)
    return folder


def _render(notebook: Path, *, parameters: Mapping[str, object], output_path: str | os.PathLike[str],
            title: str, kernel_name: str | None, cell_timeout_seconds: float) -> Path:
    require_report_packages()
    import jinja2
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    if not notebook.is_file():
        raise ConfigError("report notebook not found (pass notebook_path=)", source=notebook)
    output = Path(output_path).expanduser().resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    kept = output.with_suffix(".ipynb")
    logger.info("executing %s", notebook)
    with tempfile.TemporaryDirectory(prefix="voicelab-report-") as scratch:
        executed_path = Path(scratch) / notebook.name
        try:
            papermill.execute_notebook(
                str(notebook), str(executed_path), parameters=dict(parameters),
                kernel_name=kernel_name, cwd=str(notebook.parent), progress_bar=False,
                log_output=False, request_save_on_cell_execute=False,
                execution_timeout=cell_timeout_seconds, extra_arguments=KERNEL_ARGUMENTS)
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
        "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}"
        "{% block extra_css %}" + _PAGE_CSS + "{% endblock extra_css %}")})
    exporter = HTMLExporter(template_name="lab", template_file="voicelab-report.html.j2",
                            extra_loaders=[offline], exclude_input=True,
                            exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(executed, resources={"metadata": {"name": title}})
    output.write_text(body, encoding="utf-8")
    logger.info("report written to %s", output)
    return output


def require_report_packages() -> None:
    """Raise :class:`~voicelab.errors.MissingDependencyError` (``pip install
    'voicelab[notebooks]'``) unless what executes and exports a report is installed."""
    require_modules(REPORT_MODULES, purpose="an HTML report")


def write_report(run_dir: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
                 output_path: str | os.PathLike[str] = "report.html",
                 notebook_path: str | os.PathLike[str] | None = None,
                 parameters: Mapping[str, object] | None = None, kernel_name: str | None = None,
                 cell_timeout_seconds: float = 600.0) -> Path:
    """Execute the report notebook on ``run_dir`` (a run, a matrix run or a folder of runs; or
    several, shown side by side) and write one HTML page to ``output_path``; returns its path.

    ``parameters`` are passed to the notebook besides the run folders (e.g. ``worst_turns``).
    Raises :class:`ConfigError` for a missing run or notebook, :class:`ExecutionError` when a
    cell fails.
    """
    given = [run_dir] if isinstance(run_dir, (str, os.PathLike)) else list(run_dir)
    if not given:
        raise ConfigError("no run directory given")
    with contextlib.ExitStack() as copies:  # a run in a store is read from a local copy
        folders = [_run_folder(copies.enter_context(local_folder(path))) for path in given]
        notebook = Path(notebook_path) if notebook_path is not None else DEFAULT_NOTEBOOK
        values = {**dict(parameters or {}), "run_dir": str(folders[0]),
                  "run_dirs": [str(f) for f in folders]}
        return _render(notebook, parameters=values, output_path=output_path,
                       title=f"voicelab report: {', '.join(f.name for f in folders)}",
                       kernel_name=kernel_name, cell_timeout_seconds=cell_timeout_seconds)


def write_compare_report(baseline: str | os.PathLike[str], candidate: str | os.PathLike[str], *,
                         output_path: str | os.PathLike[str] = "compare.html",
                         notebook_path: str | os.PathLike[str] | None = None,
                         parameters: Mapping[str, object] | None = None,
                         kernel_name: str | None = None,
                         cell_timeout_seconds: float = 600.0) -> Path:
    """Execute the compare notebook on a baseline and a candidate run (or sweep) and write one
    HTML page: the paired comparison, its gates, both distributions side by side and the
    verdicts that flipped. ``parameters``: ``confidence``, ``seed``, ``gates`` (dicts of
    :class:`~voicelab.analysis.Gate` fields), ``metrics``."""
    with local_folder(baseline) as before_copy, local_folder(candidate) as after_copy:
        before, after = _run_folder(before_copy), _run_folder(after_copy)
        notebook = Path(notebook_path) if notebook_path is not None else COMPARE_NOTEBOOK
        values = {**dict(parameters or {}), "baseline_dir": str(before),
                  "candidate_dir": str(after)}
        return _render(notebook, parameters=values, output_path=output_path,
                       title=f"voicelab compare: {before.name} vs {after.name}",
                       kernel_name=kernel_name, cell_timeout_seconds=cell_timeout_seconds)


__all__ = ["COMPARE_NOTEBOOK", "DEFAULT_NOTEBOOK", "REPORT_SIZE_BUDGET_BYTES",
           "require_report_packages",
           "write_compare_report", "write_report"]
