"""A script line never said fails the trial (``script_turns_said``): the fake product never
says the keyword of the script's second turn, the persona asks it to repeat itself, the product
completes the call as the scenario expects, and every other verdict passes. Marked ``optional``
the line may go unsaid, and the persona stops asking for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import read_json

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "run-workload-neutral-voice.yaml"
FIRST = {"trigger": "the assistant asks for the plan",
         "response": "Please record the plan and save the reminder.",
         "keywords": ["daily plan", "reminder"]}


def script_with_second_line(*, optional: bool) -> str:
    second = {"trigger": "the assistant reads the booking code",
              "response": "What is my booking code?", "keywords": ["booking code"],
              "optional": optional}
    return f"script.turns={json.dumps([FIRST, second])}"


def verdict(report: dict, name: str) -> dict:
    return next(v for v in report["verdicts"] if v["name"] == name)


def test_an_unsaid_script_line_fails_the_trial_and_is_named(tmp_path: Path) -> None:
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path,
        overrides=[script_with_second_line(optional=False)]))
    trial = outcome.bundle_path / "trial-001"
    report = read_json(trial / "trial-report.json")
    said = verdict(report, "script_turns_said")
    assert (said["status"], said["critical"], said["observed"]) == ("failed", True, "1 of 2")
    assert "turns[1] (trigger 'the assistant reads the booking code'): 'What is my booking " \
           "code?', keywords booking code" in said["why"]
    # nothing else noticed: the call ended as expected and every other verdict passed
    assert report["exit_reason"] == "endpoint_completion"
    assert all(v["status"] == "passed" for v in report["verdicts"] if v is not said)
    assert report["status"] == "failed" and outcome.exit_code == 3
    # the recording alone says which lines were said: re-scoring judges it the same
    rescored = voicelab.rescore(outcome.bundle_path)
    again = read_json(trial / "trial-report.json")
    assert verdict(again, "script_turns_said") == said and rescored.exit_code == 3


@pytest.mark.parametrize("advisory", [False, True])
def test_an_optional_or_advisory_line_does_not_gate(tmp_path: Path, advisory: bool) -> None:
    overrides = [script_with_second_line(optional=not advisory)]
    if advisory:
        overrides.append("scenario.eval_spec.advisory_verdicts=[script_turns_said]")
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path,
        overrides=overrides))
    report = read_json(outcome.bundle_path / "trial-001" / "trial-report.json")
    said = verdict(report, "script_turns_said")
    assert outcome.exit_code == 0 and report["status"] == "passed"
    if advisory:
        assert (said["status"], said["critical"]) == ("failed", False)
    else:
        # only the required line counts; no repeat request was spent on the optional one
        assert (said["status"], said["observed"]) == ("passed", "1 of 1")
        transcript = read_json(outcome.bundle_path / "trial-001" / "transcript.json")
        assert [t["source"] for t in transcript["turns"] if t["role"] == "user"] == ["script"]
