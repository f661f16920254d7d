"""A run's or a sweep's outcome as one JSON document (``voice-evaluator run --json``).

The shape (docs/artifacts.md, "The --json summary") is a stable, small subset of the reports
on disk, for a CI step or a script that reads stdout instead of the bundle:
``summary_version``, ``kind`` (``run`` or ``sweep``), ``exit_code`` (the command's), the
bundle's ``location``, the counts, the pass rate and, per trial, its id, seed, status and
failed verdicts; a sweep has the same per cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..artifacts import PassRate, RunReport
from ._matrix import MatrixOutcome
from ._run import RunOutcome

#: Bumped when a field changes meaning or goes; new fields keep it.
SUMMARY_VERSION = "1.0"

#: What each trial of the summary says (TrialSummary's fields, by name).
_TRIAL_FIELDS = ("trial_id", "trial", "seed", "status", "passed", "execution_status",
                 "exit_reason", "failed_verdicts", "inconclusive_verdicts", "attempts",
                 "measurement_degraded", "first_audio_latency_ms_p50",
                 "first_audio_latency_ms_p95", "path")


def _rate(rate: PassRate | None) -> dict[str, Any] | None:
    return None if rate is None else rate.model_dump(mode="json")


def _run_fields(report: RunReport) -> dict[str, Any]:
    return {
        "run_id": report.run_id, "status": report.status, "scenario": report.scenario_id,
        "persona": report.persona, "environment": report.environment,
        "adapter": report.adapter, "label": report.label,
        "planned_trials": report.planned_trials, "executed_trials": report.executed_trials,
        "passed_trials": report.passed_trials,
        "inconclusive_trials": report.inconclusive_trials,
        "pass_at_k": report.pass_at_k, "pass_power_k": report.pass_power_k,
        "pass_rate": _rate(report.pass_rate),
        "gates": [{"status": g.status, "message": g.message} for g in report.gates],
        "only": list(report.only), "stopped_after_failures": report.stopped_after_failures,
        "message": report.message,
        "trials": [{name: getattr(summary, name) for name in _TRIAL_FIELDS}
                   for summary in report.trials],
    }


def summary_document(outcome: RunOutcome | MatrixOutcome) -> dict[str, Any]:
    """The ``--json`` summary of a finished (or interrupted) run or sweep."""
    if isinstance(outcome, MatrixOutcome):
        report = outcome.report
        return {
            "summary_version": SUMMARY_VERSION, "kind": "sweep",
            "exit_code": outcome.exit_code, "location": outcome.location,
            "run_id": report.run_id, "status": report.status, "label": report.label,
            "cell_count": report.cell_count, "conversations": report.conversations,
            "executed_trials": report.executed_trials, "passed_trials": report.passed_trials,
            "pass_at_k": report.pass_at_k, "pass_power_k": report.pass_power_k,
            "pass_rate": _rate(report.pass_rate), "only": list(report.only),
            "write_errors": list(outcome.write_errors),
            "cells": [{"cell_id": Path(cell.bundle_path).name, "exit_code": cell.exit_code,
                       "location": cell.location, **_run_fields(cell.report)}
                      for cell in sorted(outcome.cells, key=lambda c: Path(c.bundle_path).name)],
        }
    return {"summary_version": SUMMARY_VERSION, "kind": "run", "exit_code": outcome.exit_code,
            "location": outcome.location, "write_errors": list(outcome.write_errors),
            **_run_fields(outcome.report)}
