"""Pass rates with confidence intervals and unbiased pass@k / pass^k curves, for any grouping of
the trials frame (by run, cell, persona, environment, label...).

The same estimators as the run report (:mod:`voicelab.scoring`): a Wilson or Clopper-Pearson
interval of the share of trials that passed, and pass@k = 1 - C(n-c,k)/C(n,k), pass^k =
C(c,k)/C(n,k) for every k <= n. Interrupted trials (exit reason ``cancelled``) and trials
nothing judged (status ``unjudged``) are left out, as the run report leaves them out; execution
failures count as not passed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..scoring import INTERVAL_METHODS, pass_curves, proportion_interval

RATE_COLUMNS = ("estimate", "low", "high", "method", "confidence", "n", "passed")
CURVE_COLUMNS = ("k", "pass_at_k", "pass_power_k")


def counted(trials: pd.DataFrame) -> np.ndarray:
    """Which trials count toward a rate: every one that ran to an end (not interrupted)."""
    if "exit_reason" not in trials.columns:
        return np.ones(len(trials), dtype=bool)
    return (trials["exit_reason"].astype(object) != "cancelled").to_numpy(dtype=bool)


def _columns(by: str | Sequence[str] | None, frame: pd.DataFrame) -> list[str]:
    names = [] if by is None else [by] if isinstance(by, str) else list(by)
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise ValueError(f"no column {missing[0]!r} to group by; columns: "
                         f"{', '.join(map(str, frame.columns))}")
    return names


def judged_trials(trials: pd.DataFrame) -> np.ndarray:
    """Which counted trials something judged (not ``unjudged``): a pass rate's trials."""
    if "status" not in trials.columns:
        return counted(trials)
    return counted(trials) & (trials["status"].astype(object) != "unjudged").to_numpy(dtype=bool)


def _groups(trials: pd.DataFrame, names: list[str]) -> list[tuple[tuple[object, ...], int, int]]:
    """(group key, trials judged, passed) per group, in the frame's category order."""
    kept = trials[judged_trials(trials)]
    passed = kept["passed"].fillna(False).astype(bool) if "passed" in kept.columns else \
        pd.Series(False, index=kept.index)
    if not names:
        return [((), len(kept), int(passed.sum()))]
    table = kept[names].assign(_passed=passed.to_numpy())
    grouped = table.groupby(names, observed=True, sort=True, dropna=False)["_passed"]
    return [((key,) if not isinstance(key, tuple) else key, int(group.size), int(group.sum()))
            for key, group in grouped]


def pass_rate_table(trials: pd.DataFrame, *, by: str | Sequence[str] | None = None,
                    confidence: float = 0.95, method: str = "wilson") -> pd.DataFrame:
    """One row per group: the ``by`` columns, then estimate, low, high, method, confidence, n
    and passed (``n``: the trials that ran to an end)."""
    if method not in INTERVAL_METHODS:
        raise ValueError(f"unknown interval method {method!r}; expected one of "
                         f"{', '.join(INTERVAL_METHODS)}")
    names = _columns(by, trials)
    rows = []
    for key, n, passed in _groups(trials, names):
        interval = proportion_interval(passed, n, confidence=confidence,
                                       method=method)  # type: ignore[arg-type]
        rows.append({**dict(zip(names, key, strict=True)), **interval.to_dict()})
    frame = pd.DataFrame(rows, columns=[*names, *RATE_COLUMNS])
    for column in ("estimate", "low", "high"):
        frame[column] = pd.to_numeric(frame[column]).astype(float)
    return frame


def pass_curve_table(trials: pd.DataFrame, *, by: str | Sequence[str] | None = None
                     ) -> pd.DataFrame:
    """Long form: one row per group and k = 1..n with the unbiased pass@k and pass^k."""
    names = _columns(by, trials)
    rows = []
    for key, n, passed in _groups(trials, names):
        labels = dict(zip(names, key, strict=True))
        for k, (at, power) in pass_curves(n, passed).items():
            rows.append({**labels, "n": n, "passed": passed, "k": k, "pass_at_k": at,
                         "pass_power_k": power})
    return pd.DataFrame(rows, columns=[*names, "n", "passed", *CURVE_COLUMNS])


__all__ = ["CURVE_COLUMNS", "RATE_COLUMNS", "counted", "pass_curve_table", "pass_rate_table"]
