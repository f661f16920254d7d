"""A bundle's documents read into records: what the frames of :mod:`._frames` are built from.

Every trial folder's report, voice-metrics.json and (when asked) voice-events.jsonl are read
through the bundle readers of :mod:`voicelab.artifacts`, which check them, and decoded once;
each run and trial becomes one flat row (nested summaries as ``parent_child`` columns, the cost
as ``cost_*`` columns), and each trial's turns, verdicts, judges and events are kept in reading
order with how many it has, so the child frames are keyed with numpy rather than row by row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from ..artifacts import (
    TRIAL_REPORT,
    VOICE_EVENTS,
    VOICE_METRICS,
    VoiceMetrics,
    read_json,
    read_trial_report_json,
)
from ._discovery import _Run
from ._events import EventColumns, read_events
from ._json import JsonObject, Row, object_or_empty, objects_in

_SKIPPED_FIELDS = ("schema_version", "voice_event_schema_versions",
                   "interoperability_schema_version")


def _flatten(record: JsonObject) -> Row:
    """Nested dicts become ``parent_child`` columns (a ``None`` in place of a dict stays; the
    turns frame drops such all-NA columns when their ``parent_*`` columns exist)."""
    flat: Row = {}
    for key, value in record.items():
        if isinstance(value, dict):
            for child, inner in _flatten(value).items():
                flat[f"{key}_{child}"] = inner
        else:
            flat[key] = value
    return flat


def _trial_row(report: JsonObject, trial_dir: Path) -> Row:
    row: Row = {k: v for k, v in report.items()
                if not isinstance(v, (dict, list)) and k not in _SKIPPED_FIELDS}
    verdicts = objects_in(report.get("verdicts"))
    failures = objects_in(report.get("failures"))
    judges = objects_in(report.get("judges"))
    row["failed_verdicts"] = ", ".join(str(v.get("name", "")) for v in verdicts
                                       if not v.get("passed"))
    row["failed_critical_verdicts"] = sum(1 for v in verdicts
                                          if not v.get("passed") and v.get("critical", True))
    row["failure_count"] = len(failures)
    row["failure_kinds"] = ", ".join(str(f.get("kind", "")) for f in failures)
    row["failure_message"] = failures[0].get("message") if failures else None
    row["judge_count"] = len(judges)
    row["failed_judges"] = ", ".join(str(j.get("name", "")) for j in judges
                                     if j.get("status") != "passed")
    for metric, stats in object_or_empty(report.get("metrics_summary")).items():
        if isinstance(stats, dict):
            for stat, value in stats.items():
                row[f"{metric}_{stat}"] = value
    for key, value in object_or_empty(report.get("outcome")).items():
        if not isinstance(value, (dict, list)):
            row.setdefault(f"outcome_{key}", value)
    retention = report.get("retention")
    if isinstance(retention, dict):  # what the run's ``retention:`` kept (known values only)
        row["audio_retained"] = retention.get("audio") != "dropped"
        row["transcripts_redacted"] = retention.get("transcripts") == "redacted"
    row.update(_cost_columns(report.get("cost")))
    row["path"] = str(trial_dir)
    return row


def _cost_columns(cost: JsonValue) -> Row:
    """A trial's cost as columns (docs/cost.md): ``cost_total`` (its known amounts; NaN when
    none is known), ``cost_currency``, ``cost_<component>`` (NaN: that component's usage
    has no known amount), ``cost_unpriced`` (usage left out of the total: no price or an
    unknown quantity) and ``cost_estimated`` (some quantity is an estimate). Absent: a
    bundle written before costs were kept."""
    if not isinstance(cost, dict):
        return {}
    items = objects_in(cost.get("items"))
    unpriced = cost.get("unpriced")
    columns: Row = {"cost_total": cost.get("total"), "cost_currency": cost.get("currency"),
                    "cost_unpriced": len(unpriced) if isinstance(unpriced, list) else 0,
                    "cost_estimated": any(bool(i.get("estimated")) for i in items)}
    for item in items:
        name = f"cost_{item.get('component')}"
        amount = item.get("amount")
        if isinstance(amount, int | float):
            so_far = columns.get(name)
            columns[name] = (so_far if isinstance(so_far, float) else 0.0) + amount
        else:
            columns.setdefault(name, None)
    return columns


def _talk_and_entities(metrics: JsonObject) -> Row:
    """A trial's talk metrics and entity accuracies (voice-metrics.json ``talk`` and
    ``entities``), as trial columns (absent: a bundle scored before they were)."""
    columns: Row = {}
    talk = metrics.get("talk")
    if isinstance(talk, dict):
        columns.update({k: v for k, v in talk.items() if not isinstance(v, (dict, list))})
    entities = metrics.get("entities")
    if isinstance(entities, dict):
        columns["entity_input_accuracy"] = entities.get("input_accuracy")
        columns["entity_output_accuracy"] = entities.get("output_accuracy")
    return columns


@dataclass
class _Read:
    """What the bundles hold, as records in reading order: one row per run and per trial, and
    each trial's turns, verdicts, judges and events with how many it has."""

    run_rows: list[Row] = field(default_factory=list)
    trial_rows: list[Row] = field(default_factory=list)
    #: the position in ``run_rows`` of each trial's run
    trial_run: list[int] = field(default_factory=list)
    turn_records: list[Row] = field(default_factory=list)
    verdict_records: list[Row] = field(default_factory=list)
    judge_records: list[Row] = field(default_factory=list)
    turn_counts: list[int] = field(default_factory=list)
    verdict_counts: list[int] = field(default_factory=list)
    judge_counts: list[int] = field(default_factory=list)
    event_columns: EventColumns = field(default_factory=EventColumns)


def _read_runs(runs: list[_Run], *, events: bool) -> _Read:
    """Every run report and trial folder of ``runs`` read (voice events only with ``events``)."""
    read = _Read()
    for number, run in enumerate(runs):
        report = run.report or {}
        cost = object_or_empty(report.get("cost"))
        read.run_rows.append({
            "run_id": run.run_id, "cell": run.cell, "matrix_id": run.matrix_id,
            **({"stage": run.stage} if run.stage is not None else {}),
            **{k: v for k, v in report.items()
               if not isinstance(v, (dict, list)) and k not in ("run_id", *_SKIPPED_FIELDS)},
            **({"cost_total": cost.get("total"), "cost_currency": cost.get("currency")}
               if cost else {}),
            "path": str(run.run_dir) if run.run_dir else None})
        for trial_dir in run.trial_dirs:
            _read_trial(read, trial_dir, number, events=events)
    return read


def _read_trial(read: _Read, trial_dir: Path, run_number: int, *, events: bool) -> None:
    """One trial folder's report, metrics and (with ``events``) voice events added to ``read``."""
    trial_report = read_trial_report_json(trial_dir / TRIAL_REPORT)
    read.trial_rows.append(_trial_row(trial_report, trial_dir))
    read.trial_run.append(run_number)
    metrics_path = trial_dir / VOICE_METRICS
    metrics = read_json(metrics_path, model=VoiceMetrics) if metrics_path.is_file() else {}
    turns = metrics.get("turns", [])
    read.trial_rows[-1].update(_talk_and_entities(metrics))
    read.turn_records.extend(_flatten(t) for t in turns)
    read.turn_counts.append(len(turns))
    verdicts = trial_report.get("verdicts") or []
    read.verdict_records.extend(verdicts)
    read.verdict_counts.append(len(verdicts))
    judges = trial_report.get("judges") or []
    read.judge_records.extend({k: v for k, v in j.items() if k != "sent"} for j in judges)
    read.judge_counts.append(len(judges))
    if events:
        path = trial_dir / VOICE_EVENTS
        read.event_columns.add(read_events(path), source=path)
    else:
        read.event_columns.add([], source=trial_dir)
