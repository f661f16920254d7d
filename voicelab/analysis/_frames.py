"""Bundles -> tidy pandas frames: runs, trials, turns, events, verdicts and judges.

Every frame carries the keys ``run_id`` (from run-report.json), ``cell`` (the matrix cell, NA
outside a matrix) and ``trial_id``; the child frames repeat ``scenario_id``, ``persona`` and
``environment`` (categoricals: cheap) so they group without a merge. ``trials.path`` is the
trial folder (the widgets find the WAV files there); ``runs.label`` / ``trials.label`` name a run
(``--label``). What each trial cost is in the ``cost_*`` columns of ``trials`` (and each run's
total in ``runs.cost_total``; docs/cost.md).

Rates: ``runs`` carries each run's pass rate with its interval (``pass_rate_estimate``, ``_low``,
``_high``, ``_method``, ``_confidence``, ``_n``, ``_passed``: the run report's settings, Wilson
95% for a bundle without them); ``rates`` holds one row per run and rate (``kind``: ``run``,
``verdict``, ``judge`` (the judge's own pass rate, judge errors left out) and
``judge_corrected`` (Rogan-Gladen, from the run report's ``--calibration``)); ``curves`` the
unbiased pass@k and pass^k of each run for every k.

A bundle is hostile input: every document is read through the bundle readers of
:mod:`voicelab.artifacts`, which check it (the run, matrix and trial reports and
voice-metrics.json against their models, every voice event) and refuse what does not fit with a
``BundleMemberError`` or ``ConfigError`` naming the member and key, never a ``KeyError`` from
deep inside a frame.

Parsing is the cost floor: each JSON document is decoded once with :mod:`json` (voice events:
see ``_events.py``), the frames are built column-wise from the decoded records, and the key
columns of the child frames are categorical codes repeated with numpy, never per-row DataFrame
operations. The turns frame flattens every field of voice-metrics.json's turns (nested
``input``/``output`` signal stats become ``input_*``/``output_*``), so fields added later appear
as columns by themselves; with the events it also gets ``user_start_ms`` and ``user_commit_ms``
(when the user began speaking and committed the turn, on the listener timeline).
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import JsonValue

from ..artifacts import (
    MATRIX_REPORT,
    RUN_REPORT,
    TRANSCRIPT_JSON,
    TRANSCRIPT_MD,
    TRIAL_REPORT,
    VOICE_EVENTS,
    VOICE_METRICS,
    MatrixReport,
    RunReport,
    VoiceMetrics,
    check_tree,
    mirror,
    open_location,
    read_json,
    read_trial_report_json,
    resolve_latest,
    resolve_local_latest,
)
from ..errors import ConfigError
from ..scoring import proportion_interval
from ._events import EventColumns, read_events
from ._json import JsonObject, Row, object_or_empty, objects_in
from ._rates import RATE_COLUMNS, counted, judged_trials, pass_curve_table

logger = logging.getLogger(__name__)

KEY_COLUMNS = ("run_id", "cell", "trial_id")
GROUP_COLUMNS = ("scenario_id", "persona", "environment")
JUDGE_COLUMNS = ("name", "kind", "critical", "status", "passed", "label", "score", "threshold",
                 "rationale", "model", "model_version", "error")
VERDICT_COLUMNS = ("name", "status", "passed", "critical", "why", "expected", "observed")
_TRIAL_CATEGORIES = ("session_id", "adapter", "execution_status", "exit_reason",
                     "outcome_status")
_TEXT_COLUMNS = ("trace_id", "failure_message", "outcome_error", "message", "rationale", "error",
                 "cost_currency",
                 "why", "expected", "observed", "transcript", "path", "bundle_path", "suite_hash",
                 "failed_verdicts", "failure_kinds", "failed_judges")
_NESTED_TURN_FIELDS = ("input", "output", "speech")
_TURN_CATEGORIES = ("turn_id", "status", "reference", "input_encoding", "output_encoding")
# Counts that stay integers when a turn lacks them (the opening has no input signal).
_INTEGER_SUFFIXES = ("sample_rate_hz", "channels", "byte_count", "peak_amplitude")
_SKIPPED_FIELDS = ("schema_version", "voice_event_schema_versions",
                   "interoperability_schema_version")
_USER_CHUNK = "user.audio_chunk"
_USER_COMMIT = "user.turn_committed"


@dataclass(frozen=True, eq=False)
class Frames:
    """Tidy frames of one or more runs (see the module docstring for the keys)."""

    runs: pd.DataFrame
    trials: pd.DataFrame
    turns: pd.DataFrame
    events: pd.DataFrame
    verdicts: pd.DataFrame
    judges: pd.DataFrame
    #: one row per run and rate: kind run / verdict / judge / judge_corrected (see the module)
    rates: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: one row per run and k: the unbiased pass@k and pass^k
    curves: pd.DataFrame = field(default_factory=pd.DataFrame)

    def trial(self, *, run_id: str | None = None, trial_id: str | None = None) -> pd.Series:
        """The trials row of one trial: the first that matches the given ids."""
        mask = np.ones(len(self.trials), dtype=bool)
        if run_id is not None:
            mask &= (self.trials["run_id"] == run_id).to_numpy()
        if trial_id is not None:
            mask &= (self.trials["trial_id"] == trial_id).to_numpy()
        if not mask.any():
            raise KeyError(f"no trial {trial_id!r} (run {run_id!r}) in these frames")
        return self.trials[mask].iloc[0]

    def trial_dir(self, *, run_id: str | None = None, trial_id: str | None = None) -> Path:
        return Path(self.trial(run_id=run_id, trial_id=trial_id)["path"])

    def select(self, *, run_id: str | None = None, trial_id: str | None = None) -> Frames:
        """The frames of one trial (see :meth:`trial`)."""
        row = self.trial(run_id=run_id, trial_id=trial_id)

        def rows_of(frame: pd.DataFrame) -> pd.DataFrame:
            if "run_id" not in frame.columns:
                return frame
            keep = (frame["run_id"] == row["run_id"]).to_numpy()
            if "trial_id" in frame.columns:
                keep &= (frame["trial_id"] == row["trial_id"]).to_numpy()
            return frame[keep]

        return Frames(runs=rows_of(self.runs), trials=rows_of(self.trials),
                      turns=rows_of(self.turns), events=rows_of(self.events),
                      verdicts=rows_of(self.verdicts), judges=rows_of(self.judges),
                      rates=rows_of(self.rates), curves=rows_of(self.curves))

    def __repr__(self) -> str:
        frames = {"runs": self.runs, "trials": self.trials, "turns": self.turns,
                  "events": self.events, "verdicts": self.verdicts, "judges": self.judges,
                  "rates": self.rates, "curves": self.curves}
        sizes = ", ".join(f"{name}={len(frame)}" for name, frame in frames.items())
        return f"Frames({sizes})"


@dataclass
class _Run:
    run_id: str
    cell: str | None
    matrix_id: str | None
    run_dir: Path | None
    report: JsonObject | None
    trial_dirs: list[Path]
    #: a staged sweep's stage the cell ran in
    stage: str | None = None


# --- discovery --------------------------------------------------------------------------------

def _natural(path: Path) -> tuple[int, str]:
    return (len(path.name), path.name)


def _trial_dirs_of(run_dir: Path) -> list[Path]:
    with os.scandir(run_dir) as entries:
        found = [Path(e.path) for e in entries
                 if e.is_dir(follow_symlinks=False) and os.path.isfile(
                     os.path.join(e.path, TRIAL_REPORT))]
    return sorted(found, key=_natural)


_MatrixCells = tuple[str, dict[str, tuple[str, str | None]]]


def _matrix_of(matrix_dir: Path, cache: dict[Path, _MatrixCells]) -> _MatrixCells:
    """The matrix run id and folder name -> (cell id, stage), from matrix-report.json."""
    if matrix_dir not in cache:
        document = read_json(matrix_dir / MATRIX_REPORT, model=MatrixReport)
        mapping = {Path(str(cell["bundle_path"])).name: (
            str(cell["cell_id"]), cell["stage"] if isinstance(cell.get("stage"), str) else None)
            for cell in document.get("cells", [])
            if isinstance(cell, dict) and cell.get("cell_id") and cell.get("bundle_path")}
        cache[matrix_dir] = (str(document.get("run_id") or matrix_dir.name), mapping)
    return cache[matrix_dir]


def _run_of(run_dir: Path, trial_dirs: list[Path], cache: dict[Path, _MatrixCells]) -> _Run:
    report = None
    if (run_dir / RUN_REPORT).is_file():
        report = read_json(run_dir / RUN_REPORT, model=RunReport)
    cell = matrix_id = stage = None
    if (run_dir.parent / MATRIX_REPORT).is_file():
        matrix_id, cells = _matrix_of(run_dir.parent, cache)
        cell, stage = cells.get(run_dir.name, (run_dir.name, None))
    run_id = str(report["run_id"]) if report and report.get("run_id") else run_dir.name
    return _Run(run_id, cell, matrix_id, run_dir if report else None, report, trial_dirs,
                stage)


#: What the frames (and the failure and transcript views) read of a bundle in a store; the
#: audio is fetched when a widget first plays it.
STORE_FILES = frozenset({RUN_REPORT, MATRIX_REPORT, TRIAL_REPORT,
                         VOICE_METRICS, VOICE_EVENTS, TRANSCRIPT_JSON,
                         TRANSCRIPT_MD})


def _local(given: str | os.PathLike[str]) -> Path:
    """A local folder to read: a store URL is mirrored (its documents), ``latest`` resolved."""
    opened = open_location(given)
    if isinstance(opened, Path):
        return resolve_local_latest(opened.expanduser())
    return mirror(resolve_latest(opened), names=STORE_FILES)


def _discover(paths: Iterable[str | os.PathLike[str]]) -> list[_Run]:
    runs: dict[Path, _Run] = {}
    cache: dict[Path, _MatrixCells] = {}
    for given in paths:
        path = _local(given).resolve()
        if not path.exists():
            raise ConfigError("no such run directory or trial folder", source=path)
        check_tree(path)  # regular files and folders only, before anything is read
        if (path / TRIAL_REPORT).is_file():
            run = runs.setdefault(path.parent, _run_of(path.parent, [], cache))
            if path not in run.trial_dirs:
                run.trial_dirs.append(path)
            continue
        for root, dirs, files in os.walk(path):  # symlinks (e.g. ``latest``) are not followed
            here = Path(root)
            if RUN_REPORT in files:
                dirs.clear()
                if here not in runs:
                    runs[here] = _run_of(here, _trial_dirs_of(here), cache)
            elif TRIAL_REPORT in files:  # a trial folder outside any run
                dirs.clear()
                run = runs.setdefault(here.parent, _run_of(here.parent, [], cache))
                run.trial_dirs.append(here)
            else:
                dirs.sort()
    for run in runs.values():
        run.trial_dirs.sort(key=_natural)
    return [run for run in runs.values() if run.trial_dirs or run.report]


# --- reading ----------------------------------------------------------------------------------

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


# --- typing -----------------------------------------------------------------------------------

def _typed(frame: pd.DataFrame, *, categories: Iterable[str] = (),
           text: Iterable[str] = ()) -> pd.DataFrame:
    """Categoricals for ids, nullable booleans/integers where None mixes in, floats for numbers
    (a column of nothing but None is a float column of NaN unless it is named in ``text``)."""
    for column in frame.columns:
        series = frame[column]
        if column in text:
            continue
        if column in categories:
            frame[column] = series.astype("category")
            continue
        if series.dtype == object:
            kind = pd.api.types.infer_dtype(series, skipna=True)
            if kind == "boolean":
                frame[column] = series.astype("boolean")
            elif kind == "integer" and series.isna().any():
                frame[column] = series.astype("Int64")
            elif kind in ("floating", "mixed-integer-float", "integer"):
                frame[column] = pd.to_numeric(series)
            elif kind == "empty":
                frame[column] = series.astype(float)
        elif series.dtype == float and str(column).endswith(_INTEGER_SUFFIXES):
            values = series.to_numpy()
            finite = values[np.isfinite(values)]
            if np.array_equal(finite, np.round(finite)):
                frame[column] = series.astype("Int64")
    return frame


def _with_datetimes(frame: pd.DataFrame) -> pd.DataFrame:
    for column in ("started_at", "ended_at"):
        if column in frame.columns:
            frame[column] = pd.to_datetime(frame[column], format="ISO8601", utc=True,
                                           errors="coerce")
    return frame


def _attach_keys(frame: pd.DataFrame, trials: pd.DataFrame, index: np.ndarray,
                 columns: Sequence[str]) -> pd.DataFrame:
    """Prepend the trials' key columns to a child frame, rows mapped by ``index`` (trial rows)."""
    keys = {}
    for column in columns:
        source = trials[column]
        keys[column] = pd.Categorical.from_codes(source.cat.codes.to_numpy()[index],
                                                 dtype=source.dtype)
    keyed = pd.DataFrame(keys, index=frame.index)
    return pd.concat([keyed, frame.drop(columns=[c for c in columns if c in frame.columns])],
                     axis=1)


def _records_frame(records: list[Row], columns: Sequence[str]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    for column in columns:
        if column not in frame.columns:
            frame[column] = pd.Series(dtype=object)
    ordered = [*columns, *(c for c in frame.columns if c not in columns)]
    return frame[ordered]


def _timeline_columns(turns: pd.DataFrame, events: pd.DataFrame, index: np.ndarray,
                      turn_index: np.ndarray) -> pd.DataFrame:
    """Per turn: when the user started speaking and committed, on the listener timeline."""
    keyed = pd.DataFrame({"_trial": index, "turn_id": events["turn_id"].astype(object),
                          "event_type": events["event_type"], "at": events["listener_ms"]})
    result = turns.assign(_trial=turn_index, _turn=turns["turn_id"].astype(object))
    for event_type, name in ((_USER_CHUNK, "user_start_ms"), (_USER_COMMIT, "user_commit_ms")):
        first = (keyed[keyed["event_type"] == event_type].groupby(["_trial", "turn_id"])["at"]
                 .min().rename(name).reset_index().rename(columns={"turn_id": "_turn"}))
        result = result.merge(first, on=["_trial", "_turn"], how="left")
    result.index = turns.index
    return result.drop(columns=["_trial", "_turn"])


# --- entry point ------------------------------------------------------------------------------

@contextmanager
def _collector_paused() -> Iterator[None]:
    """Decoding builds hundreds of containers per trial and keeps them all alive: without a
    pause, the cyclic collector rescans that growing heap over and over. Nothing here makes
    reference cycles; the previous state is restored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_frames(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
                events: bool = True) -> Frames:
    """Read run directories, matrix runs, folders of runs or trial folders into :class:`Frames`.

    A path may be a store URL (``s3://bucket/runs/latest``, ``memory://...``): its documents
    are downloaded into a local mirror kept until the process exits (``trials.path`` is the
    mirrored trial folder; a widget fetches a WAV file from the store when it first plays it).
    ``events=False`` skips voice-events.jsonl (the largest files): ``frames.events`` is then
    empty and the turns lack ``user_start_ms`` / ``user_commit_ms``.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    with _collector_paused():
        return _load(_discover(paths), events=events)


def _load(runs: list[_Run], *, events: bool) -> Frames:
    read = _read_runs(runs, events=events)
    logger.debug("read %d run(s), %d trial(s), %d event(s)", len(runs), len(read.trial_rows),
                 sum(read.event_columns.counts))
    runs_frame, trials, run_index = _runs_and_trials(read)
    child_keys = (*KEY_COLUMNS, *GROUP_COLUMNS)
    turns_frame, turn_index = _child_frame(read.turn_records, read.turn_counts, trials,
                                           ["turn_id", "index"], _TURN_CATEGORIES)
    # a nested document that was null everywhere (its fields are flattened as input_* etc.)
    turns_frame = turns_frame.drop(columns=[c for c in _NESTED_TURN_FIELDS
                                            if c in turns_frame.columns
                                            and turns_frame[c].isna().all()])
    verdicts_frame, judges_frame = _verdicts_and_judges(read, trials)

    event_index = np.repeat(np.arange(len(trials)),
                            np.asarray(read.event_columns.counts, dtype=np.int64))
    events_frame = _attach_keys(read.event_columns.frame(), trials, event_index, child_keys)
    if events:
        turns_frame = _timeline_columns(turns_frame, events_frame, event_index, turn_index)
    rates = _rates(runs, runs_frame, trials, run_index, verdicts_frame, read.verdict_counts,
                   judges_frame, read.judge_counts)
    run_rates = rates[rates["kind"] == "run"].set_index("run_id")
    for column in RATE_COLUMNS:
        runs_frame[f"pass_rate_{column}"] = run_rates[column].reindex(
            runs_frame["run_id"].astype(object)).to_numpy()
    curves = pass_curve_table(trials, by=["run_id", "cell"]) if len(trials) else \
        pass_curve_table(pd.DataFrame({"run_id": [], "cell": [], "passed": []}),
                         by=["run_id", "cell"])
    return Frames(runs=runs_frame, trials=trials, turns=turns_frame, events=events_frame,
                  verdicts=verdicts_frame, judges=judges_frame, rates=rates, curves=curves)


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


def _runs_and_trials(read: _Read) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """The runs frame, the trials frame (each trial with its run's keys, matrix, label and
    stage) and each trial's position in the runs frame."""
    runs_frame = _typed(_with_datetimes(_records_frame(read.run_rows, ["run_id", "cell"])),
                        categories=("run_id", "cell", "matrix_id", "status", *GROUP_COLUMNS,
                                    "adapter", "stage"),
                        text=_TEXT_COLUMNS)
    trials = _with_datetimes(_records_frame(read.trial_rows, ["trial_id", *GROUP_COLUMNS]))
    run_index = np.asarray(read.trial_run, dtype=np.int64)
    for position, column in enumerate(("run_id", "cell")):
        trials.insert(position, column, runs_frame[column].to_numpy()[run_index] if len(trials)
                      else pd.Series(dtype=object))
    if "label" not in runs_frame.columns:
        runs_frame["label"] = pd.Series([None] * len(runs_frame), dtype=object)
    if "stage" in runs_frame.columns:  # a staged sweep: each trial's stage
        trials["stage"] = runs_frame["stage"].astype(object).to_numpy()[run_index] \
            if len(trials) else pd.Series(dtype=object)
    for column in ("matrix_id", "label"):
        trials[column] = runs_frame[column].astype(object).to_numpy()[run_index] \
            if len(trials) else pd.Series(dtype=object)
    trials = _typed(trials, categories=(*KEY_COLUMNS, *GROUP_COLUMNS, *_TRIAL_CATEGORIES,
                                        "matrix_id", "label", "stage"),
                    text=_TEXT_COLUMNS)
    return runs_frame, trials, run_index


def _child_frame(records: list[Row], counts: list[int], trials: pd.DataFrame,
                 columns: Sequence[str], categories: Sequence[str]
                 ) -> tuple[pd.DataFrame, np.ndarray]:
    """A frame of per-trial records (``counts[i]`` of trial ``i``), keyed by its trial; and
    each row's trial position."""
    index = np.repeat(np.arange(len(trials)), np.asarray(counts, dtype=np.int64))
    frame = _typed(_records_frame(records, columns), categories=categories, text=_TEXT_COLUMNS)
    return _attach_keys(frame, trials, index, (*KEY_COLUMNS, *GROUP_COLUMNS)), index


def _verdicts_and_judges(read: _Read, trials: pd.DataFrame
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verdicts and judges frames, their flags boolean and judges' numbers numeric."""
    verdicts_frame, _ = _child_frame(read.verdict_records, read.verdict_counts, trials,
                                     VERDICT_COLUMNS, ("name",))
    judges_frame, _ = _child_frame(read.judge_records, read.judge_counts, trials,
                                   JUDGE_COLUMNS,
                                   ("name", "kind", "status", "label", "model", "model_version"))
    for frame, flags in ((verdicts_frame, ("passed", "critical")),
                         (judges_frame, ("passed", "critical"))):
        for flag in flags:
            frame[flag] = frame[flag].fillna(False).astype(bool)
    judges_frame["score"] = pd.to_numeric(judges_frame["score"], errors="coerce")
    judges_frame["threshold"] = pd.to_numeric(judges_frame["threshold"], errors="coerce")
    return verdicts_frame, judges_frame


def _settings(report: JsonObject | None) -> tuple[float, str]:
    """The confidence and interval method a run report was written with (else the defaults)."""
    rate = object_or_empty((report or {}).get("pass_rate"))
    confidence, method = rate.get("confidence"), rate.get("method")
    if method and isinstance(confidence, int | float) and confidence:
        return float(confidence), str(method)
    return 0.95, "wilson"


_RATE_FRAME_COLUMNS = ("run_id", "cell", "kind", "name", "critical", *RATE_COLUMNS,
                       "inconclusive", "sensitivity", "specificity", "note")


def _rates(runs: list[_Run], runs_frame: pd.DataFrame, trials: pd.DataFrame,
           run_index: np.ndarray, verdicts: pd.DataFrame, verdict_counts: list[int],
           judges: pd.DataFrame, judge_counts: list[int]) -> pd.DataFrame:
    """Each run's pass rate, per-verdict and per-judge rates (counted trials only) and the
    judge-corrected rates its report holds."""
    keep = counted(trials)
    rated = judged_trials(trials)  # the run's pass rate leaves unjudged trials out
    passed = trials["passed"].fillna(False).astype(bool).to_numpy() if len(trials) else \
        np.zeros(0, dtype=bool)
    undecided = (trials["status"].astype(object) == "inconclusive").to_numpy(dtype=bool) \
        if "status" in trials else np.zeros(len(trials), dtype=bool)

    def child_table(frame: pd.DataFrame, counts: list[int], *, errors: bool) -> pd.DataFrame:
        index = np.repeat(np.arange(len(trials)), np.asarray(counts, dtype=np.int64))
        mask = keep[index] if len(index) else np.zeros(0, dtype=bool)
        if errors and len(frame):
            mask &= (frame["status"].astype(object) != "error").to_numpy()
        if not errors and len(frame) and "status" in frame:
            mask &= (frame["status"].astype(object) != "not_applicable").to_numpy()
        return pd.DataFrame({"run": run_index[index][mask] if len(index) else [],
                             "name": frame["name"].astype(object).to_numpy()[mask],
                             "passed": frame["passed"].to_numpy(dtype=bool)[mask],
                             "inconclusive": (frame["status"].astype(object) == "inconclusive")
                             .to_numpy(dtype=bool)[mask] if "status" in frame
                             else np.zeros(int(mask.sum()), dtype=bool),
                             "critical": frame["critical"].to_numpy(dtype=bool)[mask]})

    children = {"verdict": child_table(verdicts, verdict_counts, errors=False),
                "judge": child_table(judges, judge_counts, errors=True)}
    rows: list[Row] = []
    for number, run in enumerate(runs):
        confidence, method = _settings(run.report)
        base = {"run_id": runs_frame["run_id"].iat[number], "cell": runs_frame["cell"].iat[number]}

        def rate(hits: int, n: int, confidence: float = confidence,
                 method: str = method) -> dict[str, float | int | str]:
            return proportion_interval(hits, n, confidence=confidence,
                                       method=method).to_dict()  # type: ignore[arg-type]

        mine = (run_index == number) & rated
        rows.append({**base, "kind": "run", "name": None, "critical": None,
                     **rate(int(passed[mine].sum()), int(mine.sum())),
                     "inconclusive": int(undecided[mine].sum())})
        for kind, table in children.items():
            part = table[table["run"] == number]
            for name, group in part.groupby("name", sort=False):
                rows.append({**base, "kind": kind, "name": name,
                             "critical": bool(group["critical"].any()),
                             **rate(int(group["passed"].sum()), len(group)),
                             "inconclusive": int(group["inconclusive"].sum())})
        for corrected in objects_in((run.report or {}).get("judge_corrected_pass_rates")):
            judged = object_or_empty(corrected.get("judge_pass_rate"))
            rows.append({**base, "kind": "judge_corrected", "name": corrected.get("judge"),
                         "critical": None, "estimate": corrected.get("corrected"),
                         "low": corrected.get("low"), "high": corrected.get("high"),
                         "method": corrected.get("method"),
                         "confidence": corrected.get("confidence"), "n": judged.get("n"),
                         "passed": None, "sensitivity": corrected.get("sensitivity"),
                         "specificity": corrected.get("specificity"),
                         "note": corrected.get("note") or None})
    frame = pd.DataFrame(rows, columns=list(_RATE_FRAME_COLUMNS))
    for column in ("estimate", "low", "high", "confidence", "sensitivity", "specificity"):
        frame[column] = pd.to_numeric(frame[column]).astype(float)
    for column in ("n", "passed", "inconclusive"):
        frame[column] = pd.array(frame[column], dtype="Int64")
    for column in ("run_id", "cell", "kind"):
        frame[column] = frame[column].astype("category")
    return frame


# --- helpers over frames ----------------------------------------------------------------------

def _turn_metric_names() -> frozenset[str]:
    from ..artifacts import TurnMetrics
    from ..audio import SignalAnalysis

    signal = [name for name in SignalAnalysis.__dataclass_fields__]
    return frozenset([*TurnMetrics.model_fields, *(f"input_{n}" for n in signal),
                      *(f"output_{n}" for n in signal), "user_start_ms", "user_commit_ms"])


def check_metric(turns: pd.DataFrame, metric: str) -> str:
    """``metric`` itself when it names a per-response column (present in ``turns``, or one
    voice-metrics.json defines, which a frame without data may lack); else a one-line
    ``ValueError`` naming the numeric columns there are."""
    if metric in turns.columns or metric in _turn_metric_names():
        return metric
    numeric = sorted(str(c) for c in turns.columns
                     if pd.api.types.is_numeric_dtype(turns[c]) and not
                     pd.api.types.is_bool_dtype(turns[c]) and c != "index")
    raise ValueError(f"unknown metric {metric!r}; per-response metrics: "
                     f"{', '.join(numeric) or ', '.join(sorted(_turn_metric_names()))}")


def worst_turns(turns: pd.DataFrame, *, metric: str = "first_audio_latency_ms",
                n: int = 3, largest: bool = True) -> pd.DataFrame:
    """The ``n`` responses with the largest (or smallest) ``metric``; rows without it skipped."""
    check_metric(turns, metric)
    if metric not in turns.columns:
        return turns.iloc[:0]
    values = pd.to_numeric(turns[metric], errors="coerce")
    ranked = turns.assign(_rank=values)[values.notna()]
    picked = (ranked.nlargest(n, "_rank") if largest else ranked.nsmallest(n, "_rank"))
    return picked.drop(columns="_rank")
