"""The menu verdicts over constructed evidence: each passes for a menu that behaves, fails for
the fault it names, is inconclusive with nothing to judge (never passed), not applicable on a
recorded call that lacks its evidence, and omitted when the scenario does not ask for it."""

from __future__ import annotations

from typing import Any

import pytest

from voicelab.artifacts import TranscriptTurn, TurnMetrics
from voicelab.config import PersonaConfig, ScenarioConfig
from voicelab.scoring import BUILTIN_VERDICTS, TrialEvidence, judge_verdicts, text_readers
from voicelab.scoring._ivr_verdicts import says

IVR = {"prompts": [{"before_turn": 1, "words": ["billing", "press one"]},
                   {"before_turn": 2, "words": ["agent"]}],
       "keys_accepted": True, "agent_words": ["how can I help"], "max_seconds_to_agent": 20}
WORDS = {"turn-000": "Welcome. For billing, press one.",
         "turn-001": "Billing. For an agent, press two.",
         "turn-002": "Connecting you. How can I help you today?"}


def _row(turn_id: str, index: int, *, speech_ms: float, **keys: Any) -> TurnMetrics:
    return TurnMetrics(turn_id=turn_id, index=index, status="incomplete",
                       output_audio_seconds=2.0, interrupted=False, speech_start_ms=speech_ms,
                       stamp_error_bound_ms=2.0, timing_degraded=False, **keys)


def _rows(**changes: dict[str, Any]) -> list[TurnMetrics]:
    rows = {
        "turn-000": {"speech_ms": 1200.0, "key_turn_id": "turn-001", "key_digits": "1",
                     "key_barge_in": True, "key_to_speech_ms": 1046.0,
                     "key_stop_latency_ms": 2.5},
        "turn-001": {"speech_ms": 3200.0, "key_turn_id": "turn-002", "key_digits": "2",
                     "key_barge_in": False, "key_to_speech_ms": 1046.0},
        "turn-002": {"speech_ms": 10500.0}}
    for turn_id, change in changes.items():
        rows[turn_id].update(change)
    return [_row(turn_id, index, **fields) for index, (turn_id, fields) in enumerate(rows.items())]


def _verdicts(*, ivr: dict[str, Any] | None = IVR, words: dict[str, str] | None = None,
              rows: list[TurnMetrics] | None = None, exit_reason: str = "endpoint_completion",
              connected_ms: float | None = 1100.0) -> dict[str, Any]:
    scenario = ScenarioConfig.model_validate({"id": "menu", "eval_spec": {"ivr": ivr}})
    transcript = [TranscriptTurn(turn_id=turn_id, index=i, role="assistant", text=text)
                  for i, (turn_id, text) in enumerate((WORDS if words is None
                                                       else words).items())]
    evidence = TrialEvidence(scenario=scenario, persona=PersonaConfig(name="p"),
                             transcript=transcript, exit_reason=exit_reason,
                             turn_metrics=_rows() if rows is None else rows,
                             connected_ms=connected_ms)
    return {v.name: v for v in judge_verdicts(evidence, BUILTIN_VERDICTS)}


def test_a_healthy_menu_passes_all_three():
    verdicts = _verdicts()
    assert {name: v.status for name, v in verdicts.items()} == {
        "prompt_heard": "passed", "keys_accepted": "passed", "reached_agent": "passed"}
    assert verdicts["reached_agent"].observed == 9.4  # 10.5 s - 1.1 s from connect


def test_the_verdicts_are_omitted_when_not_asked_for():
    assert _verdicts(ivr=None) == {}
    assert set(_verdicts(ivr={"keys_accepted": True})) == {"keys_accepted"}


def test_a_prompt_missing_its_words_fails_naming_them():
    verdict = _verdicts(words={**WORDS, "turn-000": "Welcome. For sales, press three."}
                        )["prompt_heard"]
    assert verdict.status == "failed" and "'billing'" in verdict.why
    assert "'press one'" in verdict.why and verdict.observed == [False, True]


def test_a_prompt_without_words_is_inconclusive_and_a_missing_prompt_fails():
    assert _verdicts(words={**WORDS, "turn-001": ""})["prompt_heard"].status == "inconclusive"
    missing = _verdicts(words={"turn-000": WORDS["turn-000"]})["prompt_heard"]
    assert missing.status == "failed" and "said nothing" in missing.why


@pytest.mark.parametrize("change, reason", [
    ({"turn-001": {"key_to_speech_ms": None}}, "never spoke again"),  # ignored the key
    ({"turn-001": {"key_to_speech_ms": 6200.0}}, "spoke again 6200 ms"),  # too late
    ({"turn-000": {"key_stop_latency_ms": 2400.0}}, "stopped its prompt 2400 ms"),  # talked on
])
def test_keys_the_menu_did_not_act_on_fail(change, reason):
    verdicts = _verdicts(rows=_rows(**change))
    assert verdicts["keys_accepted"].status == "failed" and reason in verdicts["keys_accepted"].why
    assert verdicts["prompt_heard"].status == "passed"


def test_a_degraded_timing_near_the_limit_is_inconclusive_and_far_from_it_decided():
    near = {"turn-001": {"key_to_speech_ms": 5010.0}}
    rows = _rows(**near)
    rows[1] = rows[1].model_copy(update={"timing_degraded": True, "stamp_error_bound_ms": 80.0})
    assert _verdicts(rows=rows)["keys_accepted"].status == "inconclusive"
    far = _rows(**{"turn-001": {"key_to_speech_ms": 9000.0}})
    far[1] = far[1].model_copy(update={"timing_degraded": True, "stamp_error_bound_ms": 80.0})
    assert _verdicts(rows=far)["keys_accepted"].status == "failed"


def test_no_key_pressed_is_inconclusive_and_not_applicable_on_a_recorded_call():
    rows = [_row("turn-000", 0, speech_ms=1000.0)]
    assert _verdicts(rows=rows)["keys_accepted"].status == "inconclusive"
    recorded = _verdicts(rows=rows, exit_reason="call_ended", connected_ms=None)
    assert recorded["keys_accepted"].status == "not_applicable"
    assert recorded["reached_agent"].status == "not_applicable"
    assert recorded["prompt_heard"].status == "passed"  # the words are there to judge


def test_reaching_the_agent_late_or_never_fails():
    late = _verdicts(rows=_rows(**{"turn-002": {"speech_ms": 25000.0}}))["reached_agent"]
    assert late.status == "failed" and late.observed == 23.9
    never = _verdicts(words={**WORDS, "turn-002": "Goodbye."})["reached_agent"]
    assert never.status == "failed"
    unheard = _verdicts(words={**WORDS, "turn-002": ""})["reached_agent"]
    assert unheard.status == "inconclusive"  # its words may be in the unrecognized turn


def test_phrases_match_whole_words_in_order():
    assert says("For billing, PRESS one.", "press one")
    assert not says("press the one", "press one") and not says("pressone", "press one")
    assert not says("anything", "")


def test_the_word_verdicts_ask_for_the_products_words():
    def readers(ivr: dict[str, Any]) -> list[str]:
        scenario = ScenarioConfig.model_validate({"id": "menu", "eval_spec": {"ivr": ivr}})
        return text_readers(scenario, PersonaConfig(name="p"), judges=False)

    assert readers(IVR) == ["prompt_heard", "reached_agent"]
    assert readers({"keys_accepted": True}) == []  # keys are judged on timings alone


@pytest.mark.parametrize(("onset_bound_ms", "status"), [(5.0, "passed"), (80.0, "inconclusive")])
def test_reached_agent_takes_its_speech_onset_s_own_bound(onset_bound_ms, status):
    # the agent's reply began 19.98 s after connect (limit 20 s); the response is flagged for
    # its dead air (80 ms), and only its onset's own bound says whether 20 ms could matter
    rows = _rows(**{"turn-002": {"speech_ms": 21080.0}})
    rows[2] = rows[2].model_copy(update={
        "timing_degraded": True, "stamp_error_bound_ms": 80.0,
        "figure_error_bounds_ms": {"speech_start_ms": onset_bound_ms, "dead_air_ms": 80.0}})
    assert _verdicts(rows=rows)["reached_agent"].status == status
