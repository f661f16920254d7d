"""The ``rates`` frame of :func:`~._frames.load_frames`: one row per run and rate.

Each run's pass rate (its unjudged trials left out) and each verdict's and judge's pass rate
over the counted trials, with intervals under the confidence and method the run report was
written with (Wilson 95% for a report without them), and the judge-corrected rates its report
holds (``--calibration``). The estimators are :mod:`voicelab.scoring`'s, as in the run report.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..scoring import proportion_interval
from ._discovery import _Run
from ._json import JsonObject, Row, object_or_empty, objects_in
from ._rates import RATE_COLUMNS, counted, judged_trials


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
