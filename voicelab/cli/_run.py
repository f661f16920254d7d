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
    BudgetState,
    CostSummary,
    EndpointingCurve,
    GateCheck,
    JudgeCalibration,
    PassRate,
    RunReport,
    TelemetryExport,
    TrialReport,
    TrialSummary,
    check_output_target,
)
from ..errors import ConfigError
from ..execution import (
    MAX_WORKERS,
    RunObserver,
    RunOptions,
    arun,
    arun_matrix,
    combined,
    load_line,
    load_profile,
    read_run_report,
    recorded_config_file,
    require_distributed,
    resumed_overrides,
    tuned_process,
)
from ..metrics import summarize
from ..runner import (
    MatrixInterrupted,
    MatrixOutcome,
    RunInterrupted,
    RunOutcome,
    TrialSelection,
    plan_matrix,
    read_matrix_report,
    summary_document,
    unpriced_text,
)
from ._output import PROG, relative

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


def _fmt_ms(value: Any) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def rate_text(rate: PassRate | None) -> str:
    """``66.7% [20.8%, 93.9%] (2/3, Wilson 95%)``; ``(2/3, 1 inconclusive, ...)`` when some
    of those not passed were undecided."""
    if rate is None:
        return "n/a"
    if rate.estimate is None or rate.low is None or rate.high is None:
        return f"n/a ({rate.passed}/{rate.n})"
    method = "Wilson" if rate.method == "wilson" else "Clopper-Pearson"
    undecided = f", {rate.inconclusive} inconclusive" if rate.inconclusive else ""
    return (f"{rate.estimate:.1%} [{rate.low:.1%}, {rate.high:.1%}] ({rate.passed}/{rate.n}"
            f"{undecided}, {method} {rate.confidence:.0%})")


def _print_statistics(report: RunReport) -> None:
    print(f"pass rate {rate_text(report.pass_rate)}")
    for verdict in report.verdict_pass_rates:
        if verdict.pass_rate.passed < verdict.pass_rate.n:  # the verdicts that failed somewhere
            print(f"  verdict {verdict.name}: {rate_text(verdict.pass_rate)}")
    for corrected in report.judge_corrected_pass_rates:
        value = "n/a" if corrected.corrected is None else f"{corrected.corrected:.1%}"
        interval = "" if corrected.low is None or corrected.high is None else \
            f" [{corrected.low:.1%}, {corrected.high:.1%}]"
        note = f" ({corrected.note})" if corrected.note else ""
        print(f"  judge {corrected.judge}: judge pass rate "
              f"{rate_text(corrected.judge_pass_rate)}; corrected (Rogan-Gladen) "
              f"{value}{interval}{note}")
    _print_gates(report.gates)
    line = retention_line(report)
    if line:
        print(line)


def retention_line(report: RunReport) -> str | None:
    """What the run's ``retention:`` did not keep (None: it kept everything)."""
    kept = report.retention
    if kept is None:
        return None
    parts = []
    if kept.audio_dropped_trials:
        parts.append(f"audio not kept for {kept.audio_dropped_trials} of "
                     f"{kept.audio_dropped_trials + kept.audio_kept_trials} trial(s) "
                     f"(retention audio: {kept.audio})")
    if kept.transcripts == "redacted":
        parts.append("transcripts redacted")
    return f"retention: {'; '.join(parts)}" if parts else None


def _print_gates(gates: list[GateCheck]) -> None:
    for gate in gates:
        mark = "passed" if gate.status == "passed" else gate.status.upper()
        print(f"gate {mark}: {gate.message}")


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


def telemetry_line(exports: list[TelemetryExport]) -> str | None:
    """What the run sent to its collector, and what it lost."""
    if not exports:
        return None
    spans = sum(e.spans for e in exports)
    exported = sum(e.spans_exported for e in exports)
    line = (f"telemetry: {sum(e.traces for e in exports)} trace(s), {exported}/{spans} span(s) "
            f"exported to {exports[0].endpoint}")
    failed = spans - exported
    return f"{line}; {failed} LOST (the run itself is unaffected)" if failed else line


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


def degraded_warning(warnings: Sequence[str], degraded: int, executed: int) -> str | None:
    """The summary's one warning line, only when the evaluator's own loop lag puts something at
    stake (``RunReport.measurement_warnings``: a verdict or gate its error could change, a
    response beyond the documented accuracy). Degraded trials whose errors change nothing are
    counted in the report (``degraded_trials``), not announced."""
    if not warnings:
        return None
    return (f"warning: the evaluator's event loop lagged where it matters: "
            f"{'; '.join(warnings)} ({degraded} of {executed} trial(s) degraded: voice-metrics.json "
            f"measurement_quality); run fewer concurrent trials per worker (--concurrency) or "
            f"more workers, or set measurement.lag_budget_ms")


def _amount(amount: float | None, currency: str | None) -> str:
    if amount is None:
        return "unknown"
    text = f"{amount:.4f}" if amount >= 0.01 or amount == 0 else f"{amount:.3g}"
    return f"{text} {currency}" if currency else text


def cost_line(cost: CostSummary | None) -> str | None:
    """``cost 0.0123 USD (persona 0.01, product 0.0023); unpriced: ...`` (None: no cost)."""
    if cost is None or not cost.trials:
        return None
    parts = ", ".join(f"{component} {_amount(amount, None)}"
                      for component, amount in cost.by_component.items() if amount)
    line = f"cost {_amount(cost.total, cost.currency)}" + (f" ({parts})" if parts else "")
    if cost.total is not None and cost.trials:
        line += f", {_amount(cost.total / cost.trials, cost.currency)} a trial"
    if cost.unpriced:
        line += f"; not in it (no price or quantity unknown): {unpriced_text(cost.unpriced)}"
    if cost.estimated:
        line += "; some quantities are estimates (docs/cost.md)"
    return line


def budget_stop_line(budget: BudgetState | None, *, ran: int, planned: int) -> str | None:
    """The one line a run or sweep the budget stopped ends with (None: it did not stop)."""
    if budget is None or not budget.trials_not_started:
        return None
    return (f"{PROG}: stopped: budget: {ran} of {planned} trial(s) ran and spent "
            f"{_amount(budget.spent, budget.currency)}; another would have passed --max-cost "
            f"{_amount(budget.max_cost, budget.currency)} ({budget.trials_not_started} not "
            f"started)")


def _load_summary_line(report: RunReport) -> str | None:
    """The load profile and what it achieved, unless every trial started at once."""
    profile = report.load_profile
    if profile is None or (profile.kind == "closed" and not profile.ramp_seconds):
        return None
    return load_line(profile, report.achieved_concurrency)


def _sweep_load_line(outcome: MatrixOutcome) -> str | None:
    """The sweep's load profile (its cells share it) and what the cells achieved together,
    unless every trial started at once."""
    reports = [c.report for c in outcome.cells if c.report.load_profile is not None]
    profile = reports[0].load_profile if reports else None
    if profile is None or (profile.kind == "closed" and not profile.ramp_seconds):
        return None
    return load_line(profile, combined([r.achieved_concurrency for r in reports
                                        if r.achieved_concurrency is not None]))


def _lag_budget_line(report: RunReport) -> str | None:
    if report.lag_budget_ms is None or report.lowest_concurrency is None:
        return None
    return (f"lag budget {report.lag_budget_ms:g} ms (loop-lag p99): lowest concurrency "
            f"{report.lowest_concurrency}")


#: How the summary line names a trial's status.
_STATUS_WORD = {"passed": "pass", "failed": "FAIL", "inconclusive": "INCONCLUSIVE",
                "unjudged": "unjudged"}


def unjudged_note(report: RunReport) -> str:
    """``, 2 unjudged (nothing applied: not in the pass rate)`` when some trial was unjudged."""
    if not report.unjudged_trials:
        return ""
    return f", {report.unjudged_trials} unjudged (nothing applied: not in the pass rate)"


def trial_line(summary: TrialSummary, report: TrialReport) -> str:
    """``trial-001 seed 42: pass (exit endpoint_completion)``; an inconclusive trial is named
    so (never "failed") with the verdicts that could not be decided."""
    status = summary.status or ("passed" if summary.passed else "failed")
    detail = f"exit {summary.exit_reason}"
    if summary.execution_status != "succeeded":
        failures = "; ".join(f.message for f in report.failures)
        detail += f", execution failed: {failures}"
    else:
        if summary.failed_verdicts:
            detail += f", failed: {', '.join(summary.failed_verdicts)}"
        if summary.inconclusive_verdicts:
            detail += f", undecided: {', '.join(summary.inconclusive_verdicts)}"
        if status == "unjudged":
            detail += ", no critical verdict or judge applies"
        not_applicable = [v.name for v in report.verdicts if v.status == "not_applicable"]
        if not_applicable:
            detail += f", not applicable: {', '.join(not_applicable)}"
    if summary.attempts > 1:
        detail += f", attempt {summary.attempts} (earlier inconclusive)"
    return f"{summary.trial_id} seed {summary.seed}: {_STATUS_WORD[status]} ({detail})"


def print_run_summary(outcome: RunOutcome, *, trial_lines: bool = True) -> None:
    """The run's summary on stdout; ``trial_lines=False`` leaves out the line per trial (a
    log's progress printed each as it finished)."""
    report = outcome.report
    for trial in outcome.trials if trial_lines else ():
        print(trial_line(trial.summary, trial.report))
    stats = summarize([t.first_audio_latency_ms for r in outcome.trials
                       for t in r.turn_metrics])
    print(f"first-audio latency p50 {_fmt_ms(stats.p50)}, p95 {_fmt_ms(stats.p95)} "
          f"over {stats.count} response(s)")
    undecided = f", {report.inconclusive_trials} inconclusive (not passed)" \
        if report.inconclusive_trials else ""
    retried = f", {report.retried_trials} retried after an inconclusive attempt" \
        if report.retried_trials else ""
    print(f"{report.passed_trials}/{report.trial_count} trial(s) passed{undecided}"
          f"{unjudged_note(report)}{retried}; "
          f"pass@k {str(report.pass_at_k).lower()}, pass^k {str(report.pass_power_k).lower()}")
    _print_statistics(report)
    if report.endpointing is not None:
        print(endpointing_line(report.endpointing))
    for line in (_load_summary_line(report), _lag_budget_line(report),
                 degraded_warning(report.measurement_warnings, report.degraded_trials,
                                  report.executed_trials)):
        if line:
            print(line)
    if report.message:
        print(report.message)
    line = cost_line(report.cost)
    if line:
        print(line)
    telemetry = telemetry_line([report.telemetry] if report.telemetry else [])
    if telemetry:
        print(telemetry)
    for problem in outcome.write_errors:
        print(f"{PROG}: execution failed: {problem}", file=sys.stderr)
    print(f"bundle: {report.bundle_path}")
    stop = budget_stop_line(report.budget, ran=report.executed_trials,
                            planned=report.planned_trials)
    if stop:
        print(stop, file=sys.stderr)


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


def endpointing_line(curve: EndpointingCurve) -> str:
    """The endpointing curve's headline (docs/endpointing.md)."""
    pauses = [p.pause_ms for p in curve.points]
    span = f"{min(pauses):.0f}-{max(pauses):.0f} ms" if pauses else "no pauses"
    cut = sum(p.cut_ins for p in curve.points)
    turns = sum(p.turns for p in curve.points)
    counts = f"{cut} of {turns} hesitation turn(s) cut into over pauses of {span}"
    if curve.half_cut_in_pause_ms is not None:
        return (f"endpointing: cuts in half the time at a pause of "
                f"{curve.half_cut_in_pause_ms:.0f} ms ({curve.half_cut_in}); {counts}")
    if curve.half_cut_in == "below_range":
        return f"endpointing: cuts in at least half the time even at the shortest pause; {counts}"
    return f"endpointing: cuts in less than half the time at every pause (not bracketed); {counts}"


def print_matrix_summary(outcome: MatrixOutcome) -> None:
    report = outcome.report
    width = max((len(c.cell_id) for c in report.cells), default=10)
    for cell in report.cells:
        status = "pass" if cell.pass_power_k else "FAIL"
        print(f"{cell.cell_id:<{width}}  {cell.passed_trials}/{cell.trial_count} passed  "
              f"pass@k {str(cell.pass_at_k).lower():<5} pass^k {str(cell.pass_power_k).lower():<5}"
              f"  {status}  {rate_text(cell.pass_rate)}")
    for margin in report.margins:
        print(f"{margin.dimension} {margin.value}: {rate_text(margin.pass_rate)}")
    print(f"{report.passed_trials}/{report.conversations} conversation(s) passed; pass@k "
          f"{str(report.pass_at_k).lower()}, pass^k {str(report.pass_power_k).lower()}; "
          f"pass rate {rate_text(report.pass_rate)}")
    for stage in report.stages or []:
        spent = f", cost {_amount(stage.cost.total, stage.cost.currency)}" \
            if stage.cost is not None else ""
        status = stage.status.upper() if stage.status == "failed" else stage.status
        print(f"stage {stage.name}: {status} ({stage.trials} trial(s){spent}); gate "
              f"{stage.gate}: {stage.reason}")
    line = cost_line(report.cost)
    if line:
        print(line)
    for curve in report.endpointing or []:
        print(f"{curve.scenario} / {curve.persona} / {curve.environment}: "
              f"{endpointing_line(curve)}")
    for cell_outcome in outcome.cells:
        blocking = [g for g in cell_outcome.report.gates if g.status != "passed"]
        for gate in blocking:
            mark = gate.status.upper()
            print(f"gate {mark} in {Path(cell_outcome.bundle_path).name}: {gate.message}")
    stopped = next((c.report.stopped_after_failures for c in outcome.cells
                    if c.report.stopped_after_failures is not None), None)
    if stopped is not None:
        print(f"stopped after {stopped} trial(s) did not pass (--fail-fast {stopped}): "
              f"{report.conversations - report.executed_trials} planned conversation(s) did "
              "not run")
    line = _sweep_load_line(outcome)
    if line:
        print(line)
    warning = degraded_warning(
        [f"{Path(c.bundle_path).name}: {line}" for c in outcome.cells
         for line in c.report.measurement_warnings],
        sum(c.report.degraded_trials for c in outcome.cells), report.executed_trials)
    if warning:
        print(warning)
    telemetry = telemetry_line([c.report.telemetry for c in outcome.cells if c.report.telemetry])
    if telemetry:
        print(telemetry)
    for problem in outcome.write_errors:
        print(f"{PROG}: execution failed: {problem}", file=sys.stderr)
    print(f"matrix: {outcome.location}")
    stop = budget_stop_line(report.budget, ran=report.executed_trials,
                            planned=report.conversations)
    if stop:
        print(stop, file=sys.stderr)


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
