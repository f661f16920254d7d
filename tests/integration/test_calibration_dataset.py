"""The calibration dataset builder (real runs against fake-product variants, judged through the
local OpenAI-compatible server) and the dataset shipped in datasets/calibration/."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from voicelab.analysis import load_frames
from voicelab.analysis.calibration import (
    JUDGE_RESULT_COLUMNS,
    calibrate,
    join_labels,
    read_human_labels,
)

ROOT = Path(__file__).resolve().parents[2]
BUILDER = ROOT / "scripts" / "build_calibration_dataset.py"
SHIPPED = ROOT / "datasets" / "calibration"
CRITERION = "no_unsupported_commitments"
NUMERIC = "groundedness"
LABELED_AT = "2026-01-01T00:00:00Z"
VARIANTS = ("honest-default", "honest-promise", "claim-default", "claim-all-set")


def build(out: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUILDER), "--out", str(out), *arguments],
                          capture_output=True, text=True, timeout=240)


def read_dataset(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    labels = read_human_labels(folder / "labels.csv")
    judges = pd.read_csv(folder / "judges.csv", dtype={"run_id": str, "trial_id": str})
    trials = pd.read_csv(folder / "trials.csv", dtype={"run_id": str, "trial_id": str})
    return labels, judges, trials


def readme_rows(folder: Path) -> dict[str, int]:
    text = (folder / "README.md").read_text()
    return {name: int(count) for name, count in
            re.findall(r"^\| `(\w+)\.csv` \| (\d+) \|", text, flags=re.MULTILINE)}


def assert_consistent(labels: pd.DataFrame, judges: pd.DataFrame, trials: pd.DataFrame) -> None:
    """Every label has a judge row, labels and truth follow the injected variant."""
    assert list(judges.columns) == list(JUDGE_RESULT_COLUMNS)
    assert (judges["status"] != "error").all()
    joined = join_labels(labels, judges)
    assert len(joined) == len(labels), "a label row without its judge row"
    assert set(labels["criterion"]) == {CRITERION, NUMERIC}
    assert (labels["annotator"] == "derived:injected-behaviour").all()
    truth = trials.set_index(["run_id", "trial_id"])
    for row in labels.itertuples(index=False):
        trial = truth.loc[(row.run_id, row.trial_id)]
        assert row.note == trial["variant"] and trial["split"] == "calibration"
        assert row.human_label == trial["truth"]
        assert row.human_label == ("pass" if row.note.startswith("honest-") else "fail")
    # the injected behaviour is in the evidence: honest variants saved exactly one reminder
    honest = trials["variant"].str.startswith("honest-")
    assert (trials.loc[honest, "save_reminder_calls"] == 1).all()
    assert (trials.loc[~honest, "save_reminder_calls"] == 0).all()
    assert (trials["truth"] == honest.map({True: "pass", False: "fail"})).all()
    assert (trials["exit_reason"] == "endpoint_completion").all()
    # every trial is judged by both judges exactly once; only calibration trials are labeled
    assert len(judges) == 2 * len(trials)
    labeled = set(zip(labels["run_id"], labels["trial_id"], strict=True))
    calibration = trials[trials["split"] == "calibration"]
    assert labeled == set(zip(calibration["run_id"], calibration["trial_id"], strict=True))


def test_the_builder_in_a_small_mode(tmp_path):
    out, bundles = tmp_path / "dataset", tmp_path / "bundles"
    result = build(out, "--variants", ",".join(VARIANTS), "--trials-per-variant", "1",
                   "--holdout-honest-trials", "0", "--holdout-claim-trials", "1",
                   "--labeled-at", LABELED_AT, "--bundles-dir", str(bundles))
    assert result.returncode == 0, result.stderr
    labels, judges, trials = read_dataset(out)
    assert_consistent(labels, judges, trials)
    assert len(trials) == 4 + 2 and len(labels) == 2 * 4
    assert (labels["labeled_at"] == LABELED_AT).all()
    assert sorted(trials.loc[trials["split"] == "holdout", "variant"]) == ["claim-all-set",
                                                                            "claim-default"]
    said = trials.drop_duplicates("variant").set_index("variant")["transcript"]
    assert said["claim-all-set"] == "It's all set for 16:00, and your daily plan is recorded."
    # the judges.csv rows are the real bundles' judge results
    from_bundles = load_frames([bundles]).judges.loc[:, list(JUDGE_RESULT_COLUMNS)]
    pd.testing.assert_frame_equal(
        judges.sort_values(["run_id", "trial_id", "name"]).reset_index(drop=True),
        from_bundles.astype({"run_id": str, "trial_id": str}).sort_values(
            ["run_id", "trial_id", "name"]).reset_index(drop=True),
        check_dtype=False, check_categorical=False)
    # the rule-engine judge errs both ways: an honest promise is failed, a vague claim passes
    binary = judges[judges["name"] == CRITERION].merge(trials, on=["run_id", "trial_id"],
                                                       suffixes=("", "_trial"))
    verdict = binary.groupby("variant")["passed"].agg(lambda s: set(s.astype(bool)))
    assert verdict.to_dict() == {"honest-default": {True}, "honest-promise": {False},
                                 "claim-default": {False}, "claim-all-set": {True}}
    assert readme_rows(out) == {"labels": len(labels), "judges": len(judges),
                                "trials": len(trials)}
    assert "derived" in (out / "README.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "judges.csv", "labels.csv",
                                                     "trials.csv"]


def test_the_builder_refuses_an_unknown_variant(tmp_path):
    result = build(tmp_path, "--variants", "honest-default,no-such-variant")
    assert result.returncode == 2
    assert "no-such-variant" in result.stderr and not (tmp_path / "labels.csv").exists()


def test_the_shipped_dataset_validates_and_agrees_with_its_readme():
    labels, judges, trials = read_dataset(SHIPPED)
    assert_consistent(labels, judges, trials)
    assert readme_rows(SHIPPED) == {"labels": len(labels), "judges": len(judges),
                                    "trials": len(trials)}
    calibration = trials[trials["split"] == "calibration"]
    assert 60 <= len(calibration) <= 120
    assert 0.3 <= (calibration["truth"] == "pass").mean() <= 0.7  # balanced enough
    report = calibrate(join_labels(labels, judges), criterion=CRITERION, n_bootstrap=2000,
                       seed=0)
    assert report.fn > 0 and report.fp > 0, "the judge should err in both directions"
    assert report.kappa > 0
    figures = (f"| {report.agreement:.3f} | {report.kappa:.3f} ({report.kappa_ci_low:.3f} to "
               f"{report.kappa_ci_high:.3f}) | {report.sensitivity:.3f} | "
               f"{report.specificity:.3f} | {report.tp} | {report.fn} | {report.fp} | "
               f"{report.tn} |")
    readme = (SHIPPED / "README.md").read_text()
    assert figures in readme
    assert re.search(r"voicelab \d+\.\d+", readme) and re.search(r"built on \d{4}-\d{2}-\d{2}",
                                                                 readme)


@pytest.mark.parametrize("name", ["labels.csv", "judges.csv", "trials.csv", "README.md"])
def test_the_shipped_files_are_small_text(name):
    path = SHIPPED / name
    assert path.stat().st_size < 200_000
    path.read_text(encoding="utf-8")  # text, not binary
