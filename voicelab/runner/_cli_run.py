"""`voice-evaluator run`: progress on a terminal, a short summary, the exit code."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._run import arun
from ._trial import TrialResult


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


def _fmt_ms(value: Any) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def run_command(args: argparse.Namespace) -> int:
    import asyncio

    from ..metrics import summarize

    progress = _Progress(enabled=sys.stderr.isatty() and not args.quiet)
    outcome = asyncio.run(arun(args.run_file, trials=args.trials, concurrency=args.concurrency,
                               artifacts_dir=args.artifacts_dir, overrides=args.overrides,
                               on_trial_done=progress))
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
    latencies = [t.get("first_audio_latency_ms") for r in outcome.trials
                 for t in r.turn_metrics]
    stats = summarize(latencies)
    print(f"first-audio latency p50 {_fmt_ms(stats['p50'])}, p95 {_fmt_ms(stats['p95'])} "
          f"over {stats['count']} response(s)")
    print(f"{report.passed_trials}/{report.trial_count} trial(s) passed; pass@k "
          f"{str(report.pass_at_k).lower()}, pass^k {str(report.pass_power_k).lower()}")
    print(f"bundle: {report.bundle_path}")
    return report.exit_code



def sweep_command(args: argparse.Namespace) -> int:
    import asyncio

    from ._matrix import arun_matrix, plan_matrix

    plan = plan_matrix(args.suite_file, trials=args.trials, concurrency=args.concurrency,
                       overrides=args.overrides)
    for line in plan.lines():
        print(line)
    progress = _Progress(enabled=sys.stderr.isatty() and not args.quiet)
    outcome = asyncio.run(arun_matrix(plan, artifacts_dir=args.artifacts_dir,
                                      on_trial_done=progress))
    report = outcome.report
    width = max((len(c.cell_id) for c in report.cells), default=10)
    for cell in report.cells:
        status = "pass" if cell.pass_power_k else "FAIL"
        print(f"{cell.cell_id:<{width}}  {cell.passed_trials}/{cell.trial_count} passed  "
              f"pass@k {str(cell.pass_at_k).lower():<5} pass^k {str(cell.pass_power_k).lower():<5}"
              f"  {status}")
    print(f"{report.passed_trials}/{report.conversations} conversation(s) passed; pass@k "
          f"{str(report.pass_at_k).lower()}, pass^k {str(report.pass_power_k).lower()}")
    print(f"matrix: {outcome.run_dir}")
    return report.exit_code
