"""`voice-evaluator run` / `sweep`: progress on a terminal, a short summary, the exit code.

SIGINT (Ctrl-C) and SIGTERM (what CI systems and container runtimes send) are handled alike:
the run is cancelled, the trials in flight write their evidence, the run report says
``interrupted``, the summary and the bundle path are printed, and the exit code is 130 or 143.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from .._exit_codes import EXIT_INTERRUPTED, EXIT_TERMINATED
from .._progress import TrialLines, TrialProgress
from ..artifacts import (
    MATRIX_REPORT,
    RUN_REPORT,
    TRIAL_REPORT,
    JudgeCalibration,
    check_output_target,
)
from ..errors import ConfigError
from ..execution import (
    MAX_WORKERS,
    RunObserver,
    RunOptions,
    arun,
    arun_matrix,
    load_profile,
    read_run_report,
    recorded_config_file,
    require_distributed,
    resumed_overrides,
    tuned_process,
)
from ..runner import (
    MatrixInterrupted,
    MatrixOutcome,
    RunInterrupted,
    RunOutcome,
    TrialSelection,
    plan_matrix,
    read_matrix_report,
    summary_document,
)
from ._output import PROG, relative
from ._summaries import (
    print_matrix_summary,
    print_run_summary,
    trial_line,
)

T = TypeVar("T")

#: Exit code after a signal, as shells report it (128 + the signal number).
SIGNAL_EXIT: dict[int, int] = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED}


def json_aware(command: Callable[[argparse.Namespace], int]
               ) -> Callable[[argparse.Namespace], int]:
    """``--json``: stdout is the summary document's alone (:func:`run_to_the_end` prints it
    there), so every human line of the command goes to stderr."""
    def with_json(args: argparse.Namespace) -> int:
        if not getattr(args, "json", False):
            return command(args)
        args.machine_stdout = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            return command(args)

    with_json.__name__, with_json.__doc__ = command.__name__, command.__doc__
    with_json.__module__ = command.__module__
    return with_json


def _progress(args: argparse.Namespace, *, cells: bool = False) -> TrialProgress | TrialLines:
    """On stderr: tqdm's text bar on a terminal; elsewhere (a CI log) a first line at once, a
    line per finished trial as it finishes (on stdout: the summary then leaves them out) and a
    periodic count; nothing with --quiet."""
    if sys.stderr.isatty() or args.quiet:
        return TrialProgress(auto=False, file=sys.stderr, enabled=not args.quiet)
    # the trial lines are the summary's, printed as each trial finishes: on stdout like it
    # (stderr with --json, which redirects stdout); what starts and the counts on stderr
    return TrialLines(file=sys.stderr, cells=cells,
                      trials_file=sys.stdout,
                      describe=lambda result: trial_line(result.summary, result.report))


def _observers(telemetry: Any, progress: Any) -> list[Any]:
    """The run's observers: its telemetry's, and a log's progress (its first line)."""
    return [*telemetry.observers, *([progress] if isinstance(progress, TrialLines) else [])]


def _trial_lines_printed(progress: Any) -> bool:
    return isinstance(progress, TrialLines) and progress.printed_trials


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

        for number in SIGNAL_EXIT:
            loop.add_signal_handler(number, on_signal, number)
        try:
            return await start(), None
        except asyncio.CancelledError as stopped:
            if not received:
                raise
            return None, stopped
        finally:
            for number in SIGNAL_EXIT:
                loop.remove_signal_handler(number)

    result, stopped = asyncio.run(main())
    return result, (received[0] if received else None), stopped


def _calibrations(args: argparse.Namespace) -> list[JudgeCalibration]:
    from ..scoring import read_calibration

    return [read_calibration(path) for path in args.calibrations]


def _write_junit(args: argparse.Namespace, folder: str) -> None:
    if args.junit is None:
        return
    from ..artifacts import junit_xml, local_folder

    # a bundle in a store: its reports are read from a local copy
    with local_folder(folder, names=(RUN_REPORT, MATRIX_REPORT,
                                     TRIAL_REPORT)) as local:
        junit_xml(local, path=args.junit)
    print(f"junit: {relative(str(Path(args.junit).resolve()))}")


def _telemetry(args: argparse.Namespace) -> Any:
    """The run's telemetry (--otlp, --metrics-port, the OTEL_* variables); refused (exit 2)
    before anything runs when its package is missing, its port cannot be had or the --history
    folder does not exist."""
    from .._location import is_url
    from ..telemetry import Telemetry

    if args.history is not None and not is_url(args.history) and \
            not Path(args.history).expanduser().is_dir():
        raise ConfigError(f"not a folder of earlier runs: {args.history}", source="CLI",
                          key="--history")
    telemetry = Telemetry(otlp=args.otlp, metrics_port=args.metrics_port,
                          metrics_address=args.metrics_address)
    if telemetry.metrics is not None:
        print(f"metrics: {telemetry.metrics.url}", file=sys.stderr, flush=True)
    return telemetry


def _history(args: argparse.Namespace, outcome: RunOutcome | MatrixOutcome) -> None:
    """--history: each cell of the run or sweep against the earlier runs, printed and kept as
    flakiness.json beside the run report (a local bundle; --junit then marks flaky cells)."""
    if args.history is None:
        return
    from ..artifacts import FLAKINESS, write_json
    from ..history import flakiness, stability_line

    if isinstance(outcome, MatrixOutcome):
        reports, folder, run_id = [c.report for c in outcome.cells], outcome.run_dir, \
            outcome.report.run_id
    else:
        reports, folder, run_id = [outcome.report], outcome.bundle_path, outcome.report.run_id
    found = flakiness(args.history, reports, run_id=run_id)
    print(f"history: {found.runs_read} earlier run(s) in {args.history}"
          + (f" ({len(found.unreadable)} report(s) left out, see the log)"
             if found.unreadable else ""))
    for cell in found.cells:
        print(f"  {stability_line(cell)}")
    if folder.is_dir():  # a bundle published to a store left no local folder
        write_json(folder / FLAKINESS, found)


def _resumed_config(args: argparse.Namespace, *, given: Path | None, recorded: str | None,
                    what: str) -> Path:
    """The config file of a run: the one given, else (with --resume) the one the bundle names."""
    if given is not None:
        return given
    if args.resume is None:
        raise ConfigError(f"give the {what} file (or --resume DIR)", source="CLI")
    if recorded is None:
        raise ConfigError(f"the bundle does not name its {what} file: give it", source="CLI",
                          key="--resume")
    return recorded_config_file(recorded, bundle=args.resume)


def _say_resumed_overrides(overrides: list[str], *, what: str = "run") -> None:
    if overrides:
        print(f"resuming with the {what}'s --set overrides (kept in the bundle): "
              f"{', '.join(overrides)}")


def _check_resume_options(args: argparse.Namespace) -> None:
    if args.rerun_failed and args.resume is None:
        raise ConfigError("--rerun-failed needs --resume DIR", source="CLI")
    if args.resume is not None and args.artifacts_dir is not None:
        raise ConfigError("a resumed run stays in its folder: give --resume DIR or "
                          "--artifacts-dir, not both", source="CLI")


def _check_load_options(args: argparse.Namespace) -> None:
    """--ramp, --arrival-rate and --max-concurrency refused together as the library would,
    before anything is planned or printed."""
    load_profile(concurrency=args.concurrency or 1, ramp_seconds=args.ramp_seconds,
                 arrival_rate=args.arrival_rate, max_concurrency=args.max_concurrency)


class LoadKeywords(TypedDict):
    """The load profile's options as the library's keywords."""

    ramp_seconds: float | None
    arrival_rate: float | None
    max_concurrency: int | None


def load_keywords(args: argparse.Namespace) -> LoadKeywords:
    """--ramp, --arrival-rate, --max-concurrency, checked (:func:`_check_load_options`)."""
    _check_load_options(args)
    return LoadKeywords(ramp_seconds=args.ramp_seconds, arrival_rate=args.arrival_rate,
                        max_concurrency=args.max_concurrency)


def _run_options(args: argparse.Namespace, *, executor: RunOptions,
                 calibrations: Sequence[JudgeCalibration], observers: Sequence[RunObserver],
                 progress: TrialProgress | TrialLines) -> RunOptions:
    """What ``run`` and ``sweep`` pass on of their command line (``executor``: the options
    :func:`_executor_options` checked before anything runs)."""
    return dataclasses.replace(
        executor, trials=args.trials, concurrency=args.concurrency,
        artifacts_dir=args.artifacts_dir, overrides=args.overrides, on_trial_done=progress,
        label=args.label, calibrations=calibrations, resume=args.resume,
        rerun_failed=args.rerun_failed, retry_inconclusive=args.retry_inconclusive,
        observers=observers, only=args.only or (), fail_fast=args.fail_fast,
        max_cost=args.max_cost, **load_keywords(args))


def _executor_options(args: argparse.Namespace) -> RunOptions:
    """--executor, --workers, --scheduler as :class:`RunOptions` (checked before any run)."""
    if args.scheduler is not None and args.executor != "dask":
        raise ConfigError("needs --executor dask", source="CLI", key="--scheduler")
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        raise ConfigError(f"must be a whole number from 1 to {MAX_WORKERS}, got {args.workers}",
                          source="CLI", key="--workers")
    if args.executor == "dask":
        require_distributed()
    return RunOptions(executor=args.executor, workers=args.workers, scheduler=args.scheduler)


@json_aware
def run_command(args: argparse.Namespace) -> int:
    _check_resume_options(args)
    _check_load_options(args)
    recorded = None
    if args.resume is not None:
        report = read_run_report(args.resume)
        recorded = report.run_file
        _say_resumed_overrides(report.overrides)
    run_file = _resumed_config(args, given=args.run_file, recorded=recorded, what="run")
    calibrations = _calibrations(args)
    executor = _executor_options(args)
    with _telemetry(args) as telemetry:
        return run_to_the_end(args, lambda progress: arun(run_file, _run_options(
            args, executor=executor, calibrations=calibrations,
            observers=_observers(telemetry, progress), progress=progress)),
            after=lambda o: _history(args, o))


def run_to_the_end(args: argparse.Namespace, start: Callable[[Any], Awaitable[Any]], *,
                   after: Callable[[Any], None] | None = None, cells: bool = False,
                   first_line: str | None = None) -> int:
    """Run ``start(progress)`` (a run or a sweep: ``cells``) to its end or a signal, print its
    summary (also for an interrupted one), ``after`` it, write --junit; the exit code.
    ``first_line`` is said at once in a log (a run's own says its bundle when it opens)."""
    if args.junit is not None:  # refused before anything runs, not after
        check_output_target(args.junit, key="--junit")
    code, outcome = _to_the_end(args, start, after=after, cells=cells, first_line=first_line)
    machine = getattr(args, "machine_stdout", None)
    if machine is not None and outcome is not None:
        print(json.dumps(summary_document(outcome), indent=2), file=machine, flush=True)
    return code


def _to_the_end(args: argparse.Namespace, start: Callable[[Any], Awaitable[Any]], *,
                after: Callable[[Any], None] | None, cells: bool, first_line: str | None
                ) -> tuple[int, RunOutcome | MatrixOutcome | None]:
    """:func:`run_to_the_end`'s run and summary: the exit code and the (partial) outcome."""
    progress = _progress(args, cells=cells)
    if first_line is not None and isinstance(progress, TrialLines):
        progress.starting(first_line)
    try:
        # the command line's process is the run's own: it tunes it while the run is in progress
        with tuned_process():
            outcome, number, stopped = run_until_signal(lambda: start(progress))
    finally:
        progress.close()
    printed = _trial_lines_printed(progress)
    if number is not None:
        if isinstance(stopped, RunInterrupted | MatrixInterrupted):
            _summary(stopped.outcome, trial_lines=not printed)
            _write_junit(args, stopped.outcome.location)
            return SIGNAL_EXIT[number], stopped.outcome
        return SIGNAL_EXIT[number], None
    assert outcome is not None
    _summary(outcome, trial_lines=not printed)
    if after is not None:
        after(outcome)
    _write_junit(args, outcome.location)
    return int(outcome.exit_code), outcome


def _summary(outcome: RunOutcome | MatrixOutcome, *, trial_lines: bool) -> None:
    if isinstance(outcome, MatrixOutcome):
        print_matrix_summary(outcome)
    else:
        print_run_summary(outcome, trial_lines=trial_lines)


@json_aware
def sweep_command(args: argparse.Namespace) -> int:
    _check_resume_options(args)
    _check_load_options(args)
    trials, recorded, overrides = args.trials, None, list(args.overrides)
    if args.resume is not None:
        previous = read_matrix_report(args.resume)
        recorded = previous.suite_path
        trials = trials if trials is not None else previous.trials_per_cell
        overrides = resumed_overrides(previous.overrides, args.overrides, bundle=args.resume)
        _say_resumed_overrides(previous.overrides, what="sweep")
    suite_file = _resumed_config(args, given=args.suite_file, recorded=recorded, what="suite")
    calibrations = _calibrations(args)
    plan = plan_matrix(suite_file, trials=trials, concurrency=args.concurrency,
                       overrides=overrides)
    if args.only:
        if args.resume is not None:
            raise ConfigError("a resumed sweep runs the trials it planned: --only is for a "
                              "new sweep", source="CLI", key="--only")
        plan = plan.select(TrialSelection.parse(args.only))
    for line in plan.lines():
        print(line)
    executor = _executor_options(args)
    with _telemetry(args) as telemetry:
        # the plan holds the sweep's trials, concurrency, overrides and --only already
        return run_to_the_end(args, lambda progress: arun_matrix(plan, dataclasses.replace(
            _run_options(args, executor=executor, calibrations=calibrations,
                         observers=_observers(telemetry, progress), progress=progress),
            trials=None, concurrency=None, overrides=(), only=())), cells=True,
            after=lambda o: _history(args, o), first_line=f"starting {plan.conversations} "
            f"conversation(s) in {len(plan.cells)} cell(s)")
