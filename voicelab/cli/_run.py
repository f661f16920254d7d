"""`voice-evaluator run` / `sweep`: progress on a terminal, a short summary, the exit code.

SIGINT (Ctrl-C) and SIGTERM (what CI systems and container runtimes send) are handled alike:
the run is cancelled, the trials in flight write their evidence, the run report says
``interrupted``, the summary and the bundle path are printed, and the exit code is 130 or 143.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._exit_codes import EXIT_INTERRUPTED, EXIT_TERMINATED
from ..metrics import summarize
from ..runner import (
    MatrixInterrupted,
    MatrixOutcome,
    RunInterrupted,
    RunOutcome,
    TrialResult,
    arun,
    arun_matrix,
    plan_matrix,
)
from ._output import PROG

T = TypeVar("T")

#: Exit code after a signal, as shells report it (128 + the signal number).
_SIGNAL_EXIT: dict[int, int] = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED}


class _Progress:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, result: TrialResult, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 24
        filled = int(width * done / total)
        mark = "pass" if result.report.passed else "FAIL"
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                         f"{result.summary.trial_id} {mark}   ")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run_until_signal(start: Callable[[], Awaitable[T]]) -> tuple[T | None, int | None,
                                                                 BaseException | None]:
    """Run ``start()`` on a new event loop; SIGINT and SIGTERM cancel it once (a repeated
    signal is ignored, so the evidence is still written). Returns (result, signal number or
    None, the cancellation raised)."""
    received: list[int] = []

    async def main() -> tuple[T | None, BaseException | None]:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(number: int) -> None:
            if not received:
                print(f"\n{PROG}: {signal.Signals(number).name} received: stopping, "
                      f"writing the evidence gathered so far", file=sys.stderr, flush=True)
                task.cancel()
            received.append(number)

        for number in _SIGNAL_EXIT:
            loop.add_signal_handler(number, on_signal, number)
        try:
            return await start(), None
        except asyncio.CancelledError as stopped:
            if not received:
                raise
            return None, stopped
        finally:
            for number in _SIGNAL_EXIT:
                loop.remove_signal_handler(number)

    result, stopped = asyncio.run(main())
    return result, (received[0] if received else None), stopped


def _fmt_ms(value: Any) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def print_run_summary(outcome: RunOutcome) -> None:
    report = outcome.report
    for trial in outcome.trials:
        summary = trial.summary
        status = "pass" if summary.passed else "FAIL"
        detail = f"exit {summary.exit_reason}"
        if summary.execution_status != "succeeded":
            failures = "; ".join(f.message for f in trial.report.failures)
            detail += f", execution failed: {failures}"
        elif summary.failed_verdicts:
            detail += f", failed: {', '.join(summary.failed_verdicts)}"
        print(f"{summary.trial_id} seed {summary.seed}: {status} ({detail})")
    stats = summarize([t.first_audio_latency_ms for r in outcome.trials
                       for t in r.turn_metrics])
    print(f"first-audio latency p50 {_fmt_ms(stats.p50)}, p95 {_fmt_ms(stats.p95)} "
          f"over {stats.count} response(s)")
    print(f"{report.passed_trials}/{report.trial_count} trial(s) passed; pass@k "
          f"{str(report.pass_at_k).lower()}, pass^k {str(report.pass_power_k).lower()}")
    if report.message:
        print(report.message)
    for problem in outcome.write_errors:
        print(f"{PROG}: execution failed: {problem}", file=sys.stderr)
    print(f"bundle: {report.bundle_path}")


def run_command(args: argparse.Namespace) -> int:
    progress = _Progress(enabled=sys.stderr.isatty() and not args.quiet)
    outcome, number, stopped = run_until_signal(lambda: arun(
        args.run_file, trials=args.trials, concurrency=args.concurrency,
        artifacts_dir=args.artifacts_dir, overrides=args.overrides, on_trial_done=progress))
    if number is not None:
        if isinstance(stopped, RunInterrupted):
            print_run_summary(stopped.outcome)
        return _SIGNAL_EXIT[number]
    assert outcome is not None
    print_run_summary(outcome)
    return outcome.exit_code


def print_matrix_summary(outcome: MatrixOutcome) -> None:
    report = outcome.report
    width = max((len(c.cell_id) for c in report.cells), default=10)
    for cell in report.cells:
        status = "pass" if cell.pass_power_k else "FAIL"
        print(f"{cell.cell_id:<{width}}  {cell.passed_trials}/{cell.trial_count} passed  "
              f"pass@k {str(cell.pass_at_k).lower():<5} pass^k {str(cell.pass_power_k).lower():<5}"
              f"  {status}")
    print(f"{report.passed_trials}/{report.conversations} conversation(s) passed; pass@k "
          f"{str(report.pass_at_k).lower()}, pass^k {str(report.pass_power_k).lower()}")
    for problem in outcome.write_errors:
        print(f"{PROG}: execution failed: {problem}", file=sys.stderr)
    print(f"matrix: {outcome.run_dir}")


def sweep_command(args: argparse.Namespace) -> int:
    plan = plan_matrix(args.suite_file, trials=args.trials, concurrency=args.concurrency,
                       overrides=args.overrides)
    for line in plan.lines():
        print(line)
    progress = _Progress(enabled=sys.stderr.isatty() and not args.quiet)
    outcome, number, stopped = run_until_signal(lambda: arun_matrix(
        plan, artifacts_dir=args.artifacts_dir, on_trial_done=progress))
    if number is not None:
        if isinstance(stopped, MatrixInterrupted):
            print_matrix_summary(stopped.outcome)
        return _SIGNAL_EXIT[number]
    assert outcome is not None
    print_matrix_summary(outcome)
    return outcome.exit_code
