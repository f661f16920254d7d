"""`voice-evaluator replay RUN_DIR`: the recorded user audio of a run (or of every cell of a
sweep), sent again.

The summary and exit codes are those of ``run`` / ``sweep`` (0 passed, 3 a trial did not pass,
4 an execution failure, 2 a folder that cannot be replayed, 130/143 on a signal)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..artifacts import LATEST, MATRIX_REPORT
from ..errors import ConfigError
from ..execution import areplay, areplay_sweep
from ._output import relative
from ._run import load_keywords, run_to_the_end


def _compare_hint(outcome: Any, replayed: Path) -> None:
    origin = outcome.report.replay_of
    if origin is None:
        return
    original = origin.bundle_path
    print(f"replay of: {relative(original)} (compare them: voice-evaluator compare "
          f"{relative(original)} {relative(str(replayed))})")
    latest = Path(replayed).parent / LATEST
    if latest.is_symlink() and latest.resolve() == Path(replayed).resolve():
        print(f"latest: {relative(str(latest))} now points to this replay "
              f"({Path(replayed).name}), not to the run it replayed")


def replay_command(args: argparse.Namespace) -> int:
    if (args.run_dir / MATRIX_REPORT).is_file():
        return _replay_sweep(args)
    return run_to_the_end(args, lambda progress: areplay(
        args.run_dir, overrides=args.overrides, run_file=args.run_file,
        artifacts_dir=args.artifacts_dir, concurrency=args.concurrency, label=args.label,
        on_trial_done=progress, **load_keywords(args)), after=lambda outcome: _compare_hint(outcome, outcome.bundle_path))


def _replay_sweep(args: argparse.Namespace) -> int:
    if args.run_file is not None:
        raise ConfigError("a sweep is replayed with the configuration each cell recorded: "
                          "--run-file is for a run folder", source="CLI", key="--run-file")
    return run_to_the_end(args, lambda progress: areplay_sweep(
        args.run_dir, overrides=args.overrides, artifacts_dir=args.artifacts_dir,
        concurrency=args.concurrency, label=args.label, on_trial_done=progress,
        **load_keywords(args)), after=lambda outcome: _compare_hint(outcome, outcome.run_dir),
        cells=True)
