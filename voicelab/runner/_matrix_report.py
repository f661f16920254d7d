"""A sweep's results: each cell's line of ``matrix-report.json``, the pass rates pooled over
cells and per dimension, the stages' gates, the endpointing curves, and the report written when
the cells are done (or read back to resume).

The plan of a sweep (which cells, which stages) is :mod:`._matrix`; running it is
:func:`voicelab.execution.arun_matrix`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._exit_codes import staged_sweep_exit_code, sweep_exit_code
from .._location import as_local_path, is_url
from ..artifacts import (
    MATRIX_REPORT,
    BudgetState,
    EndpointingCurve,
    EndpointingPoint,
    MarginPassRate,
    MatrixCell,
    MatrixReport,
    PassRate,
    Redacts,
    StageOutcome,
    check_tree,
    filter_model,
    open_location,
    published_location,
    read_json,
    read_remote_json,
    resolve_latest,
    resolve_local_latest,
    write_report_file,
)
from ..config import (
    LowerBoundGate,
    MinPassRateGate,
    StatisticsConfig,
    parse_settings,
)
from ..cost import merged_summary
from ..errors import ConfigError
from ..scoring import curve_of, pass_rate
from ._matrix import MatrixCellPlan, MatrixInterrupted, MatrixOutcome, MatrixPlan, StagePlan
from ._run import (
    RunOutcome,
    utc_now,
)


def matrix_rates(cells: list[MatrixCell], statistics: StatisticsConfig
                 ) -> tuple[PassRate, list[MarginPassRate]]:
    """The pooled pass rate of the cells' counted trials, and the same per scenario, persona
    and environment (the margins of the matrix)."""
    def pooled(group: list[MatrixCell]) -> PassRate:
        rates = [c.pass_rate for c in group if c.pass_rate is not None]
        return pass_rate(sum(r.passed for r in rates), sum(r.n for r in rates), statistics)

    margins = []
    for dimension in ("scenario", "persona", "environment"):
        values = sorted({getattr(c, dimension) for c in cells})
        for value in values:
            group = [c for c in cells if getattr(c, dimension) == value]
            margins.append(MarginPassRate(dimension=dimension, value=value,
                                          cells=len(group), pass_rate=pooled(group)))
    return pooled(cells), margins


def matrix_cell(outcome: RunOutcome, *, bundle_path: str,
                pause_seconds: float | None = None, stage: str | None = None) -> MatrixCell:
    """A sweep's line for one of its runs (a cell), from the run's report."""
    report = outcome.report
    return MatrixCell(pause_seconds=pause_seconds, stage=stage, cost=report.cost,
        cell_id=Path(outcome.bundle_path).name, scenario=report.scenario_id,
        persona=report.persona, environment=report.environment, bundle_path=bundle_path,
        trial_count=report.trial_count, executed_trials=report.executed_trials,
        passed_trials=report.passed_trials, pass_at_k=report.pass_at_k,
        pass_power_k=report.pass_power_k, exit_code=report.exit_code,
        suite_hash=report.suite_hash, pass_rate=report.pass_rate, pass_curve=report.pass_curve)


def matrix_report(plan: MatrixPlan, *, run_id: str, run_dir: Path, outcomes: list[RunOutcome],
                   started: str, status: str, label: str | None = None,
                   resumed_at: Sequence[str] = (), stages: Sequence[StageOutcome] = (),
                   budget: BudgetState | None = None) -> MatrixReport:
    """The sweep's report of the cells that ran (``outcomes``); a staged sweep's ``stages``
    (those that ran and those that did not), the sweep's ``budget``."""
    planned = {cell.cell_id: cell for cell in plan.cells}
    cells = sorted((matrix_cell(o, bundle_path=published_location(o.bundle_path),
                                pause_seconds=_planned(planned, o, "pause_seconds"),
                                stage=_planned(planned, o, "stage"))
                    for o in outcomes), key=lambda c: c.cell_id)
    pooled, margins = matrix_rates(cells, plan.statistics)
    complete = len(cells) == len(plan.cells)
    stopped = budget is not None and budget.trials_not_started > 0
    if plan.stages:
        code = staged_exit_code([c.exit_code for c in cells], stages,
                                interrupted=status == "interrupted")
    else:
        code = sweep_exit_code([c.exit_code for c in cells], planned_cells=len(plan.cells),
                               interrupted=status == "interrupted")
    s, p, e, k = plan.dimensions
    return MatrixReport(
        name=plan.suite.suite.name or plan.suite.path.stem, run_id=run_id,
        status=status,
        suite_path=str(plan.suite.path), run_dir=published_location(run_dir),
        started_at=started,
        ended_at=utc_now(), scenarios=sorted({c.scenario for c in plan.cells}),
        personas=sorted({c.persona for c in plan.cells}),
        environments=sorted({c.environment for c in plan.cells}), trials_per_cell=k,
        overrides=plan.recorded_overrides(),
        cell_count=len(plan.cells), conversations=plan.conversations, only=list(plan.only),
        passed_trials=sum(c.passed_trials for c in cells),
        executed_trials=sum(c.executed_trials for c in cells),
        pass_at_k=complete and all(c.pass_at_k for c in cells),
        pass_power_k=complete and all(c.pass_power_k for c in cells), exit_code=code,
        cells=cells, label=label, resumed_at=list(resumed_at), pass_rate=pooled,
        margins=margins,
        endpointing=matrix_endpointing(outcomes) if plan.suite.suite.endpointing else None,
        cost=merged_summary(c.cost for c in cells), stopped="budget" if stopped else None,
        budget=budget, stages=list(stages) if plan.stages else None)


def _planned(planned: dict[str, MatrixCellPlan], outcome: RunOutcome, name: str) -> Any:
    cell = planned.get(Path(outcome.bundle_path).name)
    return getattr(cell, name) if cell is not None else None


def staged_exit_code(cell_codes: list[int], stages: Sequence[StageOutcome], *,
                     interrupted: bool) -> int:
    """A staged sweep's code (:func:`voicelab._exit_codes.staged_sweep_exit_code`)."""
    return staged_sweep_exit_code(
        cell_codes, interrupted=interrupted,
        gate_failed=any(stage.status == "failed" for stage in stages),
        budget_stopped=any(stage.reason.startswith(BUDGET_REASON) for stage in stages))


#: How a stage's ``reason`` begins when the budget stopped it (or kept it from running).
BUDGET_REASON = "budget"


def stage_outcome(stage: StagePlan, cells: Sequence[MatrixCell], statistics: StatisticsConfig,
                  *, budget_stopped: bool = False) -> StageOutcome:
    """A stage that ran, judged by its gate on its cells (``cells``: those of the stage that
    ran): ``failed`` also when some of its planned trials did not run."""
    gate = stage.config.gate
    trials = sum(c.executed_trials for c in cells)
    passed = sum(c.passed_trials for c in cells)
    planned_trials = stage.conversations
    complete = len(cells) == len(stage.cells) and \
        all(c.executed_trials >= c.trial_count for c in cells)
    pooled, _ = matrix_rates(list(cells), statistics)
    if not complete:
        ok = False
        reason = (f"{BUDGET_REASON}: {planned_trials - trials} of its {planned_trials} trial(s) "
                  f"were not started") if budget_stopped else \
            f"{planned_trials - trials} of its {planned_trials} trial(s) did not run"
    elif isinstance(gate, MinPassRateGate):
        rate = pooled.estimate
        ok = rate is not None and rate >= gate.min_pass_rate
        reason = f"pass rate {_rate(rate)} {'>=' if ok else '<'} {gate.min_pass_rate:g}"
    elif isinstance(gate, LowerBoundGate):
        low = pooled.low
        ok = low is not None and low >= gate.min_lower_bound
        reason = (f"pass-rate interval [{_rate(low)}, {_rate(pooled.high)}] "
                  f"({pooled.confidence:.0%} {pooled.method}): lower bound "
                  f"{'>=' if ok else '<'} {gate.min_lower_bound:g}")
    else:
        ok = all(c.pass_power_k for c in cells)
        failing = [c.cell_id for c in cells if not c.pass_power_k]
        reason = "every trial passed" if ok else \
            f"{len(failing)} cell(s) with a trial that did not pass: {', '.join(failing[:3])}" \
            + (" ..." if len(failing) > 3 else "")
    return StageOutcome(name=stage.name, status="passed" if ok else "failed",
                        gate=stage.config.gate_text(), reason=reason, cells=len(cells),
                        trials=trials, passed_trials=passed,
                        cost=merged_summary(c.cost for c in cells))


def stage_not_run(stage: StagePlan, *, because: str) -> StageOutcome:
    """A stage after the one that stopped the sweep."""
    return StageOutcome(name=stage.name, status="not_run", gate=stage.config.gate_text(),
                        reason=because)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def matrix_endpointing(outcomes: Sequence[RunOutcome]) -> list[EndpointingCurve]:
    """One endpointing curve per scenario x persona x environment of a swept suite: the
    points its cells measured (each cell one pause length)."""
    groups: dict[tuple[str, str, str], list[EndpointingPoint]] = {}
    for outcome in outcomes:
        report = outcome.report
        key = (report.scenario_id, report.persona, report.environment)
        points = groups.setdefault(key, [])
        if report.endpointing is not None:
            points.extend(report.endpointing.points)
    return [curve_of(points, scenario=scenario, persona=persona, environment=environment)
            for (scenario, persona, environment), points in sorted(groups.items())]


def read_matrix_report(run_dir: str | Path) -> MatrixReport:
    """The matrix report of a sweep folder (or store URL)."""
    if is_url(run_dir):
        folder = open_location(run_dir, key="resume")
        assert not isinstance(folder, Path)
        document = read_remote_json(resolve_latest(folder).child(MATRIX_REPORT))
        remote: MatrixReport = parse_settings(MatrixReport, document, key=None,
                                              source=folder.url)
        return remote
    path = resolve_local_latest(as_local_path(run_dir)).expanduser().resolve() \
        / MATRIX_REPORT
    check_tree(path.parent)  # regular files and folders only, before anything is read
    if not path.is_file():
        raise ConfigError("not a sweep (no matrix-report.json)", source=path.parent)
    report: MatrixReport = parse_settings(MatrixReport, read_json(path), key=None, source=path)
    return report


async def conclude_cells(tasks: list[asyncio.Task[None]], outcomes: list[RunOutcome], *,
                         run_dir: Path, write_errors: list[str],
                         report: Callable[[str], MatrixReport], words: Redacts | None = None,
                         written: Callable[[], None] | None = None) -> MatrixOutcome:
    """Await a sweep's cells, write its final ``matrix-report.json`` (``report(status)``,
    through ``words``, the sweep's filter of words), call ``written`` once it is on disk (the
    sweep's ``latest`` moves last) and return its outcome; raises the first cell's failure,
    or :class:`MatrixInterrupted` when the sweep was interrupted (after every cell has written
    its evidence)."""
    interrupted = False
    failure: BaseException | None = None
    try:
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(result, asyncio.CancelledError):
                interrupted = True
            elif isinstance(result, BaseException) and failure is None:
                failure = result
    except asyncio.CancelledError:
        interrupted = True  # gather already cancelled the cells once: let them write
        await asyncio.gather(*tasks, return_exceptions=True)
    for cell_outcome in outcomes:
        write_errors.extend(cell_outcome.write_errors)
    final = report("interrupted" if interrupted else "complete")
    if words is not None:
        final = filter_model(final, words)
    final_error = write_report_file(run_dir / MATRIX_REPORT, final)
    if final_error:
        write_errors.append(final_error)
    elif written is not None:
        written()
    if failure is not None:
        raise failure
    outcome = MatrixOutcome(final, run_dir, sorted(outcomes, key=lambda o: str(o.bundle_path)),
                            write_errors)
    if interrupted:
        raise MatrixInterrupted(outcome)
    return outcome
