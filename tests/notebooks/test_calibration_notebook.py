"""notebooks/calibration.ipynb: committed clean, executed by papermill, and its numbers checked
against an independent computation from the CSVs (plain ``csv``, no voicelab calibration code).

CI also runs it as it is with ``pytest --nbval-lax --nbval-current-env notebooks/calibration.ipynb``.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "calibration.ipynb"
DATASET = ROOT / "datasets" / "calibration"
BUILDER = ROOT / "scripts" / "build_calibration_dataset.py"
CRITERION = "no_unsupported_commitments"
NUMERIC = "groundedness"
LABEL_HEADER = "run_id,trial_id,criterion,human_label,annotator,note,labeled_at\n"
JUDGE_HEADER = "run_id,trial_id,name,status,passed,label,score,threshold\n"


def execute(tmp_path: Path, *, cwd: Path = NOTEBOOK.parent,
            **parameters) -> tuple[dict, nbformat.NotebookNode]:
    output = tmp_path / "calibration.out.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(output), parameters=parameters,
                               cwd=str(cwd), progress_bar=False,
                               request_save_on_cell_execute=False)
    notebook = nbformat.read(output, as_version=4)
    found = [o["data"]["application/json"] for cell in notebook.cells
             if cell.cell_type == "code" for o in cell.get("outputs", [])
             if "application/json" in o.get("data", {})]
    assert len(found) == 1, "the notebook displays exactly one JSON summary"
    return found[0], notebook


def png_count(notebook: nbformat.NotebookNode) -> int:
    return sum(1 for cell in notebook.cells if cell.cell_type == "code"
               for o in cell.get("outputs", []) if "image/png" in o.get("data", {}))


# --- the independent computation ------------------------------------------------------------

def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def by_hand(labels_path: Path, judges_path: Path, criterion: str) -> dict[str, float]:
    """Confusion counts, kappa, sensitivity, specificity and the Rogan-Gladen rate, single
    annotator per item (what the shipped dataset and the small test data hold)."""
    human = {(r["run_id"], r["trial_id"]): r["human_label"] == "pass"
             for r in rows(labels_path) if r["criterion"] == criterion}
    verdicts = {(r["run_id"], r["trial_id"]): r["passed"] == "True"
                for r in rows(judges_path) if r["name"] == criterion and r["status"] != "error"}
    pairs = [(human[key], verdicts[key]) for key in human if key in verdicts]
    tp = sum(h and j for h, j in pairs)
    fn = sum(h and not j for h, j in pairs)
    fp = sum(j and not h for h, j in pairs)
    tn = sum(not h and not j for h, j in pairs)
    n = tp + fn + fp + tn
    observed = (tp + tn) / n
    chance = ((tp + fn) * (tp + fp) + (fp + tn) * (fn + tn)) / n**2
    sensitivity, specificity = tp / (tp + fn), tn / (tn + fp)
    unlabeled = [passed for key, passed in verdicts.items() if key not in human]
    judged_rate = sum(unlabeled) / len(unlabeled)
    corrected = (judged_rate + specificity - 1) / (sensitivity + specificity - 1)
    return {"n": n, "tp": tp, "fn": fn, "fp": fp, "tn": tn, "agreement": observed,
            "kappa": (observed - chance) / (1 - chance), "sensitivity": sensitivity,
            "specificity": specificity, "observed": judged_rate, "n_judged": len(unlabeled),
            "corrected": min(1.0, max(0.0, corrected))}


def best_threshold_by_hand(labels_path: Path, judges_path: Path, criterion: str) -> float:
    human = {(r["run_id"], r["trial_id"]): r["human_label"] == "pass"
             for r in rows(labels_path) if r["criterion"] == criterion}
    scores = {(r["run_id"], r["trial_id"]): float(r["score"])
              for r in rows(judges_path) if r["name"] == criterion and r["status"] != "error"}
    keys = [key for key in human if key in scores]
    ranked = []
    for threshold in sorted({scores[key] for key in keys}):
        agree = [human[key] == (scores[key] >= threshold) for key in keys]
        human_rate = sum(human[key] for key in keys) / len(keys)
        judge_rate = sum(scores[key] >= threshold for key in keys) / len(keys)
        chance = human_rate * judge_rate + (1 - human_rate) * (1 - judge_rate)
        observed = sum(agree) / len(keys)
        kappa = (observed - chance) / (1 - chance) if chance < 1 else -math.inf
        ranked.append((-kappa, -observed, threshold))
    return min(ranked)[2]


# --- tests ----------------------------------------------------------------------------------

def test_committed_notebook_is_clean_and_parameterized():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    tagged = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert notebook.metadata.kernelspec.name == "python3"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "clear the outputs"
    parameters = papermill.inspect_notebook(str(NOTEBOOK))
    assert {"labels_path", "judges_path", "run_dirs", "criterion", "n_bootstrap",
            "seed"} <= set(parameters)
    assert parameters["labels_path"]["default"].strip("'\"") == "datasets/calibration/labels.csv"
    # typed for `papermill --help-notebook`
    assert {name: p["inferred_type_name"] for name, p in parameters.items()} == {
        "labels_path": "str", "judges_path": "str", "run_dirs": "list[str]",
        "trials_path": "str", "criterion": "str", "numeric_criterion": "str",
        "n_bootstrap": "int", "seed": "int", "confidence": "float", "output_path": "str"}


def test_defaults_on_the_shipped_dataset_match_a_hand_computation(tmp_path):
    summary, notebook = execute(tmp_path, n_bootstrap=500)
    labels, judges = DATASET / "labels.csv", DATASET / "judges.csv"
    expected = by_hand(labels, judges, CRITERION)
    for key in ("n", "tp", "fn", "fp", "tn"):
        assert summary[key] == expected[key], key
    for key in ("agreement", "kappa", "sensitivity", "specificity"):
        assert summary[key] == pytest.approx(expected[key], abs=1e-12), key
    assert summary["kappa_ci_low"] <= summary["kappa"] <= summary["kappa_ci_high"]
    assert summary["n_bootstrap"] == 500
    assert summary["best_threshold"] == best_threshold_by_hand(labels, judges, NUMERIC)
    corrected = summary["corrected"]
    assert corrected["n_judged"] == expected["n_judged"] > 0  # the unlabeled (holdout) trials
    assert corrected["observed"] == pytest.approx(expected["observed"], abs=1e-12)
    assert corrected["corrected"] == pytest.approx(expected["corrected"], abs=1e-12)
    assert corrected["ci_low"] <= corrected["corrected"] <= corrected["ci_high"]
    truth = {(r["run_id"], r["trial_id"]): r["truth"] for r in rows(DATASET / "trials.csv")
             if r["split"] == "holdout"}
    assert summary["true_pass_rate"] == pytest.approx(
        sum(t == "pass" for t in truth.values()) / len(truth))
    assert png_count(notebook) == 3  # confusion heatmap, threshold sweep, corrected pass rate


def test_runs_from_the_repository_root_and_writes_the_calibration_for_run(tmp_path):
    """papermill from the checkout's root (the default paths are found from there too), and
    output_path: the JSON `voice-evaluator run --calibration` reads."""
    from voicelab.scoring import read_calibration

    target = tmp_path / "calibration.json"
    summary, _ = execute(tmp_path, cwd=ROOT, n_bootstrap=100, output_path=str(target))
    calibration = read_calibration(target)
    assert calibration.criterion == CRITERION
    assert (calibration.tp, calibration.fn, calibration.fp, calibration.tn) == (
        summary["tp"], summary["fn"], summary["fp"], summary["tn"])


def test_own_labels_with_a_tie_a_judge_error_and_no_sweep(tmp_path):
    labels = tmp_path / "labels.csv"
    at = "2026-01-02T03:04:05Z"
    human = {"t1": "pass", "t2": "pass", "t3": "fail", "t4": "fail", "t5": "fail", "t6": "pass",
             "t7": "pass"}
    labels.write_text(LABEL_HEADER + "".join(f"r,{t},polite,{label},ana,,{at}\n"
                                             for t, label in human.items())
                      + f"r,t8,polite,pass,ana,,{at}\nr,t8,polite,fail,bo,,{at}\n")
    judges = tmp_path / "judges.csv"
    verdicts = {"t1": True, "t2": True, "t3": False, "t4": False, "t5": True, "t6": False,
                "t8": True, "t9": True, "t10": False}
    judges.write_text(JUDGE_HEADER + "r,t7,polite,error,False,,,\n" + "".join(
        f"r,{t},polite,{'passed' if v else 'failed'},{v},{'pass' if v else 'fail'},"
        f"{float(v)},\n" for t, v in verdicts.items()))
    summary, notebook = execute(tmp_path, labels_path=str(labels), judges_path=str(judges),
                                trials_path="", criterion="polite", numeric_criterion="",
                                n_bootstrap=300, seed=3)
    # usable items t1..t6 (t7: the judge errored; t8: the annotators tie)
    assert (summary["tp"], summary["fn"], summary["fp"], summary["tn"]) == (2, 1, 1, 2)
    assert summary["n_judge_errors"] == 1 and summary["n_human_ties"] == 1
    assert summary["kappa"] == pytest.approx(1 / 3)
    assert summary["sensitivity"] == pytest.approx(2 / 3)
    assert summary["specificity"] == pytest.approx(2 / 3)
    assert summary["best_threshold"] is None and summary["true_pass_rate"] is None
    # the judged sample: t9 and t10, the only verdicts nobody labeled
    assert summary["corrected"]["n_judged"] == 2
    assert summary["corrected"]["observed"] == pytest.approx(0.5)
    assert summary["corrected"]["corrected"] == pytest.approx((0.5 + 2 / 3 - 1) / (1 / 3))
    assert png_count(notebook) == 2  # no sweep plot


def test_judges_from_run_bundles(tmp_path):
    """run_dirs: the judge results come from real bundles (load_frames), not a CSV."""
    out, bundles = tmp_path / "dataset", tmp_path / "bundles"
    subprocess.run([sys.executable, str(BUILDER), "--out", str(out), "--bundles-dir",
                    str(bundles), "--variants", "honest-default,claim-all-set",
                    "--trials-per-variant", "1", "--holdout-honest-trials", "0",
                    "--holdout-claim-trials", "0", "--labeled-at", "2026-01-01T00:00:00Z"],
                   check=True, capture_output=True, timeout=240)
    summary, _ = execute(tmp_path, labels_path=str(out / "labels.csv"), judges_path="",
                         run_dirs=[str(bundles)], trials_path="", n_bootstrap=200)
    # the honest product is passed; the vague claim without a tool call slips through too
    assert (summary["tp"], summary["fn"], summary["fp"], summary["tn"]) == (1, 0, 1, 0)
    assert summary["kappa"] == pytest.approx(0.0)
    assert summary["best_threshold"] == 5.0  # groundedness: 5 (honest) vs 3.5 (vague claim)
    # every judged trial is labeled: the judged sample is all verdicts; the judge is no better
    # than chance (sensitivity + specificity = 1), so there is no corrected rate
    assert summary["corrected"]["n_judged"] == 2
    assert summary["corrected"]["corrected"] is None
