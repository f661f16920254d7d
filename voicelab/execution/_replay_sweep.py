"""Replaying a sweep: every cell's run folder replayed (see :func:`._replay.areplay`) into a new
sweep folder with the same cell folders, so ``compare ORIGINAL_SWEEP REPLAY_SWEEP`` pairs its
trials by (cell, seed). One semaphore bounds the conversations in flight across the cells, as in
a sweep; every cell is checked before anything runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._exit_codes import sweep_exit_code
from .._validate import RunPlan
from ..artifacts import MATRIX_REPORT, MatrixReport, ReplayOrigin, RunFolder
from ..errors import ConfigError
from ..runner import (
    MAX_CONCURRENCY,
    MatrixOutcome,
    ReplaySource,
    RunInterrupted,
    RunOutcome,
    TrialResult,
    bounded_count,
    conclude_cells,
    matrix_cell,
    matrix_rates,
    new_run_id,
    plan_replay,
    read_matrix_report,
    runs_redactor,
    strictest_access,
)
from ..scoring import settings_of
from ._arun import arun_wired, run_sync
from ._load_profile import StartSchedule, load_profile
from ._options import RunOptions, RunWiring
from ._sweep import CellProgress


@dataclass(frozen=True)
class _Cell:
    cell_id: str
    plan: RunPlan
    source: ReplaySource


def _now() -> str:
    return datetime.now(tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _report(original: MatrixReport, *, run_id: str, run_dir: Path, cells: list[_Cell],
            outcomes: list[RunOutcome], started: str, status: str, label: str | None,
            origin: ReplayOrigin) -> MatrixReport:
    rows = sorted((matrix_cell(o, bundle_path=str(o.bundle_path)) for o in outcomes),
                  key=lambda c: c.cell_id)
    pooled, margins = matrix_rates(rows, settings_of(original.pass_rate))
    complete = len(rows) == len(cells)
    code = sweep_exit_code([c.exit_code for c in rows], planned_cells=len(cells),
                           interrupted=status == "interrupted")
    return original.model_copy(update={
        "run_id": run_id, "status": status, "run_dir": str(run_dir), "started_at": started,
        "ended_at": _now(), "cell_count": len(cells),
        "conversations": sum(len(c.source.seeds) for c in cells),
        "passed_trials": sum(c.passed_trials for c in rows),
        "executed_trials": sum(c.executed_trials for c in rows),
        "pass_at_k": complete and all(c.pass_at_k for c in rows),
        "pass_power_k": complete and all(c.pass_power_k for c in rows), "exit_code": code,
        "cells": rows, "label": label, "resumed_at": [], "pass_rate": pooled,
        "margins": margins, "replay_of": origin})


async def areplay_sweep(sweep_dir: str | Path, *, overrides: Sequence[str] = (),
                        artifacts_dir: str | Path | None = None, concurrency: int | None = None,
                        label: str | None = None,
                        on_trial_done: Callable[[TrialResult, int, int], None] | None = None,
                        ramp_seconds: float | None = None, arrival_rate: float | None = None,
                        max_concurrency: int | None = None) -> MatrixOutcome:
    """Replay every cell of the sweep folder ``sweep_dir`` into a new sweep folder beside it
    (or in ``artifacts_dir``); ``overrides`` apply to every cell. ``concurrency`` bounds the
    conversations in flight across the cells (default: the largest of the cells' run
    configs); the cells start their trials from one schedule of the load profile
    (``ramp_seconds``, or ``arrival_rate`` with ``max_concurrency``, as for a sweep)."""
    folder = Path(sweep_dir).expanduser()
    if not folder.is_dir():
        raise ConfigError("no such sweep folder", source=folder)
    folder = folder.resolve()
    original = read_matrix_report(folder)
    cells = []
    for row in original.cells:
        cell_dir = folder / row.cell_id
        if not cell_dir.is_dir():
            raise ConfigError(f"the sweep's cell {row.cell_id} has no folder", source=cell_dir)
        plan, source = plan_replay(cell_dir, overrides=overrides)
        cells.append(_Cell(row.cell_id, plan, source))
    if not cells:
        raise ConfigError("the sweep has no cells to replay", source=folder / MATRIX_REPORT)
    parallel = bounded_count(concurrency if concurrency is not None else
                        max(c.plan.loaded.run.concurrency for c in cells),
                        low=1, high=MAX_CONCURRENCY, key="concurrency", source=None)
    trials = sum(len(c.source.seeds) for c in cells)
    profile = load_profile(concurrency=parallel, ramp_seconds=ramp_seconds,
                           arrival_rate=arrival_rate, max_concurrency=max_concurrency,
                           trials=trials)
    root = Path(artifacts_dir) if artifacts_dir is not None else folder.parent
    run_id = new_run_id()
    runs = [cell.plan.loaded for cell in cells]
    with RunFolder.create(root, run_id, command="replay", report=MatrixReport,
                          access=strictest_access(runs)) as replayed:
        return await _replay_cells(replayed, cells, original=original, origin=ReplayOrigin(
            run_id=original.run_id, bundle_path=str(folder)), label=label,
            on_trial_done=on_trial_done, schedule=StartSchedule(profile, trials=trials))


async def _replay_cells(folder: RunFolder[MatrixReport], cells: list[_Cell], *,
                        original: MatrixReport, origin: ReplayOrigin, schedule: StartSchedule,
                        label: str | None,
                        on_trial_done: Callable[[TrialResult, int, int], None] | None
                        ) -> MatrixOutcome:
    """Every cell replayed into ``folder``, its matrix report written running and final."""
    run_id, run_dir = folder.path.name, folder.path
    words = runs_redactor([cell.plan.loaded for cell in cells])
    started = _now()
    semaphore = asyncio.Semaphore(schedule.profile.max_concurrency)
    outcomes: list[RunOutcome] = []
    progress = CellProgress(on_trial_done, total=sum(len(c.source.seeds) for c in cells))

    def report(status: str) -> MatrixReport:
        return _report(original, run_id=run_id, run_dir=run_dir, cells=cells,
                       outcomes=outcomes, started=started, status=status, label=label,
                       origin=origin)

    write_errors: list[str] = []
    error = folder.write_report(report("running"), words=words)
    if error:
        write_errors.append(error)

    async def replay_cell(cell: _Cell) -> None:
        try:
            outcome = await arun_wired(cell.plan, RunOptions(
                trials=len(cell.source.seeds), artifacts_dir=run_dir,
                run_id=f"{run_id}__{cell.cell_id}", on_trial_done=progress.of(cell.cell_id),
                label=label), RunWiring(
                semaphore=semaphore, schedule=schedule, link_latest=False,
                bundle_name=cell.cell_id, replay_of=cell.source.origin))
        except RunInterrupted as stopped:
            outcomes.append(stopped.outcome)
            raise
        outcomes.append(outcome)

    tasks = [asyncio.create_task(replay_cell(cell)) for cell in cells]
    return await conclude_cells(tasks, outcomes, run_dir=run_dir, write_errors=write_errors,
                                report=report, words=words,
                                written=folder.link_latest)


def replay_sweep(sweep_dir: str | Path, **kwargs: Any) -> MatrixOutcome:
    """Synchronous :func:`areplay_sweep` for scripts."""
    return run_sync(areplay_sweep, sweep_dir, **kwargs)
