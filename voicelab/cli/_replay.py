"""`voice-evaluator replay RUN_DIR`: the recorded caller audio of a run (or of every cell of a
sweep), sent again.

The summary and exit codes are those of ``run`` / ``sweep`` (0 passed, 3 a trial did not pass,
4 an execution failure, 2 a folder that cannot be replayed, 130/143 on a signal)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError
from ..runner import MatrixInterrupted, RunInterrupted, areplay, areplay_sweep
from ._output import relative
from ._run import (
    _SIGNAL_EXIT,
    _progress,
    _write_junit,
    print_matrix_summary,
    print_run_summary,
    run_until_signal,
)


def _compare_hint(original: str, replayed: Path) -> None:
    print(f"replay of: {relative(original)} (compare them: voice-evaluator compare "
          f"{relative(original)} {relative(str(replayed))})")


def replay_command(args: argparse.Namespace) -> int:
    if (args.run_dir / "matrix-report.json").is_file():
        return _replay_sweep(args)
    progress = _progress(args)
    outcome, number, stopped = run_until_signal(lambda: areplay(
        args.run_dir, overrides=args.overrides, run_file=args.run_file,
        artifacts_dir=args.artifacts_dir, concurrency=args.concurrency, label=args.label,
        on_trial_done=progress))
    progress.close()
    if number is not None:
        if isinstance(stopped, RunInterrupted):
            print_run_summary(stopped.outcome)
            _write_junit(args, stopped.outcome.location)
        return _SIGNAL_EXIT[number]
    assert outcome is not None
    print_run_summary(outcome)
    if outcome.report.replay_of is not None:
        _compare_hint(outcome.report.replay_of.bundle_path, outcome.bundle_path)
    _write_junit(args, outcome.location)
    return outcome.exit_code


def _replay_sweep(args: argparse.Namespace) -> int:
    if args.run_file is not None:
        raise ConfigError("a sweep is replayed with the configuration each cell recorded: "
                          "--run-file is for a run folder", source="CLI", key="--run-file")
    progress = _progress(args)
    outcome, number, stopped = run_until_signal(lambda: areplay_sweep(
        args.run_dir, overrides=args.overrides, artifacts_dir=args.artifacts_dir,
        concurrency=args.concurrency, label=args.label, on_trial_done=progress))
    progress.close()
    if number is not None:
        if isinstance(stopped, MatrixInterrupted):
            print_matrix_summary(stopped.outcome)
            _write_junit(args, stopped.outcome.location)
        return _SIGNAL_EXIT[number]
    assert outcome is not None
    print_matrix_summary(outcome)
    if outcome.report.replay_of is not None:
        _compare_hint(outcome.report.replay_of.bundle_path, outcome.run_dir)
    _write_junit(args, outcome.location)
    return outcome.exit_code
