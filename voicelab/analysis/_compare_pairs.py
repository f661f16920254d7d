"""The two sides of a comparison as trial tables, paired by (cell, seed).

Each side's trials become one table (cell, seed, pass, cost, where the bundle is); the tables
are paired by cell and seed, with the trials left without a partner listed; what cannot be
compared is refused here, before any statistic; and the verdicts that changed between paired
trials are listed with both bundles. :mod:`._compare` computes the statistics on these pairs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Literal

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..scoring import proportion_interval
from ._comparison import RunSide
from ._frames import Frames, load_frames

#: The cell of every trial of a plain (non-sweep) run.
PLAIN_RUN_CELL = "run"

RunInput = Frames | str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
Side = Literal["baseline", "candidate"]


_TRIAL_COLUMNS = ["cell", "seed", "run_id", "trial_id", "scenario_id", "passed", "executed",
                  "path", "cost_total", "cost_currency", "cost_unpriced"]
_EMPTY_TYPES = {"seed": "int64", "passed": bool, "executed": bool, "cost_total": float,
                "cost_unpriced": float}


def _frames_of(run: RunInput) -> Frames:
    return run if isinstance(run, Frames) else load_frames(run, events=False)


def _trial_table(frames: Frames, side: Side) -> pd.DataFrame:
    trials = frames.trials
    if trials.empty:
        return pd.DataFrame({column: pd.Series(dtype=_EMPTY_TYPES.get(column, object))
                             for column in _TRIAL_COLUMNS})
    cells = trials["cell"].astype(object)
    table = pd.DataFrame({
        "cell": cells.where(cells.notna(), PLAIN_RUN_CELL).astype(str),
        "seed": trials["seed"].astype("int64"),
        "run_id": trials["run_id"].astype(str), "trial_id": trials["trial_id"].astype(str),
        "scenario_id": (trials["scenario_id"].astype(str) if "scenario_id" in trials
                        else pd.Series("", index=trials.index, dtype=object)),
        "passed": trials["passed"].fillna(False).astype(bool),
        "executed": (trials["execution_status"].astype(str) == "succeeded").to_numpy(),
        "path": trials["path"].astype(str),
        **{column: (pd.to_numeric(trials[column], errors="coerce") if column != "cost_currency"
                    else trials[column].astype(object))
           if column in trials else pd.Series(float("nan") if column != "cost_currency"
                                              else None, index=trials.index)
           for column in ("cost_total", "cost_currency", "cost_unpriced")}})
    duplicated = table[table.duplicated(["cell", "seed"], keep=False)]
    if len(duplicated):
        first = duplicated.iloc[0]
        runs = sorted(duplicated.loc[(duplicated["cell"] == first["cell"])
                                     & (duplicated["seed"] == first["seed"]), "run_id"])
        raise ConfigError(f"{len(duplicated)} trials share a cell and seed (cell {first['cell']}, "
                          f"seed {first['seed']}: runs {', '.join(runs)}); give one run or one "
                          "sweep per side", source=side)
    return table.reset_index(drop=True)


def _side(frames: Frames, table: pd.DataFrame, confidence: float) -> RunSide:
    paths = tuple(str(p) for p in frames.runs["path"].dropna()) if "path" in frames.runs else ()
    return RunSide(run_ids=tuple(str(r) for r in frames.runs["run_id"]), paths=paths,
                   trials=len(table), execution_failures=int((~table["executed"]).sum()),
                   pass_rate=proportion_interval(int(table["passed"].sum()), len(table),
                                                 confidence=confidence))


def _pair(baseline: pd.DataFrame, candidate: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    merged = baseline.merge(candidate, on=["cell", "seed"], how="outer", indicator=True,
                            suffixes=("_baseline", "_candidate"), sort=True)
    paired = merged[merged["_merge"] == "both"].drop(columns="_merge").reset_index(drop=True)
    rows = []
    for side, which in (("baseline", "left_only"), ("candidate", "right_only")):
        alone = merged[merged["_merge"] == which]
        rows.append(pd.DataFrame({"side": side, "cell": alone["cell"], "seed": alone["seed"],
                                  "trial_id": alone[f"trial_id_{side}"],
                                  "path": alone[f"path_{side}"]}))
    return paired, pd.concat(rows, ignore_index=True)


def _check_comparable(baseline: pd.DataFrame, candidate: pd.DataFrame,
                      paired: pd.DataFrame) -> None:
    """Refuse what has nothing to compare: a comparison without pairs would pass every gate for
    lack of evidence, and pairs of different scenarios compare unrelated conversations."""
    for side, table in (("baseline", baseline), ("candidate", candidate)):
        if table.empty:
            raise ConfigError(f"nothing to compare: the {side} has no trials", source=side)
    plain = {side: bool((table["cell"] == PLAIN_RUN_CELL).all())
             for side, table in (("baseline", baseline), ("candidate", candidate))}
    if plain["baseline"] != plain["candidate"]:
        run, sweep = ("baseline", "candidate") if plain["baseline"] else ("candidate", "baseline")
        raise ConfigError(f"nothing to compare: the {run} is a run and the {sweep} a sweep; "
                          "compare a run with a run, a sweep with a sweep", source="candidate")
    different = paired[paired["scenario_id_baseline"] != paired["scenario_id_candidate"]]
    if len(different):
        first = different.iloc[0]
        raise ConfigError(f"nothing to compare: different scenarios (baseline "
                          f"{first['scenario_id_baseline']!r}, candidate "
                          f"{first['scenario_id_candidate']!r} in cell {first['cell']})",
                          source="candidate")
    if paired.empty:
        raise ConfigError("nothing to compare: no trial of the candidate has the cell and seed "
                          "of a baseline trial (run both with the same seeds and matrix)",
                          source="candidate")


# --- flipped verdicts -------------------------------------------------------------------------

_FLIP_COLUMNS = ["cell", "seed", "verdict", "change", "critical", "baseline_why",
                 "candidate_why", "baseline_trial_id", "candidate_trial_id", "baseline_path",
                 "candidate_path"]


def _flips(paired: pd.DataFrame, baseline: Frames, candidate: Frames) -> pd.DataFrame:
    sides = []
    for side, frames in (("baseline", baseline), ("candidate", candidate)):
        verdicts = frames.verdicts
        table = pd.DataFrame({
            "run_id": verdicts["run_id"].astype(str), "trial_id": verdicts["trial_id"].astype(str),
            "verdict": verdicts["name"].astype(str),
            f"{side}_passed": verdicts["passed"].astype(bool),
            f"{side}_critical": verdicts["critical"].astype(bool),
            f"{side}_why": verdicts["why"].astype(object)})
        keyed = paired[["cell", "seed", f"run_id_{side}", f"trial_id_{side}", f"path_{side}"]]
        sides.append(keyed.merge(table, left_on=[f"run_id_{side}", f"trial_id_{side}"],
                                 right_on=["run_id", "trial_id"])
                     .drop(columns=["run_id", "trial_id", f"run_id_{side}"])
                     .rename(columns={f"trial_id_{side}": f"{side}_trial_id",
                                      f"path_{side}": f"{side}_path"}))
    both = sides[0].merge(sides[1], on=["cell", "seed", "verdict"])
    flipped = both[both["baseline_passed"] != both["candidate_passed"]].copy()
    flipped["change"] = np.where(flipped["baseline_passed"], "broke", "fixed")
    flipped["critical"] = flipped["candidate_critical"] | flipped["baseline_critical"]
    return flipped[_FLIP_COLUMNS].sort_values(["cell", "seed", "verdict"]).reset_index(drop=True)
