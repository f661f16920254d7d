"""`voice-evaluator rescore RUN_DIR [--output DIR] [--judges RUN_FILE] [--set KEY=VALUE ...]
[--pricing FILE]`.

Each trial's line names the verdicts that failed and those whose outcome changed; the last
lines say where the re-scored files were written (in place, or a copy).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError
from ..runner import rescore
from ._output import relative


def _trial_line(trial: Any, where: str) -> str:  # a voicelab.runner RescoredTrial
    if trial.report.passed:
        detail = []
    elif trial.report.execution_status != "succeeded":
        detail = [f"execution {trial.report.execution_status}"]
    else:
        detail = [f"failed: {', '.join(trial.failed_verdicts) or 'not passed'}"]
    if trial.changed_verdicts:
        detail.append(f"changed: {', '.join(trial.changed_verdicts)}")
    status = "pass" if trial.report.passed else "FAIL"
    return f"{where}: {status}" + (f" ({'; '.join(detail)})" if detail else "")


def _priced_line(trial: Any, where: str) -> str:  # a voicelab.runner RescoredTrial
    def total(cost: Any) -> str:
        if cost is None or cost.total is None:
            return "unknown"
        return f"{cost.total:.6g}" + (f" {cost.currency}" if cost.currency else "")

    return f"{where}: cost {total(trial.report.cost)} (was {total(trial.previous.cost)})"


def rescore_command(args: argparse.Namespace) -> int:
    pricing = args.pricing
    if pricing is not None and (args.judges is not None or args.overrides):
        raise ConfigError("--pricing changes only the cost: give it without --judges or --set",
                          source="CLI", key="--pricing")
    result = rescore(args.run_dir, output=args.output, judges_from=args.judges,
                     overrides=args.overrides, pricing=pricing)
    if args.overrides:
        print(f"re-scored with: {', '.join(args.overrides)} (over what each trial recorded; "
              "kept in the run report as rescore_overrides)")
    if pricing is not None:
        for trial in result.trials:
            print(_priced_line(trial, relative(str(trial.trial_dir))))
        print(f"re-priced under {relative(str(pricing))}: only the cost of the trial, run and "
              f"sweep reports of {relative(result.location)} was rewritten")
        print(f"bundle: {result.location}")
        return result.exit_code
    for trial in result.trials:
        where = relative(str(trial.trial_dir))
        if result.location != str(result.path):  # published to a store
            inner = trial.trial_dir.relative_to(result.path).as_posix()
            where = result.location if inner == "." else f"{result.location}/{inner}"
        print(_trial_line(trial, where))
    for note in result.notes:  # trials planned that never ran, folders left unfinished
        print(relative(note))
    passed = sum(t.report.passed for t in result.trials)
    print(f"{passed}/{len(result.trials)} trial(s) passed after re-scoring")
    if args.output is None:
        print(f"re-scored in place: the derived files (trial reports, metrics, transcripts, run "
              f"report) of {relative(result.location)} were rewritten; --output DIR re-scores "
              "a copy instead")
    else:
        print(f"re-scored copy: {relative(result.location)} (the original bundle is untouched)")
    print(f"bundle: {result.location}")
    return result.exit_code
