"""`voice-evaluator report RUN_DIR... --output report.html`."""

from __future__ import annotations

import argparse
from pathlib import Path

from .._exit_codes import EXIT_OK
from ..errors import ConfigError


def report_command(args: argparse.Namespace) -> int:
    folders = [Path(folder) for folder in args.run_dir]
    for run_dir in folders:
        if not run_dir.exists():
            raise ConfigError(f"run directory not found: {run_dir}", source="CLI",
                              key="RUN_DIR")
        if not (run_dir / "run-report.json").is_file() \
                and not (run_dir / "matrix-report.json").is_file() \
                and not any(run_dir.rglob("trial-report.json")):
            raise ConfigError("not a voicelab run directory (no run-report.json or trial "
                              "bundles)", source=str(run_dir))
    from ..analysis import write_report  # pandas, matplotlib, papermill: only for a report

    output = write_report(folders, output_path=Path(args.output))
    print(f"report: {output}")
    return EXIT_OK
