"""A run's outcome and its report: what a run of seeded trials produced, wherever they ran.

The run itself (its bundle, admission, executors) is :mod:`voicelab.execution`'s; this module is
what it reports: ``run-report.json``, the exit code, the bounds on what a run may plan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .._exit_codes import exit_code_after_writing, run_exit_code
from ..artifacts import (
    BudgetState,
    JudgeCalibration,
    ReplayOrigin,
    RunReport,
    TrialSummary,
    published_location,
)
from ..config import LoadedRun
from ..cost import cost_summary
from ..errors import ConfigError
from ..scoring import (
    UNJUDGED,
    counts_toward_rates,
    endpointing_curve,
    gate_passed,
    hesitations,
    pass_at_k,
    pass_power_k,
    run_statistics,
)
from ._retention import run_retention
from ._trial import TrialResult


@dataclass
class RunOutcome:
    """What a run produced: the report (also on disk) and where the bundle is.

    ``write_errors`` lists bundle files that could not be written (a full disk): the run's exit
    code is then at least 4 even when every trial passed. ``location`` is where the bundle
    lives for its readers: its folder, or its store URL (``bundle_path`` is then the local
    staging folder it was written to, removed once published)."""

    report: RunReport
    bundle_path: Path
    trials: list[TrialResult] = field(default_factory=list)
    write_errors: list[str] = field(default_factory=list)
    location: str = ""

    def __post_init__(self) -> None:
        self.location = self.location or str(self.bundle_path)

    @property
    def exit_code(self) -> int:
        return exit_code_after_writing(self.report.exit_code,
                                       write_failed=bool(self.write_errors))


class RunInterrupted(asyncio.CancelledError):
    """The run was cancelled (Ctrl-C, SIGTERM, a cancelled notebook cell) after writing what it
    had gathered; ``outcome`` is the partial run (report status ``interrupted``)."""

    def __init__(self, outcome: RunOutcome):
        super().__init__(f"run interrupted; partial bundle at {outcome.bundle_path}")
        self.outcome = outcome




def trial_seed(base_seed: int, index: int) -> int:
    """Trial ``index`` (from 1) uses ``trial_seed + index - 1``: trial 1 reproduces the config's seed."""
    return base_seed + index - 1


def exit_code_for(results: Sequence[TrialResult], *, interrupted: bool, planned: int,
                  gates_blocked: bool = False) -> int:
    """130 interrupted, 4 a trial failed to execute (or did not run), 3 a trial did not pass
    (pass^k) or a run-config gate blocks, else 0 (:func:`voicelab._exit_codes.run_exit_code`)."""
    return run_exit_code(passed=[gate_passed(r.report) for r in results],
                         executed=[r.report.execution_status == "succeeded" for r in results],
                         planned=planned, interrupted=interrupted, gates_blocked=gates_blocked)


def utc_now() -> str:
    return datetime.now(tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def bounded_count(value: int, *, low: int, high: int, key: str, source: str | Path | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"must be a whole number from {low} to {high:,}, got {value!r}",
                          source=source, key=key)
    return value


def not_run_message(*, planned: int, executed: int, status: str, in_progress: bool,
                    unfinished: Sequence[str] = ()) -> str:
    """What a run report says of planned trials that did not run (empty when every one ran, or
    while the run is ``in_progress``); ``unfinished``: trial folders left without their report
    (a trial cut short, or a report removed since), which count as not executed."""
    parts = []
    never = planned - executed - len(unfinished)
    if never > 0 and not in_progress:
        parts.append(f"{never} planned trial(s) did not run"
                     + (" because the run was interrupted" if status == "interrupted" else ""))
    if unfinished:
        parts.append(f"{len(unfinished)} trial(s) did not finish (no trial-report.json: "
                     f"counted as not executed): {', '.join(unfinished)}")
    return "; ".join(parts)


def run_report(loaded: LoadedRun, *, run_id: str, bundle: Path, results: Sequence[TrialResult],
               planned: int, started: str, status: str, label: str | None = None,
               calibrations: Sequence[JudgeCalibration] = (),
               resumed_at: Sequence[str] = (), replay_of: ReplayOrigin | None = None,
               lag_budget_ms: float | None = None,
               lowest_concurrency: int | None = None, only: Sequence[str] = (),
               stopped_early: str | None = None,
               stopped_after_failures: int | None = None,
               budget: BudgetState | None = None) -> RunReport:
    """The run report of ``results`` (``status``: running, complete or interrupted);
    ``lag_budget_ms`` and the ``lowest_concurrency`` it let the run fall to, if it had one.
    ``only``: the ``--only`` expressions that chose its trials; ``stopped_early``: why its
    other planned trials did not start (``--fail-fast``, whose limit is
    ``stopped_after_failures``): they are left out of the exit code, the trials that did not
    pass decide it. ``budget``: the run's budget and what it spent (``stopped: budget`` when it
    kept trials from starting)."""
    ordered = sorted(results, key=lambda r: r.report.trial)
    passed_flags = [r.report.passed for r in ordered]
    # pass@k and pass^k are over the trials something judged (an unjudged one is no pass)
    judged_flags = [r.report.passed for r in ordered if r.report.status != UNJUDGED]
    interrupted = status == "interrupted"
    statistics = run_statistics([r.report for r in ordered], [r.turn_metrics for r in ordered],
                                statistics=loaded.run.statistics, gates=loaded.run.gates,
                                calibrations=calibrations, curve=status != "running",
                                probes=[r.probes for r in ordered])
    code = exit_code_for(ordered, interrupted=interrupted,
                         planned=len(ordered) if stopped_early else planned,
                         gates_blocked=bool(statistics.blocking_gates))
    summaries: list[TrialSummary] = [r.summary for r in ordered]
    missing = planned - len(ordered)
    stopped = "budget" if budget is not None and budget.trials_not_started else None
    if stopped and budget is not None and missing and status != "running":
        message = (f"{missing} planned trial(s) did not run because the budget of "
                   f"{budget.max_cost:g} {budget.currency or ''} would have been passed"
                   ).replace("  ", " ")
    elif stopped_early and status != "running":
        message = stopped_early
    else:
        message = not_run_message(planned=planned, executed=len(ordered), status=status,
                                  in_progress=status == "running")
    return RunReport(
        run_id=run_id, status=status,
        scenario_id=loaded.scenario.id, persona=loaded.persona.name,
        environment=loaded.environment.name or "quiet", adapter=loaded.run.endpoint.adapter,
        suite_hash=loaded.suite_hash(), bundle_path=published_location(bundle),
        started_at=started,
        ended_at=utc_now(), trial_count=planned, planned_trials=planned,
        executed_trials=len(ordered), passed_trials=sum(passed_flags),
        pass_at_k=pass_at_k(judged_flags), pass_power_k=pass_power_k(judged_flags)
        and len(ordered) == planned,
        exit_code=code, trials=summaries, message=message, label=label,
        run_file=str(loaded.run_path), resumed_at=list(resumed_at), replay_of=replay_of,
        overrides=loaded.recorded_overrides(),
        degraded_trials=sum(s.measurement_degraded for s in summaries),
        inconclusive_trials=sum(s.status == "inconclusive" for s in summaries),
        unjudged_trials=sum(s.status == UNJUDGED for s in summaries),
        retried_trials=sum(s.attempts > 1 for s in summaries),
        lag_budget_ms=lag_budget_ms, lowest_concurrency=lowest_concurrency,
        endpointing=endpointing_curve(
            (h for r in ordered if counts_toward_rates(r.report.exit_reason)
             for h in hesitations(r.turn_metrics)), loaded.run.statistics),
        retention=run_retention(loaded.run.retention, (r.report for r in ordered)),
        only=list(only), stopped_after_failures=stopped_after_failures if stopped_early
        else None, cost=cost_summary(r.report.cost for r in ordered), stopped=stopped,
        budget=budget, **statistics.report_fields())
