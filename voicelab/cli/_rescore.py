"""`voice-evaluator rescore RUN_DIR [--output DIR] [--judges RUN_FILE]`."""

from __future__ import annotations

import argparse

from ..runner import rescore
from ._output import relative


def rescore_command(args: argparse.Namespace) -> int:
    result = rescore(args.run_dir, output=args.output, judges_from=args.judges)
    for trial in result.trials:
        status = "pass" if trial.report.passed else "FAIL"
        changed = f" (changed: {', '.join(trial.changed_verdicts)})" \
            if trial.changed_verdicts else ""
        where = relative(str(trial.trial_dir))
        if result.location != str(result.path):  # published to a store
            inner = trial.trial_dir.relative_to(result.path).as_posix()
            where = result.location if inner == "." else f"{result.location}/{inner}"
        print(f"{where}: {status}{changed}")
    passed = sum(t.report.passed for t in result.trials)
    print(f"{passed}/{len(result.trials)} trial(s) passed after re-scoring")
    print(f"bundle: {result.location}")
    return result.exit_code
