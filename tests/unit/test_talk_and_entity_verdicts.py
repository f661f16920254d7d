"""Talk times and crosstalk from speech segments; the entity verdicts from entity checks."""

from __future__ import annotations

import pytest

from voicelab.artifacts import EntityCheck, EntityMetrics, TurnMetrics, VoiceMetrics
from voicelab.config import EvalSpec, PersonaConfig, ScenarioConfig
from voicelab.metrics import add_words_per_minute, talk_metrics
from voicelab.scoring import deterministic_verdicts

MS = 1_000_000


def test_talk_times_and_crosstalk():
    product = [(1000 * MS, 3000 * MS), (5000 * MS, 6000 * MS)]
    # the user's channel: a turn's speech, a barge-in 500 ms over the product, and room noise
    # between turns (outside every turn's speech: not talk)
    user_channel = [(0, 900 * MS), (2500 * MS, 3500 * MS), (4000 * MS, 4200 * MS)]
    user_turns = [(0, 900 * MS), (2500 * MS, 3500 * MS)]
    talk = talk_metrics(product, user_channel, user_turns)
    assert talk.user_talk_ms == 1900.0 and talk.product_talk_ms == 3000.0
    assert talk.crosstalk_ms == 500.0
    assert talk.talk_ratio == pytest.approx(3000 / 1900, abs=1e-4)


def test_no_user_speech_has_no_talk_ratio():
    talk = talk_metrics([(0, MS)], [], [])
    assert talk.user_talk_ms == 0.0 and talk.talk_ratio is None and talk.crosstalk_ms == 0.0


def _turn(turn_id: str, *, words: str, start: float, end: float, tail: float,
          status: str = "completed", interrupted: bool = False) -> TurnMetrics:
    return TurnMetrics(turn_id=turn_id, index=0, status=status, output_audio_seconds=1.0,
                       interrupted=interrupted, transcript=words, speech_start_ms=start,
                       playback_end_ms=end, trailing_silence_ms=tail)


def test_words_per_minute_over_completed_uninterrupted_responses():
    metrics = VoiceMetrics.model_construct(turns=[
        _turn("turn-000", words="one two three four five", start=0.0, end=1200.0, tail=200.0),
        _turn("turn-001", words="six seven eight nine ten", start=2000.0, end=3100.0,
              tail=100.0),
        _turn("turn-002", words="cut off here", start=4000.0, end=4500.0, tail=0.0,
              interrupted=True)],
        talk=talk_metrics([], [], []))
    add_words_per_minute(metrics)
    assert metrics.talk is not None
    assert metrics.talk.product_words == 10 and metrics.talk.product_speaking_ms == 2000.0
    assert metrics.talk.product_words_per_minute == 300.0


def _check(name: str, correct: bool | None, *, direction: str = "input") -> EntityCheck:
    return EntityCheck(name=name, kind="number", value="4471", direction=direction,
                       turn_id="turn-001", source="wire" if correct is not None else None,
                       correct=correct, why="heard" if correct else "not heard")


def _verdicts(entities: EntityMetrics, **spec: bool) -> dict[str, dict]:
    scenario = ScenarioConfig(id="s", eval_spec=EvalSpec(**spec), entities=[
        {"name": "a", "value": "4471", "kind": "number"}])
    verdicts = deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="script_exhaustion", outcome_status="unavailable", outcome=None,
        outcome_error=None, turn_metrics=[], entities=entities)
    return {v.name: v.model_dump() for v in verdicts}


def test_entity_verdicts_pass_fail_and_stay_undecided_for_the_right_reason():
    right, wrong, unknown = _check("a", True), _check("b", False), _check("c", None)
    heard = _verdicts(EntityMetrics(input=[right]), entities_heard=True)["entities_heard"]
    assert heard["status"] == "passed"
    failed = _verdicts(EntityMetrics(input=[right, wrong, unknown]),
                       entities_heard=True)["entities_heard"]
    assert failed["status"] == "failed" and failed["why"] == "b in turn-001: not heard"
    undecided = _verdicts(EntityMetrics(input=[right, unknown]),
                          entities_heard=True)["entities_heard"]
    assert undecided["status"] == "inconclusive"
    nothing = _verdicts(EntityMetrics(not_said=["a"]), entities_heard=True)["entities_heard"]
    assert nothing["status"] == "inconclusive" and "(a)" in nothing["why"]
    spoken = _verdicts(EntityMetrics(output=[_check("a", False, direction="output")]),
                       entities_spoken=True)
    assert spoken["entities_spoken"]["status"] == "failed" and "entities_heard" not in spoken


def test_entity_verdicts_need_entities():
    with pytest.raises(ValueError, match="need the scenario's 'entities'"):
        ScenarioConfig(id="s", eval_spec=EvalSpec(entities_heard=True))
    with pytest.raises(ValueError, match="its own name"):
        ScenarioConfig(id="s", entities=[{"name": "a", "value": "1"}, {"name": "a", "value": "2"}])


def test_entities_spoken_without_the_recognizer_names_the_install_line(monkeypatch):
    import voicelab.speech
    from voicelab.errors import MissingDependencyError
    from voicelab.metrics import check_entities

    monkeypatch.setattr(voicelab.speech, "recognizer_installed", lambda: False)
    scenario = ScenarioConfig(id="s", eval_spec=EvalSpec(entities_spoken=True), entities=[
        {"name": "a", "value": "4471", "kind": "number"}])
    with pytest.raises(MissingDependencyError, match=r"voicelab\[speech\]"):
        check_entities(scenario, source="scenario.yaml")
    check_entities(scenario.model_copy(update={"eval_spec": EvalSpec(entities_heard=True)}),
                   source="scenario.yaml")  # heard: input transcripts need no recognizer


def test_tool_values_of_a_hostile_product_are_walked_within_bounds():
    from voicelab.metrics._entities import MAX_TOOL_NODES, _tool_values

    deep: object = "4471"
    for _ in range(100_000):  # far deeper than Python's recursion limit
        deep = [deep]
    assert list(_tool_values(deep)) == []  # the value is past the node budget, never reached
    assert list(_tool_values({"a": {"code": "K7Q2", "n": 12, "flag": True,
                                    "long": "x1" * 40}})) == ["K7Q2", "12"]
    assert len(list(_tool_values(list(range(3 * MAX_TOOL_NODES))))) < MAX_TOOL_NODES


def test_an_entity_check_that_cannot_be_judged_is_warned_about():
    from voicelab.config import TranscriptionConfig
    from voicelab.metrics import entity_warnings

    scenario = ScenarioConfig(id="s", eval_spec=EvalSpec(entities_heard=True), entities=[
        {"name": "a", "value": "4471", "kind": "number"}])
    wire = TranscriptionConfig(product_input="wire")
    [line] = entity_warnings(scenario, wire, adapter="twilio", input_transcripts=False)
    assert "adapter 'twilio' sends no input transcript" in line
    assert "transcription.product_input: auto" in line
    assert entity_warnings(scenario, wire, adapter="fake", input_transcripts=True) == []
    auto = entity_warnings(scenario, TranscriptionConfig(), adapter="twilio",
                           input_transcripts=False)  # the delivered audio recognized
    from voicelab.speech import recognizer_installed

    assert auto == ([] if recognizer_installed() else [auto[0]])
    assert all("pip install 'voicelab[speech]'" in line for line in auto)
