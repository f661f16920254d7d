"""Calibration statistics checked against confusion matrices computed by hand."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from voicelab.analysis.calibration import (
    HUMAN_LABEL_COLUMNS,
    best_threshold,
    calibrate,
    cohens_kappa,
    corrected_pass_rate,
    join_labels,
    read_human_labels,
    rogan_gladen,
    threshold_sweep,
    validate_human_labels,
)
from voicelab.errors import ConfigError


def _frames(pairs: list[tuple[bool, bool]], *, criterion: str = "no_unsupported_commitments"):
    """Human labels and judge results for items whose (human pass, judge pass) are ``pairs``."""
    labels = pd.DataFrame({
        "run_id": "run-1", "trial_id": [f"t{i:03d}" for i in range(len(pairs))],
        "criterion": criterion, "human_label": ["pass" if h else "fail" for h, _ in pairs],
        "annotator": "ann", "note": "", "labeled_at": "2025-01-02T03:04:05Z"})
    judges = pd.DataFrame({
        "run_id": "run-1", "trial_id": [f"t{i:03d}" for i in range(len(pairs))],
        "name": criterion, "status": ["passed" if j else "failed" for _, j in pairs],
        "passed": [j for _, j in pairs], "label": ["pass" if j else "fail" for _, j in pairs],
        "score": np.nan, "threshold": np.nan})
    return labels, judges


def _pairs(tp: int, fn: int, fp: int, tn: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * tp + [(True, False)] * fn + [(False, True)] * fp + [(False, False)] * tn


def test_calibrate_matches_hand_computed_confusion_matrix():
    # tp=40 fn=10 fp=5 tn=45: agreement 85/100; judge pass rate .45, human pass rate .50;
    # expected agreement pe = .45*.50 + .55*.50 = .50; kappa = (.85-.50)/(1-.50) = .70;
    # sensitivity 40/50 = .8, specificity 45/50 = .9.
    labels, judges = _frames(_pairs(40, 10, 5, 45))
    report = calibrate(join_labels(labels, judges), n_bootstrap=500, seed=7)
    assert (report.tp, report.fn, report.fp, report.tn) == (40, 10, 5, 45)
    assert report.n == 100
    assert_allclose([report.agreement, report.kappa, report.sensitivity, report.specificity,
                     report.judge_pass_rate, report.human_pass_rate],
                    [0.85, 0.70, 0.8, 0.9, 0.45, 0.5], rtol=1e-12)
    assert report.kappa_ci_low < report.kappa < report.kappa_ci_high
    assert 0.4 < report.kappa_ci_low and report.kappa_ci_high < 0.95
    matrix = report.confusion_matrix()
    assert matrix.loc["pass", "fail"] == 10 and matrix.loc["fail", "pass"] == 5
    again = calibrate(join_labels(labels, judges), n_bootstrap=500, seed=7)
    assert (again.kappa_ci_low, again.kappa_ci_high) == (report.kappa_ci_low, report.kappa_ci_high)


def test_small_kappa_by_hand_and_degenerate_cases():
    # tp=3 fn=1 fp=2 tn=4 (n=10): po = .7; pe = (5*4 + 5*6)/100 = .5; kappa = .2/.5 = .4.
    human = [True] * 4 + [False] * 6
    judge = [True, True, True, False, True, True, False, False, False, False]
    assert_allclose(cohens_kappa(human, judge), 0.4, rtol=1e-12)
    # Total disagreement on a balanced sample: po = 0, pe = .5, kappa = -1; unbalanced (4/6):
    # pe = (6*4 + 4*6)/100 = .48, kappa = -.48/.52.
    balanced = [True] * 5 + [False] * 5
    assert_allclose(cohens_kappa(balanced, [not h for h in balanced]), -1.0, rtol=1e-12)
    assert_allclose(cohens_kappa(human, [not h for h in human]), -0.48 / 0.52, rtol=1e-12)
    assert np.isnan(cohens_kappa([True] * 5, [True] * 5))  # both constant: undefined


def test_rogan_gladen_by_hand_and_clipping():
    # (0.5 + 0.9 - 1) / (0.8 + 0.9 - 1) = 0.4 / 0.7
    assert_allclose(rogan_gladen(0.5, sensitivity=0.8, specificity=0.9), 0.4 / 0.7, rtol=1e-12)
    assert rogan_gladen(0.05, sensitivity=0.8, specificity=0.9) == 0.0
    assert rogan_gladen(0.99, sensitivity=0.8, specificity=0.9) == 1.0
    assert np.isnan(rogan_gladen(0.5, sensitivity=0.5, specificity=0.5))


def test_corrected_pass_rate_point_and_interval():
    labels, judges = _frames(_pairs(40, 10, 5, 45))
    calibration = join_labels(labels, judges)
    judged = [True] * 50 + [False] * 50
    result = corrected_pass_rate(judged, calibration, n_bootstrap=1000, seed=3)
    assert_allclose(result.observed, 0.5)
    assert_allclose(result.corrected, 0.4 / 0.7, rtol=1e-12)
    assert (result.sensitivity, result.specificity) == (0.8, 0.9)
    assert result.ci_low < result.corrected < result.ci_high
    assert 0.35 < result.ci_low and result.ci_high < 0.8
    assert result.to_dict()["n_calibration"] == 100


def test_join_resolves_annotators_by_majority_and_excludes_errors_and_ties():
    labels = pd.DataFrame([
        ("r", "t1", "c", "pass", "a", "", "2025-01-01T00:00:00Z"),
        ("r", "t1", "c", "pass", "b", "", "2025-01-01T00:00:00Z"),
        ("r", "t1", "c", "fail", "c", "", "2025-01-01T00:00:00Z"),
        ("r", "t2", "c", "pass", "a", "", "2025-01-01T00:00:00Z"),
        ("r", "t2", "c", "fail", "b", "", "2025-01-01T00:00:00Z"),
        ("r", "t3", "c", "FAIL", "a", "why", "2025-01-01T00:00:00+00:00"),
        ("r", "t4", "c", "pass", "a", "", "2025-01-01T00:00:00Z"),
    ], columns=HUMAN_LABEL_COLUMNS)
    judges = pd.DataFrame([
        ("r", "t1", "c", "passed", True, "pass", None, None),
        ("r", "t2", "c", "failed", False, "fail", None, None),
        ("r", "t3", "c", "error", False, None, None, None),
        ("r", "t4", "c", "failed", False, "fail", None, None),
    ], columns=["run_id", "trial_id", "name", "status", "passed", "label", "score", "threshold"])
    joined = join_labels(labels, judges)
    assert list(joined["human_label"]) == ["pass", "tie", "fail", "pass"]
    assert_allclose(joined["annotator_agreement"], [2 / 3, 0.5, 1.0, 1.0])
    assert joined["judge_passed"].isna().tolist() == [False, False, True, False]
    report = calibrate(joined, n_bootstrap=50)
    assert (report.n, report.n_human_ties, report.n_judge_errors) == (2, 1, 1)
    assert (report.tp, report.fn, report.fp, report.tn) == (1, 1, 0, 0)


def test_threshold_sweep_finds_the_threshold_humans_agree_with():
    # Humans pass exactly the items scored >= 4.
    scores = [1, 2, 3, 3, 4, 4, 5, 5]
    labels = pd.DataFrame({"run_id": "r", "trial_id": [f"t{i}" for i in range(8)],
                           "criterion": "groundedness",
                           "human_label": ["pass" if s >= 4 else "fail" for s in scores],
                           "annotator": "a", "note": "", "labeled_at": "2025-01-01"})
    judges = pd.DataFrame({"run_id": "r", "trial_id": [f"t{i}" for i in range(8)],
                           "name": "groundedness", "status": "passed", "passed": True,
                           "label": None, "score": scores, "threshold": 3.0})
    sweep = threshold_sweep(join_labels(labels, judges))
    assert list(sweep["threshold"]) == [1.0, 2.0, 3.0, 4.0, 5.0]
    at3 = sweep.set_index("threshold").loc[3.0]
    # threshold 3: judge passes 6 items, humans 4: tp=4 fp=2 tn=2 fn=0 -> agreement 6/8;
    # pe = (6*4 + 2*4)/64 = .5 -> kappa (.75-.5)/.5 = .5; specificity 2/4.
    assert_allclose([at3["agreement"], at3["kappa"], at3["specificity"]], [0.75, 0.5, 0.5])
    assert best_threshold(sweep) == 4.0
    assert sweep.set_index("threshold").loc[4.0, "kappa"] == 1.0


def test_human_label_reader_validates_the_documented_format():
    text = ("run_id,trial_id,criterion,human_label,annotator,note,labeled_at\n"
            "r1,trial-001,no_unsupported_commitments,pass,ana,,2025-03-01T10:00:00Z\n")
    frame = read_human_labels(io.StringIO(text))
    assert frame.loc[0, "human_label"] == "pass" and frame.loc[0, "note"] == ""
    bad = pd.read_csv(io.StringIO(text.replace(",pass,", ",maybe,")), dtype=str,
                      keep_default_na=False)
    with pytest.raises(ConfigError, match="row 2: human_label 'maybe'"):
        validate_human_labels(bad)
    with pytest.raises(ConfigError, match="missing columns"):
        validate_human_labels(bad.drop(columns=["annotator"]))
    twice = pd.concat([frame, frame])
    with pytest.raises(ConfigError, match="twice"):
        validate_human_labels(twice)
    with pytest.raises(ConfigError, match="ISO 8601"):
        validate_human_labels(frame.assign(labeled_at="yesterday"))


def test_calibrate_requires_one_criterion():
    labels, judges = _frames(_pairs(1, 0, 0, 1), criterion="a")
    labels_b, judges_b = _frames(_pairs(1, 0, 0, 1), criterion="b")
    joined = join_labels(pd.concat([labels, labels_b]), pd.concat([judges, judges_b]))
    with pytest.raises(ValueError, match="several criteria"):
        calibrate(joined)
    assert calibrate(joined, criterion="b", n_bootstrap=10).criterion == "b"


def test_judge_results_read_back_from_csv_keep_their_verdicts():
    labels, judges = _frames(_pairs(1, 1, 1, 1))
    judges = judges.assign(passed=judges["passed"].map({True: "True", False: "false"}))
    judges.loc[0, ["status", "passed"]] = ["error", "nan"]
    joined = join_labels(labels, judges)
    assert joined["judge_passed"].tolist() == [pd.NA, False, True, False]
    with pytest.raises(ValueError, match="not booleans"):
        join_labels(labels, judges.assign(passed="maybe"))
