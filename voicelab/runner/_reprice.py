"""``rescore --pricing``: a bundle's recorded usage priced again under another price table.

Only costs change: each trial report's ``cost`` from the usage its events recorded, then the
run reports' and matrix reports' sums. Kept apart from re-scoring (:mod:`._rescore`), which
recomputes everything derived from the recording and leaves costs as the pricing recorded.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from ..artifacts import (
    MATRIX_REPORT,
    RUN_REPORT,
    TRIAL_REPORT,
    VOICE_EVENTS,
    RunReport,
    TrialReport,
    find_trial_dirs,
    read_json,
    resolved_document,
    write_json,
)
from ..config import PricingConfig, parse_settings
from ..cost import cost_summary, merged_summary, trial_cost
from ..errors import ConfigError
from ..recording import recording_from_records
from ._measured_costs import usage_of_cost
from ._rescored import Rescored, RescoredTrial, kept_as_recorded, say_kept, stopped

logger = logging.getLogger(__name__)


def _parsed(model: type[Any], document: Any, *, source: Path) -> Any:
    return parse_settings(model, document, key=None, source=source)


def recorded_pricing(settings: Any, *, source: Path) -> PricingConfig | None:
    """The price table a trial ran with (its resolved settings' ``pricing``)."""
    table = settings.get("pricing") if isinstance(settings, dict) else None
    if table is None:
        return None
    return _parsed(PricingConfig, table, source=source / resolved_document("settings"))


def bytes_on_disk(trial_dir: Path, names: list[str]) -> int:
    """The storage of a trial's files (its report aside), as they are on disk."""
    total = 0
    for name in names:
        if name == TRIAL_REPORT:
            continue
        path = trial_dir / name
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def reprice_trial(trial_dir: Path, pricing: PricingConfig) -> RescoredTrial:
    """Price one trial folder's recorded usage under ``pricing``: its report's ``cost`` is
    rewritten and nothing else (every other field as it was, every other file untouched).

    The usage spent during the call is read again from its events (``voice-events.jsonl``:
    ``usage.recorded``, the call's minutes), the judges' from their results; what scoring and
    the bundle used (recognition, storage) is what the trial's cost recorded and the bytes its
    files hold."""
    from ..artifacts import read_voice_events

    trial_dir = Path(trial_dir)
    previous = _parsed(TrialReport, read_json(trial_dir / TRIAL_REPORT),
                      source=trial_dir / TRIAL_REPORT)
    records = read_voice_events(trial_dir / VOICE_EVENTS)
    recording = recording_from_records(records, streams={}, where=str(trial_dir / VOICE_EVENTS))
    recognition = [] if previous.cost is None else [
        usage for usage in usage_of_cost(previous.cost) if usage.component == "recognition"]
    names = sorted(p.name for p in trial_dir.iterdir() if not p.name.startswith("."))
    cost = trial_cost(recording, pricing, adapter=previous.adapter, judges=previous.judges,
                      recognition=recognition,
                      storage_bytes=bytes_on_disk(trial_dir, names))
    report = previous.model_copy(update={"cost": cost})
    write_json(trial_dir / TRIAL_REPORT, report)
    return RescoredTrial(trial_dir, report, previous)


def _reprice_run_report(run_dir: Path) -> RunReport | None:
    """A run report's ``cost`` summed again from its trial reports (nothing else changes)."""
    path = run_dir / RUN_REPORT
    if not path.is_file():
        return None
    report = _parsed(RunReport, read_json(path), source=path)
    costs = []
    for summary in sorted(report.trials, key=lambda s: s.trial):
        trial_path = run_dir / summary.path / TRIAL_REPORT
        if trial_path.is_file():
            costs.append(_parsed(TrialReport, read_json(trial_path), source=trial_path).cost)
    updated = report.model_copy(update={"cost": cost_summary(costs)})
    write_json(path, updated)
    return updated


def matrix_costs(path: Path, report: Any) -> dict[str, Any]:
    """A matrix report's cost fields from its cells' run reports: each cell's, each stage's
    and the sweep's."""
    cells = []
    for cell in report.cells:
        run_report = path.parent / cell.cell_id / RUN_REPORT
        if run_report.is_file():
            run = _parsed(RunReport, read_json(run_report), source=run_report)
            cell = cell.model_copy(update={"cost": run.cost})
        cells.append(cell)
    stages = report.stages
    if stages:
        stages = [stage.model_copy(update={"cost": merged_summary(
            c.cost for c in cells if c.stage == stage.name)})
            if stage.status != "not_run" else stage for stage in stages]
    return {"cells": cells, "cost": merged_summary(c.cost for c in cells), "stages": stages}


def _reprice_matrix_report(path: Path) -> None:
    from ..artifacts import MatrixReport

    report = _parsed(MatrixReport, read_json(path), source=path)
    write_json(path, report.model_copy(update=matrix_costs(path, report)))


def reprice_folder(target: Path, pricing: PricingConfig, *,
                    stop: threading.Event | None = None) -> Rescored:
    trial_dirs = find_trial_dirs(target)
    if not trial_dirs:
        raise ConfigError("no trial folders (trial-NNN/trial-report.json) found", source=target)
    result = Rescored(target)
    logger.info("rescore --pricing: %d trial folder(s) in %s", len(trial_dirs), target)
    for trial_dir in trial_dirs:
        if stopped(stop):
            result.kept.append(kept_as_recorded(trial_dir))
        else:
            result.trials.append(reprice_trial(trial_dir, pricing))
    say_kept(result)
    for run_dir in sorted({t.trial_dir.parent for t in result.trials}):
        updated = _reprice_run_report(run_dir)
        if updated is not None:
            result.run_reports.append(run_dir / RUN_REPORT)
            result.run_exit_codes.append(updated.exit_code)
    for matrix in target.rglob(MATRIX_REPORT):
        _reprice_matrix_report(matrix)
    return result
