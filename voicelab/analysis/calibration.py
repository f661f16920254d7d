"""Judge calibration against human labels: pure functions on pandas/numpy.

Conventions: the positive class is **pass**. Sensitivity is P(judge pass | human pass),
specificity is P(judge fail | human fail). Items whose judge errored, or whose annotators tie,
are excluded from the statistics and counted separately. Confidence intervals are seeded
percentile bootstraps (``numpy.random.default_rng(seed)``).

The judge-corrected pass rate is Rogan-Gladen: ``(p_obs + spec - 1) / (sens + spec - 1)``,
clipped to [0, 1], undefined (NaN) when ``sens + spec <= 1`` (a judge no better than chance).
Its interval is a bootstrap over *both* samples: each replicate resamples the judged verdicts
and, independently, the calibration pairs (re-estimating sensitivity and specificity), so it
carries the uncertainty of the measured judge error as well as the sampling error of the
judged pass rate. The computation is :func:`voicelab.scoring.corrected_rate` (from counts),
which the run report uses too (``--calibration``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from os import PathLike

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import ConfigError
from ..scoring import METHOD, corrected_rate, rogan_gladen, safe_ratio

#: The human label CSV the labeling widget writes: one row per (item, criterion, annotator).
#: ``human_label`` is ``pass`` or ``fail``; ``labeled_at`` is ISO 8601 (UTC recommended);
#: ``note`` may be empty.
HUMAN_LABEL_COLUMNS = ("run_id", "trial_id", "criterion", "human_label", "annotator", "note",
                       "labeled_at")
HUMAN_LABELS = ("pass", "fail")
#: The judge results frame (one row per trial and judge; ``name`` is the criterion).
JUDGE_RESULT_COLUMNS = ("run_id", "trial_id", "name", "status", "passed", "label", "score",
                        "threshold")
_KEY = ["run_id", "trial_id", "criterion"]


# --- human labels -------------------------------------------------------------------------

def validate_human_labels(labels: pd.DataFrame, *, source: str | None = None) -> pd.DataFrame:
    """A clean copy: ids as strings, ``human_label`` lower-cased, ``note`` filled with ``""``."""
    missing = [c for c in HUMAN_LABEL_COLUMNS if c not in labels.columns]
    if missing:
        raise ConfigError(f"missing columns {missing}; expected {list(HUMAN_LABEL_COLUMNS)}",
                          source=source)
    frame = labels.loc[:, list(HUMAN_LABEL_COLUMNS)].copy()
    frame["note"] = frame["note"].fillna("").astype(str)
    for column in ("run_id", "trial_id", "criterion", "human_label", "annotator", "labeled_at"):
        values = frame[column].astype("string").str.strip()
        empty = values.isna() | (values == "")
        if empty.any():
            raise ConfigError(f"row {int(np.flatnonzero(empty.to_numpy())[0]) + 2}: {column} is "
                              "empty", source=source, key=column)
        frame[column] = values.astype(str)
    frame["human_label"] = frame["human_label"].str.lower()
    bad = ~frame["human_label"].isin(HUMAN_LABELS)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ConfigError(f"row {row + 2}: human_label {frame['human_label'].iloc[row]!r} is not "
                          "'pass' or 'fail'", source=source, key="human_label")
    parsed = pd.to_datetime(frame["labeled_at"], errors="coerce", utc=True, format="ISO8601")
    if parsed.isna().any():
        row = int(np.flatnonzero(parsed.isna().to_numpy())[0])
        raise ConfigError(f"row {row + 2}: labeled_at {frame['labeled_at'].iloc[row]!r} is not "
                          "an ISO 8601 time", source=source, key="labeled_at")
    duplicated = frame.duplicated([*_KEY, "annotator"])
    if duplicated.any():
        row = int(np.flatnonzero(duplicated.to_numpy())[0])
        raise ConfigError(f"row {row + 2}: annotator {frame['annotator'].iloc[row]!r} labeled "
                          "this run_id/trial_id/criterion twice", source=source)
    return frame.reset_index(drop=True)


def read_human_labels(path: str | PathLike[str]) -> pd.DataFrame:
    """A CSV of human labels, read as text and checked (``validate_human_labels``)."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return validate_human_labels(frame, source=str(path))


def join_labels(labels: pd.DataFrame, judges: pd.DataFrame) -> pd.DataFrame:
    """One row per judged item that humans labeled (inner join on run, trial and criterion).

    Several annotators are resolved by majority: ``human_pass`` is NA on a tie.
    ``judge_passed`` is NA where the judge errored.
    """
    labels = validate_human_labels(labels)
    missing = [c for c in JUDGE_RESULT_COLUMNS if c not in judges.columns]
    if missing:
        raise ValueError(f"the judge results frame lacks columns {missing}")
    votes = labels.assign(vote=labels["human_label"] == "pass").groupby(_KEY, sort=True)["vote"]
    human = votes.agg(n_annotators="size", n_pass="sum").reset_index()
    human["n_pass"] = human["n_pass"].astype(int)
    majority = np.maximum(human["n_pass"], human["n_annotators"] - human["n_pass"])
    tie = 2 * human["n_pass"] == human["n_annotators"]
    human["human_pass"] = pd.array(np.where(tie, None, 2 * human["n_pass"] > human["n_annotators"]),
                                   dtype="boolean")
    human["human_label"] = np.where(tie, "tie", np.where(human["human_pass"].fillna(False),
                                                         "pass", "fail"))
    human["annotator_agreement"] = majority / human["n_annotators"]
    judged = judges.loc[:, list(JUDGE_RESULT_COLUMNS)].rename(columns={
        "name": "criterion", "status": "judge_status", "passed": "judge_passed",
        "label": "judge_label", "score": "judge_score", "threshold": "judge_threshold"})
    for column in ("run_id", "trial_id", "criterion"):
        judged[column] = judged[column].astype(str)
    if judged.duplicated(_KEY).any():
        raise ValueError("the judge results frame has several rows for one run/trial/criterion")
    errored = judged["judge_status"].astype(str) == "error"
    verdicts = np.full(len(judged), None, dtype=object)
    verdicts[~errored.to_numpy()] = _as_bool(judged.loc[~errored, "judge_passed"])
    judged["judge_passed"] = pd.array(verdicts, dtype="boolean")
    joined = human.drop(columns="n_pass").merge(judged, on=_KEY, how="inner")
    return joined.sort_values(_KEY).reset_index(drop=True)


def _as_bool(values: pd.Series) -> np.ndarray:
    """Booleans from bools or their CSV spellings (``True``/``false``/``1``/``0``)."""
    if values.dtype == bool:
        return values.to_numpy()
    spelled = values.astype(str).str.strip().str.lower()
    unknown = ~spelled.isin(["true", "false", "1", "0", "1.0", "0.0"])
    if unknown.any():
        raise ValueError(f"judge 'passed' values {sorted(set(values[unknown].astype(str)))} are "
                         "not booleans")
    return spelled.isin(["true", "1", "1.0"]).to_numpy()


# --- statistics ---------------------------------------------------------------------------

def confusion_counts(human_pass: Sequence[bool], judge_pass: Sequence[bool]) -> dict[str, int]:
    human = np.asarray(human_pass, dtype=bool)
    judge = np.asarray(judge_pass, dtype=bool)
    return {"tp": int(np.sum(human & judge)), "fn": int(np.sum(human & ~judge)),
            "fp": int(np.sum(~human & judge)), "tn": int(np.sum(~human & ~judge))}


#: a count of a confusion cell: one number, or one per bootstrap replicate
_Count = float | np.ndarray


def _kappa(tp: _Count, fn: _Count, fp: _Count, tn: _Count) -> npt.NDArray[np.float64]:
    n = np.asarray(tp + fn + fp + tn, dtype=float)
    observed = safe_ratio(tp + tn, n)
    expected = safe_ratio((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn), n * n)
    # Both raters constant (expected agreement 1): kappa is undefined.
    return safe_ratio(observed - expected, 1.0 - expected)


def cohens_kappa(human_pass: Sequence[bool], judge_pass: Sequence[bool]) -> float:
    counts = confusion_counts(human_pass, judge_pass)
    return float(_kappa(*(np.float64(counts[k]) for k in ("tp", "fn", "fp", "tn"))))


def _interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return (math.nan, math.nan)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return (float(low), float(high))


def _bootstrap_counts(human: np.ndarray, judge: np.ndarray, rng: np.random.Generator,
                      n_bootstrap: int) -> tuple[np.ndarray, ...]:
    """(tp, fn, fp, tn) per replicate, resampling the (human, judge) pairs with replacement."""
    index = rng.integers(0, human.size, size=(n_bootstrap, human.size))
    h, j = human[index], judge[index]
    return ((h & j).sum(1), (h & ~j).sum(1), (~h & j).sum(1), (~h & ~j).sum(1))


@dataclass(frozen=True)
class CalibrationReport:
    """How far a judge agrees with humans on one criterion: counts, agreement, kappa with its
    interval, sensitivity and specificity (:func:`calibrate`)."""

    criterion: str | None
    n: int
    n_judge_errors: int
    n_human_ties: int
    tp: int
    fn: int
    fp: int
    tn: int
    agreement: float
    kappa: float
    kappa_ci_low: float
    kappa_ci_high: float
    sensitivity: float
    specificity: float
    human_pass_rate: float
    judge_pass_rate: float
    confidence: float
    n_bootstrap: int
    seed: int

    def confusion_matrix(self) -> pd.DataFrame:
        """Rows: the human label; columns: the judge's verdict."""
        return pd.DataFrame([[self.tp, self.fn], [self.fp, self.tn]],
                            index=pd.Index(["pass", "fail"], name="human"),
                            columns=pd.Index(["pass", "fail"], name="judge"))

    def to_dict(self) -> dict[str, object]:
        return {key: (None if isinstance(value, float) and math.isnan(value) else value)
                for key, value in asdict(self).items()}


def _pairs(joined: pd.DataFrame, criterion: str | None) -> tuple[pd.DataFrame, str | None]:
    criteria = sorted(joined["criterion"].astype(str).unique())
    if criterion is None:
        if len(criteria) > 1:
            raise ValueError(f"the frame holds several criteria {criteria}: pass criterion=")
        criterion = criteria[0] if criteria else None
    return joined[joined["criterion"].astype(str) == str(criterion)], criterion


def calibrate(joined: pd.DataFrame, *, criterion: str | None = None, n_bootstrap: int = 2000,
              confidence: float = 0.95, seed: int = 0) -> CalibrationReport:
    """Agreement, Cohen's kappa (bootstrap CI), confusion counts, sensitivity and specificity."""
    rows, criterion = _pairs(joined, criterion)
    errors = rows["judge_passed"].isna()
    ties = rows["human_pass"].isna()
    usable = rows[~errors & ~ties]
    human = usable["human_pass"].to_numpy(dtype=bool)
    judge = usable["judge_passed"].to_numpy(dtype=bool)
    counts = confusion_counts(human, judge)
    tp, fn, fp, tn = (counts[k] for k in ("tp", "fn", "fp", "tn"))
    n = int(human.size)
    kappa_low = kappa_high = math.nan
    if n:
        rng = np.random.default_rng(seed)
        kappa_low, kappa_high = _interval(_kappa(*_bootstrap_counts(human, judge, rng,
                                                                    n_bootstrap)), confidence)
    return CalibrationReport(
        criterion=criterion, n=n, n_judge_errors=int((errors & ~ties).sum()),
        n_human_ties=int(ties.sum()), tp=tp, fn=fn, fp=fp, tn=tn,
        agreement=float(safe_ratio(tp + tn, n)), kappa=float(_kappa(tp, fn, fp, tn)),
        kappa_ci_low=kappa_low, kappa_ci_high=kappa_high,
        sensitivity=float(safe_ratio(tp, tp + fn)), specificity=float(safe_ratio(tn, tn + fp)),
        human_pass_rate=float(safe_ratio(tp + fn, n)), judge_pass_rate=float(safe_ratio(tp + fp, n)),
        confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)


def threshold_sweep(joined: pd.DataFrame, *, criterion: str | None = None,
                    thresholds: Sequence[float] | None = None) -> pd.DataFrame:
    """For a numeric evaluator: how a judge verdict ``score >= threshold`` agrees with humans."""
    rows, _ = _pairs(joined, criterion)
    rows = rows[rows["human_pass"].notna() & (rows["judge_status"].astype(str) != "error")]
    scores = pd.to_numeric(rows["judge_score"], errors="coerce")
    rows, scores = rows[scores.notna()], scores[scores.notna()].to_numpy(dtype=float)
    human = rows["human_pass"].to_numpy(dtype=bool)
    candidates = np.unique(scores) if thresholds is None else np.asarray(thresholds, dtype=float)
    records = []
    for threshold in candidates:
        judge = scores >= threshold
        c = confusion_counts(human, judge)
        n = human.size
        records.append({
            "threshold": float(threshold), "n": n,
            "agreement": float(safe_ratio(c["tp"] + c["tn"], n)),
            "kappa": float(_kappa(c["tp"], c["fn"], c["fp"], c["tn"])),
            "sensitivity": float(safe_ratio(c["tp"], c["tp"] + c["fn"])),
            "specificity": float(safe_ratio(c["tn"], c["tn"] + c["fp"])),
            "judge_pass_rate": float(safe_ratio(c["tp"] + c["fp"], n)), **c})
    return pd.DataFrame.from_records(records, columns=[
        "threshold", "n", "agreement", "kappa", "sensitivity", "specificity", "judge_pass_rate",
        "tp", "fn", "fp", "tn"])


def best_threshold(sweep: pd.DataFrame) -> float:
    """The threshold with the highest kappa (then agreement, then the lowest threshold)."""
    ranked = sweep.assign(kappa_rank=sweep["kappa"].fillna(-np.inf)).sort_values(
        ["kappa_rank", "agreement", "threshold"], ascending=[False, False, True])
    if ranked.empty:
        raise ValueError("the sweep is empty: no scored, human-labeled items")
    return float(ranked["threshold"].iloc[0])


@dataclass(frozen=True)
class CorrectedPassRate:
    observed: float
    corrected: float
    ci_low: float
    ci_high: float
    sensitivity: float
    specificity: float
    n_judged: int
    n_calibration: int
    confidence: float
    n_bootstrap: int
    seed: int
    method: str = METHOD

    def to_dict(self) -> dict[str, object]:
        return {key: (None if isinstance(value, float) and math.isnan(value) else value)
                for key, value in asdict(self).items()}


def corrected_pass_rate(judged_passed: Sequence[bool], calibration: pd.DataFrame, *,
                        criterion: str | None = None, n_bootstrap: int = 2000,
                        confidence: float = 0.95, seed: int = 0) -> CorrectedPassRate:
    """The pass rate the judge reports on ``judged_passed`` (its verdicts on new trials, judge
    errors left out), corrected for the judge's error measured on ``calibration`` (a
    :func:`join_labels` frame)."""
    judged = np.asarray(judged_passed, dtype=bool)
    rows, _ = _pairs(calibration, criterion)
    rows = rows[rows["human_pass"].notna() & rows["judge_passed"].notna()]
    counts = confusion_counts(rows["human_pass"].to_numpy(dtype=bool),
                              rows["judge_passed"].to_numpy(dtype=bool))
    result = corrected_rate(int(judged.sum()), int(judged.size), **counts,
                            confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)
    return CorrectedPassRate(observed=result.observed, corrected=result.corrected,
                             ci_low=result.low, ci_high=result.high,
                             sensitivity=result.sensitivity, specificity=result.specificity,
                             n_judged=result.n_judged, n_calibration=result.n_calibration,
                             confidence=confidence, n_bootstrap=n_bootstrap, seed=seed)


__all__ = ["HUMAN_LABELS", "HUMAN_LABEL_COLUMNS", "JUDGE_RESULT_COLUMNS", "CalibrationReport",
           "CorrectedPassRate", "best_threshold", "calibrate", "cohens_kappa",
           "confusion_counts", "corrected_pass_rate", "join_labels", "read_human_labels",
           "rogan_gladen", "threshold_sweep", "validate_human_labels"]
