"""`voice-evaluator report RUN_DIR... --output report.html`."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from .._exit_codes import EXIT_OK
from .._extras import REPORT_MODULES, require_modules
from .._location import is_url
from ..artifacts import (
    MATRIX_REPORT,
    RUN_REPORT,
    TRIAL_REPORT,
    check_bundle,
    check_output_target,
    check_tree,
    local_folder,
    open_location,
    put_file,
)
from ..errors import ConfigError


def _check_run_dir(run_dir: Path, given: str) -> None:
    """The bundle checked at the door, before the notebook's imports and kernel: its tree
    (regular files and folders only: a linked WAV is never embedded) and every document the
    report reads, so a malformed bundle is one line and exit 2, not a failed cell."""
    if not run_dir.exists():
        raise ConfigError(f"run directory not found: {given}", source="CLI", key="RUN_DIR")
    check_tree(run_dir)
    if not (run_dir / RUN_REPORT).is_file() \
            and not (run_dir / MATRIX_REPORT).is_file() \
            and not any(run_dir.rglob(TRIAL_REPORT)):
        raise ConfigError("not a voicelab run directory (no run-report.json or trial "
                          "bundles)", source=given)
    check_bundle(run_dir)


def report_command(args: argparse.Namespace) -> int:
    require_modules(REPORT_MODULES, purpose="report")  # a core install: exit 2, the pip line
    open_location(args.output, source="CLI", key="--output")  # an unknown scheme: before work
    if not is_url(args.output):
        check_output_target(args.output, key="--output")
    with contextlib.ExitStack() as copies:  # a run in a store is rendered from a local copy
        folders = []
        for given in args.run_dir:
            folder = copies.enter_context(local_folder(given, source="CLI", key="RUN_DIR"))
            _check_run_dir(folder, given)
            folders.append(folder)
        from ..analysis import write_report  # pandas, matplotlib, papermill: only for a report

        if not is_url(args.output):
            output = write_report(folders, output_path=Path(args.output))
            print(f"report: {output}")
            return EXIT_OK
        scratch = copies.enter_context(tempfile.TemporaryDirectory(prefix="voicelab-report-"))
        page = write_report(folders, output_path=Path(scratch) / "report.html")
        print(f"report: {put_file(page, args.output)}")
    return EXIT_OK
