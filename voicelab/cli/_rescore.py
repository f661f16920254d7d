"""`voice-evaluator rescore RUN_DIR [--output DIR] [--judges RUN_FILE] [--set KEY=VALUE ...]
[--pricing FILE]`.

Each trial's line names the verdicts that failed and those whose outcome changed; the last
lines say where the re-scored files were written (in place, or a copy).

SIGINT or SIGTERM stops the re-scoring after the trial folder in progress (a second signal is
ignored, so the run reports are still rewritten): the folders not reached stay as they were,
the run reports count every trial as its folder says, and the command exits 130 / 143.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from ..errors import ConfigError
from ..runner import Rescored, RescoredTrial, rescore
from ._output import PROG, relative
from ._run import SIGNAL_EXIT


def _trial_line(trial: RescoredTrial, where: str) -> str:
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


def _priced_line(trial: RescoredTrial, where: str) -> str:
    def total(cost: Any) -> str:
        if cost is None or cost.total is None:
            return "unknown"
        return f"{cost.total:.6g}" + (f" {cost.currency}" if cost.currency else "")

    return f"{where}: cost {total(trial.report.cost)} (was {total(trial.previous.cost)})"


class _Signals:
    """SIGINT and SIGTERM while re-scoring: the first sets ``stop`` and says so."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.received: int | None = None

    def __call__(self, number: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = number
            print(f"\n{PROG}: {signal.Signals(number).name} received: stopping after the trial "
                  "in progress, then rewriting the run reports", file=sys.stderr, flush=True)
        self.stop.set()


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[_Signals]:
    signals = _Signals()
    previous = {number: signal.signal(number, signals) for number in SIGNAL_EXIT}
    try:
        yield signals
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def rescore_command(args: argparse.Namespace) -> int:
    pricing = args.pricing
    if pricing is not None and (args.judges is not None or args.overrides):
        raise ConfigError("--pricing changes only the cost: give it without --judges or --set",
                          source="CLI", key="--pricing")
    with _stopped_by_signals() as signals:
        result = rescore(args.run_dir, output=args.output, judges_from=args.judges,
                         overrides=args.overrides, pricing=pricing, stop=signals.stop)
    code = result.exit_code if signals.received is None or not result.interrupted \
        else SIGNAL_EXIT[signals.received]
    return _report(args, result, code)


def _report(args: argparse.Namespace, result: Rescored, code: int) -> int:
    """The command's lines (see the module docstring); returns ``code``."""
    pricing = args.pricing
    if args.overrides:
        print(f"re-scored with: {', '.join(args.overrides)} (over what each trial recorded; "
              "kept in the run report as rescore_overrides)")
    if pricing is not None:
        for trial in result.trials:
            print(_priced_line(trial, relative(str(trial.trial_dir))))
        for note in result.notes:  # an interrupted re-pricing
            print(relative(note))
        print(f"re-priced under {relative(str(pricing))}: only the cost of the trial, run and "
              f"sweep reports of {relative(result.location)} was rewritten")
        print(f"bundle: {result.location}")
        return code
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
    return code
