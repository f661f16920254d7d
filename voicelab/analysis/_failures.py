"""Why each failing trial failed, in words: its execution failures, failed verdicts and judges."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..artifacts import TRANSCRIPT_MD, TRIAL_REPORT, read_json, read_member
from ._frames import Frames

FAILURE_COLUMNS = ("run_id", "cell", "label", "trial_id", "seed", "execution_status",
                   "exit_reason", "reasons", "path")


def failing_trials(frames: Frames) -> pd.DataFrame:
    """One row per trial that did not pass, in frame order. ``reasons`` is a list of lines:
    every execution failure (``kind: message``), then each failed verdict (critical first,
    with its ``why``), then each judge that did not pass (with its rationale or error)."""
    trials = frames.trials
    if trials.empty:
        return pd.DataFrame(columns=list(FAILURE_COLUMNS))
    failing = trials[~trials["passed"].fillna(False).astype(bool).to_numpy()]
    verdicts = frames.verdicts[~frames.verdicts["passed"]]
    judges = frames.judges[frames.judges["status"].astype(object) != "passed"]
    rows = []
    for trial in failing.itertuples(index=False):
        key = (trial.run_id, trial.trial_id)
        reasons = []
        report_path = Path(str(trial.path)) / TRIAL_REPORT
        if report_path.is_file():
            for failure in read_json(report_path).get("failures") or []:
                reasons.append(f"{failure.get('kind')}: {failure.get('message')}")
        mine = verdicts[(verdicts["run_id"] == key[0]).to_numpy()
                        & (verdicts["trial_id"] == key[1]).to_numpy()]
        for verdict in mine.sort_values("critical", ascending=False, kind="stable").itertuples():
            advisory = "" if verdict.critical else " (advisory)"
            reasons.append(f"verdict {verdict.name}{advisory}: {verdict.why or 'failed'}")
        mine_judges = judges[(judges["run_id"] == key[0]).to_numpy()
                             & (judges["trial_id"] == key[1]).to_numpy()]
        for judge in mine_judges.itertuples():
            why = judge.error if isinstance(judge.error, str) and judge.error else \
                judge.rationale if isinstance(judge.rationale, str) else ""
            reasons.append(f"judge {judge.name}: {judge.status}" + (f": {why}" if why else ""))
        rows.append({"run_id": trial.run_id, "cell": trial.cell,
                     "label": trial._asdict().get("label"), "trial_id": trial.trial_id,
                     "seed": trial.seed, "execution_status": trial.execution_status,
                     "exit_reason": trial.exit_reason,
                     "reasons": reasons or [f"did not pass ({trial.exit_reason})"],
                     "path": trial.path})
    return pd.DataFrame(rows, columns=list(FAILURE_COLUMNS))


def transcript_markdown(trial_dir: str | Path) -> str:
    """The trial's ``transcript.md`` (what both sides said, in time order), or a note."""
    path = Path(trial_dir) / TRANSCRIPT_MD
    if not path.is_file():
        return "_(no transcript.md in this trial folder)_"
    lines = read_member(path).decode("utf-8", errors="replace").splitlines()
    # the heading repeats what the report's own heading says
    return "\n".join(line for line in lines if not line.startswith("# ")).strip()


__all__ = ["FAILURE_COLUMNS", "failing_trials", "transcript_markdown"]
