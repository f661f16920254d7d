"""voicelab.TrialProgress: the tqdm bar behind the CLI's progress and the notebooks'."""

from __future__ import annotations

import io
from types import SimpleNamespace

import voicelab


def _result(trial_id: str, passed: bool) -> SimpleNamespace:
    return SimpleNamespace(report=SimpleNamespace(passed=passed),
                           summary=SimpleNamespace(trial_id=trial_id))


def test_the_bar_counts_trials_and_failures_and_closes_at_the_end():
    stream = io.StringIO()
    progress = voicelab.TrialProgress(auto=False, file=stream)
    progress(_result("trial-002", True), 3, 4)  # a resumed run starts from what it has
    progress(_result("trial-004", False), 4, 4)
    text = stream.getvalue()
    assert "4/4" in text and "trial-004 FAIL, 1 failed" in text
    assert progress._bar is None  # closed


def test_a_disabled_bar_draws_nothing():
    stream = io.StringIO()
    progress = voicelab.TrialProgress(auto=False, file=stream, enabled=False)
    progress(_result("trial-001", True), 1, 1)
    assert stream.getvalue() == ""
