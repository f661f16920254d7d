"""The calibration dataset's figures and its README.

What notebooks/calibration.ipynb computes with its defaults on the built files (agreement,
kappa, the threshold sweep, the corrected pass rate of the holdout trials), written into the
README from its template, ``calibration_dataset_README.md.in``. Used by
``build_calibration_dataset.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from _calibration_judge import (
    BINARY_JUDGE,
    CRITERIA,
    GROUNDEDNESS_THRESHOLD,
    NUMERIC_JUDGE,
)
from _calibration_variants import ANNOTATOR, Variant

from voicelab.analysis.calibration import (
    best_threshold,
    calibrate,
    corrected_pass_rate,
    join_labels,
    threshold_sweep,
)

N_BOOTSTRAP, BOOTSTRAP_SEED = 2000, 0  # the notebook's defaults: the README quotes its numbers


def measure(labels: pd.DataFrame, judges: pd.DataFrame, trials: pd.DataFrame
            ) -> dict[str, Any]:
    """What notebooks/calibration.ipynb computes with its defaults on these files."""
    joined = join_labels(labels, judges)
    options = {"n_bootstrap": N_BOOTSTRAP, "seed": BOOTSTRAP_SEED}
    figures: dict[str, Any] = {
        BINARY_JUDGE: calibrate(joined, criterion=BINARY_JUDGE, **options).to_dict(),
        NUMERIC_JUDGE: calibrate(joined, criterion=NUMERIC_JUDGE, **options).to_dict()}
    sweep = threshold_sweep(joined, criterion=NUMERIC_JUDGE)
    if not sweep.empty:
        best = best_threshold(sweep)
        figures["sweep"] = sweep.round(4).to_dict(orient="records")
        figures["best_threshold"] = best
    labeled = set(zip(labels["run_id"], labels["trial_id"], strict=True))
    binary = judges[judges["name"] == BINARY_JUDGE]
    unlabeled = binary[[key not in labeled for key in zip(binary["run_id"], binary["trial_id"],
                                                          strict=True)]]
    if not unlabeled.empty:
        corrected = corrected_pass_rate(unlabeled["passed"].astype(bool).to_numpy(), joined,
                                        criterion=BINARY_JUDGE, **options)
        holdout = trials[trials["split"] == "holdout"]
        figures["holdout"] = {**corrected.to_dict(),
                              "true_pass_rate": float((holdout["truth"] == "pass").mean())}
    return figures


def _f(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _variant_rows(variants: Sequence[Variant], judges: pd.DataFrame,
                  trials: pd.DataFrame) -> list[str]:
    merged = trials[["run_id", "trial_id", "variant"]].merge(judges, on=["run_id", "trial_id"])
    rows = []
    for v in variants:
        mine = merged[merged["variant"] == v.name]
        binary = mine[mine["name"] == BINARY_JUDGE]
        scores = sorted(set(mine.loc[mine["name"] == NUMERIC_JUDGE, "score"].astype(float)))
        split = trials.loc[trials["variant"] == v.name, "split"]
        rows.append(
            f"| `{v.name}` | {'yes' if v.saves_reminder else 'no (`claim_without_tool`)'} | "
            f"\"{v.spoken()}\" | {v.truth} | {int((split == 'calibration').sum())} | "
            f"{int((split == 'holdout').sum())} | {int(binary['passed'].astype(bool).sum())}/"
            f"{len(binary)} | {', '.join(f'{s:g}' for s in scores)} |")
    return rows


def write_readme(out: Path, *, variants: Sequence[Variant], labels: pd.DataFrame,
                 judges: pd.DataFrame, trials: pd.DataFrame,
                 provenance: Mapping[str, Any]) -> dict[str, Any]:
    figures = measure(labels, judges, trials)
    binary, numeric = figures[BINARY_JUDGE], figures[NUMERIC_JUDGE]
    calibration = trials[trials["split"] == "calibration"]
    holdout = trials[trials["split"] == "holdout"]
    sweep_rows = [f"| {r['threshold']:g} | {_f(r['agreement'])} | {_f(r['kappa'])} | "
                  f"{_f(r['sensitivity'])} | {_f(r['specificity'])} |"
                  for r in figures.get("sweep", [])]
    if "holdout" in figures:
        h = figures["holdout"]
        corrected_text = (
            "| judged trials | calibration trials | judge-reported pass rate | corrected pass "
            "rate | 95% CI | true pass rate (injected) |\n|---|---|---|---|---|---|\n"
            f"| {h['n_judged']} | {h['n_calibration']} | {_f(h['observed'])} | "
            f"{_f(h['corrected'])} | {_f(h['ci_low'])} to {_f(h['ci_high'])} | "
            f"{_f(h['true_pass_rate'])} |")
    else:
        corrected_text = "This build has no holdout trials, so no corrected pass rate."
    best = figures.get("best_threshold")
    text = README.format(
        **provenance, n_trials=len(trials), n_calibration=len(calibration),
        n_holdout=len(holdout), n_labels=len(labels), n_judges=len(judges),
        n_variants=len(variants), binary=BINARY_JUDGE, numeric=NUMERIC_JUDGE,
        criteria=CRITERIA, annotator=ANNOTATOR, threshold=f"{GROUNDEDNESS_THRESHOLD:g}",
        variant_rows="\n".join(_variant_rows(variants, judges, trials)),
        n=binary["n"], tp=binary["tp"], fn=binary["fn"], fp=binary["fp"], tn=binary["tn"],
        agreement=_f(binary["agreement"]), kappa=_f(binary["kappa"]),
        kappa_low=_f(binary["kappa_ci_low"]), kappa_high=_f(binary["kappa_ci_high"]),
        sensitivity=_f(binary["sensitivity"]), specificity=_f(binary["specificity"]),
        g_agreement=_f(numeric["agreement"]), g_kappa=_f(numeric["kappa"]),
        g_sensitivity=_f(numeric["sensitivity"]), g_specificity=_f(numeric["specificity"]),
        best="n/a" if best is None else f"{best:g}", sweep_rows="\n".join(sweep_rows),
        corrected_text=corrected_text, n_bootstrap=N_BOOTSTRAP, bootstrap_seed=BOOTSTRAP_SEED)
    (out / "README.md").write_text(text)
    return figures


#: The dataset README, filled in by ``write_readme`` (str.format fields).
README = (Path(__file__).with_name("calibration_dataset_README.md.in")).read_text(encoding="utf-8")
