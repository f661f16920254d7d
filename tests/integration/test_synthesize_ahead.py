"""Which turns are synthesized before the call: every planned turn (a script's turns and its
repeat request) for a provider that synthesizes ahead, only the turns spoken for one that
declares ``synthesize_ahead = False`` (tone: ~1 ms a turn)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import voicelab
from voicelab.speech import _tone as tone_module

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
REPEAT = "Sorry, could you repeat that?"


@pytest.fixture
def synthesized(monkeypatch):
    """The texts the tone provider synthesized, in order."""
    texts: list[str] = []
    real = tone_module.tone_speech

    def spy(text, *, seed, **prosody):
        texts.append(text)
        return real(text, seed=seed, **prosody)

    monkeypatch.setattr(tone_module, "tone_speech", spy)
    return texts


def _spoken(outcome) -> list[str]:
    folder = outcome.bundle_path / outcome.trials[0].report.trial_id
    events = [json.loads(line) for line in (folder / "voice-events.jsonl").open()]
    return [e["attributes"]["text"] for e in events if e["event_type"] == "speech.synthesized"]


def test_tone_synthesizes_a_turn_when_it_is_spoken_not_the_unspoken_repeat_request(
        synthesized, tmp_path):
    assert tone_module.ToneSpeechProvider.synthesize_ahead is False
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(trials=1, artifacts_dir=tmp_path))
    assert outcome.exit_code == 0
    assert _spoken(outcome) == ["Please record the plan and save the reminder."]
    assert synthesized == _spoken(outcome)  # the repeat request was never needed nor made


def test_a_provider_that_synthesizes_ahead_gets_every_planned_turn_before_the_call(
        synthesized, tmp_path, monkeypatch):
    monkeypatch.setattr(tone_module.ToneSpeechProvider, "synthesize_ahead", True)
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(trials=1, artifacts_dir=tmp_path))
    assert outcome.exit_code == 0
    assert _spoken(outcome) == ["Please record the plan and save the reminder."]
    assert sorted(synthesized) == sorted([*_spoken(outcome), REPEAT])


def test_what_is_synthesized_ahead_stops_at_the_trials_time_limit(synthesized, tmp_path,
                                                                   monkeypatch):
    """Twelve turns of about 3 s each, a 10 s scenario: the turns made before the call add up
    to about the limit (a few more at most, being made when it was reached), not the script."""
    monkeypatch.setattr(tone_module.ToneSpeechProvider, "synthesize_ahead", True)
    turns = [f"Please record plan number {n} and save the reminder for it today." for n in
             range(12)]
    script = "script.turns=[" + ", ".join(f'{{"response": "{text}"}}' for text in turns) + "]"
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path,
        overrides=[script, "scenario.eval_spec.limits.max_time_seconds=10"]))
    assert outcome.trials[0].report.execution_status == "succeeded"
    made_ahead = [text for text in synthesized if text in turns]
    assert made_ahead[:4] == turns[:4]  # in script order
    assert len(set(made_ahead)) < 8
