"""What ``run`` and ``sweep`` print when they end: the summary lines of a run or a sweep (pass
rates with their intervals, gates, costs, load, loop-lag warnings, telemetry, the bundle).

Pure formatting of the reports: the commands themselves (:mod:`._run`) decide when to print.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..artifacts import (
    BudgetState,
    CostSummary,
    EndpointingCurve,
    GateCheck,
    PassRate,
    RunReport,
    TelemetryExport,
    TrialReport,
    TrialSummary,
)
from ..execution import combined, load_line
from ..metrics import summarize
from ..runner import MatrixOutcome, RunOutcome, unpriced_text
from ._output import PROG


def fmt_ms(value: Any) -> str:
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


def print_statistics(report: RunReport) -> None:
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
    print_gates(report.gates)
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


def print_gates(gates: list[GateCheck]) -> None:
    for gate in gates:
        mark = "passed" if gate.status == "passed" else gate.status.upper()
        print(f"gate {mark}: {gate.message}")


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
    print(f"first-audio latency p50 {fmt_ms(stats.p50)}, p95 {fmt_ms(stats.p95)} "
          f"over {stats.count} response(s)")
    undecided = f", {report.inconclusive_trials} inconclusive (not passed)" \
        if report.inconclusive_trials else ""
    retried = f", {report.retried_trials} retried after an inconclusive attempt" \
        if report.retried_trials else ""
    print(f"{report.passed_trials}/{report.trial_count} trial(s) passed{undecided}"
          f"{unjudged_note(report)}{retried}; "
          f"pass@k {str(report.pass_at_k).lower()}, pass^k {str(report.pass_power_k).lower()}")
    print_statistics(report)
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
