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

The steps live in modules of their own: the paths become runs and trial folders in
:mod:`._discovery`, their documents become records in :mod:`._bundle_records`, columns get
their types in :mod:`._frame_typing` and the rates frame is computed in :mod:`._frame_rates`;
this module builds the frames from the records.
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

from ._bundle_records import _Read, _read_runs
from ._discovery import _discover, _Run
from ._frame_rates import _rates
from ._frame_typing import _attach_keys, _records_frame, _typed, _with_datetimes
from ._json import Row
from ._rates import RATE_COLUMNS, pass_curve_table

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
