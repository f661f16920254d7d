"""Flaky or broken: each scenario x persona x environment cell across earlier runs and this one.

A history is a folder (or store URL) of earlier run and sweep bundles. Only their run reports
are read, each with the bundle readers' limits (:func:`~voicelab.artifacts.check_tree` first: regular
files and folders only, bounded in count and depth; each report read with
:func:`~voicelab.artifacts.read_member` and :func:`~voicelab.artifacts.decode_json`, bounded in
size and nesting), and a
report that is not what it should be is left out and named, never trusted: history is advice,
and one hostile bundle must not take the gate down with it.

A cell is ``stable_pass`` when every trial of every run passed, ``stable_fail`` when none did,
``flaky`` otherwise, with its pass rate over all those trials and a confidence interval (the run
reports' own interval, :func:`voicelab.scoring.proportion_interval`); whether its latest run
flipped against the one before says what changed since the last run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._location import is_url
from ..artifacts import (
    RUN_REPORT,
    BundleMemberError,
    CellRun,
    CellStability,
    Flakiness,
    PassRate,
    RunReport,
    check_tree,
    decode_json,
    local_folder,
    read_member,
)
from ..errors import ConfigError
from ..scoring import proportion_interval

logger = logging.getLogger(__name__)

#: A cell's key: (scenario, persona, environment).
CellKey = tuple[str, str, str]


@dataclass(frozen=True)
class RunRecord:
    """One earlier (or this) run of one cell, as its run report says."""

    run_id: str
    started_at: str
    cell: CellKey
    trials: int
    passed: int

    @property
    def outcome(self) -> str | None:
        if not self.trials:
            return None
        return "passed" if self.passed == self.trials else "failed"


def _text(report: Mapping[str, object], key: str) -> str:
    value = report.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected text")
    return value


def _count(report: Mapping[str, object], key: str) -> int:
    value = report.get(key)
    if type(value) is not int or value < 0:
        raise ValueError(f"{key}: expected a whole number")
    return value


def record_of(report: object) -> RunRecord:
    """The cell's run from a run report document (ValueError naming a field it lacks)."""
    if not isinstance(report, dict):
        raise ValueError("expected a JSON object")
    executed, passed = _count(report, "executed_trials"), _count(report, "passed_trials")
    # a trial nothing judged is no pass and no failure (a report before it was counted: 0)
    unjudged = _count(report, "unjudged_trials") if "unjudged_trials" in report else 0
    if passed + unjudged > executed:
        raise ValueError("passed_trials: more than executed_trials")
    return RunRecord(run_id=_text(report, "run_id"), started_at=_text(report, "started_at"),
                     cell=(_text(report, "scenario_id"), _text(report, "persona"),
                           _text(report, "environment")),
                     trials=executed - unjudged, passed=passed)


def record_of_report(report: RunReport) -> RunRecord:
    """This run's (or a sweep cell's) record, from its final report."""
    return RunRecord(run_id=report.run_id, started_at=report.started_at,
                     cell=(report.scenario_id, report.persona, report.environment),
                     trials=report.executed_trials - report.unjudged_trials,
                     passed=report.passed_trials)


def read_history(location: str | os.PathLike[str]) -> tuple[list[RunRecord], list[str]]:
    """The runs of every run-report.json under ``location`` (a folder of run and sweep bundles,
    or a store URL), and the reports left out (path: why). A missing folder is a
    configuration error (``--history``)."""
    if is_url(location):
        with local_folder(location, names=(RUN_REPORT,), key="--history") as local:
            return read_history(local)
    root = Path(location).expanduser()
    if not root.is_dir():
        raise ConfigError(f"not a folder of earlier runs: {root}", source="CLI", key="--history")
    try:
        check_tree(root)
    except BundleMemberError as error:
        raise ConfigError(f"refused as history: {error}", source="CLI", key="--history") from None
    records: list[RunRecord] = []
    unreadable: list[str] = []
    for folder, folders, files in os.walk(root):  # links (``latest``) are never followed
        folders.sort()
        if RUN_REPORT not in files:
            continue
        path = Path(folder) / RUN_REPORT
        try:
            records.append(record_of(decode_json(read_member(path), source=path)))
        except (BundleMemberError, ValueError, FileNotFoundError) as error:
            unreadable.append(f"{path.relative_to(root)}: {error}")
    for problem in unreadable:
        logger.warning("history: left out %s", problem)
    return records, unreadable


def _stability(runs: Sequence[RunRecord]) -> str:
    trials = sum(r.trials for r in runs)
    passed = sum(r.passed for r in runs)
    if not trials:
        return "no_trials"
    return "stable_pass" if passed == trials else "stable_fail" if passed == 0 else "flaky"


def classify(history: Iterable[RunRecord], current: Iterable[RunRecord], *,
             confidence: float = 0.95, method: str = "wilson") -> list[CellStability]:
    """Each cell of ``current`` (this run, or every cell of a sweep) over its earlier runs in
    ``history`` (a run found in both counts once)."""
    current = list(current)
    now = {r.run_id for r in current}
    by_cell: dict[CellKey, list[RunRecord]] = {}
    for record in [*(r for r in history if r.run_id not in now), *current]:
        by_cell.setdefault(record.cell, []).append(record)
    cells = []
    for key in sorted({r.cell for r in current}):
        runs = sorted(by_cell[key], key=lambda r: (r.started_at, r.run_id))
        trials, passed = sum(r.trials for r in runs), sum(r.passed for r in runs)
        interval = proportion_interval(passed, trials, confidence=confidence,
                                       method=method)  # type: ignore[arg-type]
        outcomes = [r.outcome for r in runs if r.outcome is not None]
        flipped = None
        if len(outcomes) >= 2 and outcomes[-1] != outcomes[-2]:
            flipped = "pass_to_fail" if outcomes[-1] == "failed" else "fail_to_pass"
        cells.append(CellStability(
            scenario=key[0], persona=key[1], environment=key[2], stability=_stability(runs),
            pass_rate=PassRate(**interval.to_dict()),
            runs=[CellRun(run_id=r.run_id, started_at=r.started_at, trials=r.trials,
                          passed=r.passed, outcome=r.outcome) for r in runs],
            flipped=flipped))
    return cells


def flakiness(history_location: str | os.PathLike[str], current: Sequence[RunReport], *,
              run_id: str, confidence: float = 0.95, method: str = "wilson") -> Flakiness:
    """``flakiness.json`` of a run (one report) or a sweep (its cells' reports)."""
    records, unreadable = read_history(history_location)
    cells = classify(records, [record_of_report(r) for r in current], confidence=confidence,
                     method=method)
    return Flakiness(run_id=run_id, history=str(history_location),
                     runs_read=len({r.run_id for r in records}), unreadable=unreadable,
                     cells=cells)


def stability_line(cell: CellStability) -> str:
    """``planning / Jordan / quiet: FLAKY 66.7% [30.0%, 90.3%] (4/6 over 3 runs); flipped
    pass -> fail since the last run``."""
    rate = cell.pass_rate
    word = {"stable_pass": "stable pass", "stable_fail": "STABLE FAIL", "flaky": "FLAKY",
            "no_trials": "no trials"}[cell.stability]
    line = f"{cell.scenario} / {cell.persona} / {cell.environment}: {word}"
    if rate.estimate is not None and rate.low is not None and rate.high is not None:
        line += (f" {rate.estimate:.1%} [{rate.low:.1%}, {rate.high:.1%}] "
                 f"({rate.passed}/{rate.n} over {len(cell.runs)} run(s))")
    if cell.flipped:
        line += f"; flipped {cell.flipped.replace('_to_', ' -> ')} since the last run"
    return line
