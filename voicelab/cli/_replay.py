"""`voice-evaluator replay RUN_DIR`: the recorded caller audio of a run, sent again.

The summary and exit codes are those of ``run`` (0 passed, 3 a trial did not pass, 4 an
execution failure, 2 a folder that cannot be replayed, 130/143 on a signal)."""

from __future__ import annotations

import argparse

from ..runner import RunInterrupted, areplay
from ._output import relative
from ._run import _SIGNAL_EXIT, _progress, _write_junit, print_run_summary, run_until_signal


def replay_command(args: argparse.Namespace) -> int:
    progress = _progress(args)
    outcome, number, stopped = run_until_signal(lambda: areplay(
        args.run_dir, overrides=args.overrides, run_file=args.run_file,
        artifacts_dir=args.artifacts_dir, concurrency=args.concurrency, label=args.label,
        on_trial_done=progress))
    progress.close()
    if number is not None:
        if isinstance(stopped, RunInterrupted):
            print_run_summary(stopped.outcome)
            _write_junit(args, stopped.outcome.bundle_path)
        return _SIGNAL_EXIT[number]
    assert outcome is not None
    print_run_summary(outcome)
    origin = outcome.report.replay_of
    if origin is not None:
        print(f"replay of: {relative(origin.bundle_path)} (compare them: voice-evaluator "
              f"compare {relative(origin.bundle_path)} {relative(str(outcome.bundle_path))})")
    _write_junit(args, outcome.bundle_path)
    return outcome.exit_code
