"""--only as pytest's -k reads it, and --fail-fast's count."""

from __future__ import annotations

import pytest

from voicelab.errors import ConfigError
from voicelab.runner import FailFast, TrialSelection

CELL = {"scenario": "booking", "persona": "Jordan", "environment": "office-noise"}


@pytest.mark.parametrize(("expression", "chosen"), [
    ("trial-002", [2]),
    ("TRIAL-00", [1, 2, 3]),                       # a substring, any case
    ("booking and not trial-001", [2, 3]),
    ("trial-001 or (office and trial-003)", [1, 3]),
    ("quiet", []),
    ("not (jordan or sam)", []),
])
def test_an_expression_chooses_trials_by_their_names(expression, chosen):
    assert TrialSelection.parse(expression).trials(count=3, **CELL) == chosen


def test_several_expressions_are_alternatives_and_none_is_everything():
    assert TrialSelection.parse(["trial-001", "trial-003"]).trials(count=3, **CELL) == [1, 3]
    assert TrialSelection.parse(None).everything
    assert TrialSelection.parse(None).trials(count=2, **CELL) == [1, 2]


@pytest.mark.parametrize("expression", ["", "a and", "(a", "a)", "and a", "not"])
def test_an_expression_that_does_not_parse_names_the_option(expression):
    with pytest.raises(ConfigError) as raised:
        TrialSelection.parse(expression)
    assert raised.value.key == "--only"


def test_fail_fast_counts_what_will_not_run_again():
    stop = FailFast(2)
    stop.finished(passed=False, final=False)  # inconclusive, to be retried: not yet
    stop.finished(passed=True, final=True)
    assert not stop.stopped
    stop.finished(passed=False, final=True)
    stop.finished(passed=False, final=True)
    assert stop.stopped and stop.message(3).startswith("stopped after 2 trial(s) did not pass")
    with pytest.raises(ConfigError):
        FailFast(0)
