"""`voice-evaluator validate RUN` and `plan SUITE`: check and describe, run nothing."""

from __future__ import annotations

import argparse

from .._exit_codes import EXIT_OK
from ._output import relative


def validate_command(args: argparse.Namespace) -> int:
    from .._validate import validate_run
    from ..config import load_run

    loaded = load_run(args.run_file, overrides=args.overrides)
    summary = validate_run(loaded).summary
    print(f"{relative(str(args.run_file))}: valid")
    for line in summary.lines():
        print("  " + relative(line))
    return EXIT_OK


def plan_command(args: argparse.Namespace) -> int:
    from ..runner import plan_matrix

    plan = plan_matrix(args.suite_file, trials=args.trials, overrides=args.overrides)
    for line in plan.lines():
        print(relative(line))
    for cell in plan.cells:
        print(f"  cell {cell.cell_id}")
    return EXIT_OK
