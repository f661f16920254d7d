"""The replay persona's decisions (which recorded turn, barge-in or not, how it ends) and loading
a run back from a bundle's resolved documents with --set overrides."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import voicelab
from voicelab.audio import PcmAudio
from voicelab.config import load_recorded_run
from voicelab.errors import ConfigError
from voicelab.personas import PERSONAS, PersonaContext, PersonaEnd, ProductResponse, UserTurn
from voicelab.personas._replay import RecordedTrial, RecordedTurn, ReplayPersona

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def _turn(number: int, *, barge_in_of: str | None = None, after_ms: float | None = None
          ) -> RecordedTurn:
    audio = PcmAudio(np.full(240 * number, number, dtype=np.int16))
    return RecordedTurn(turn_id=f"turn-{number:03d}", text=f"turn {number}", audio=audio,
                        source_kind="script", dtmf=None, speech_span=(0, 240 * number),
                        barge_in_of=barge_in_of, after_product_audio_ms=after_ms)


def _persona(tmp_path: Path, turns: list[RecordedTurn], *, exit_reason: str = "script_exhaustion",
             persona_end: PersonaEnd | None = None, max_turns: int | None = None
             ) -> ReplayPersona:
    loaded = voicelab.load_run(EXAMPLE)
    context = PersonaContext.for_trial(loaded, trial_index=1, seed=42)
    if max_turns is not None:
        conversation = context.scenario.conversation.model_copy(update={"max_turns": max_turns})
        context = dataclasses.replace(context, scenario=context.scenario.model_copy(
            update={"conversation": conversation}))
    persona = ReplayPersona({"bundle": str(tmp_path)}, context)
    persona.trial = RecordedTrial(tmp_path / "trial-001", 42, exit_reason, tuple(turns),
                                  persona_end)
    return persona


def _say(decision: object) -> UserTurn:
    assert isinstance(decision, UserTurn), decision
    return decision


def test_the_registry_names_it():
    assert PERSONAS.resolve("replay") is ReplayPersona


def test_turns_come_in_order_with_their_recorded_audio_and_speech(tmp_path):
    persona = _persona(tmp_path, [_turn(1), _turn(2)])
    first = _say(asyncio.run(persona.opening()))
    assert first.audio is not None and first.audio.to_bytes() == _turn(1).audio.to_bytes()
    assert first.recorded is not None and first.recorded.speech_span == (0, 240)
    assert (first.text, first.interrupt_after_seconds) == ("turn 1", None)
    assert first.metadata["replayed_turn"] == "turn-001" and first.source == "replay"
    assert persona.barge_in(ProductResponse(index=1)) is None  # turn 2 was not a barge-in
    assert _say(asyncio.run(persona.reply(ProductResponse(index=1)))).text == "turn 2"
    end = asyncio.run(persona.reply(ProductResponse(index=2)))
    assert isinstance(end, PersonaEnd) and end.exit_reason == "script_exhaustion"


def test_a_barge_in_is_offered_for_the_reply_it_interrupted_at_the_same_point(tmp_path):
    persona = _persona(tmp_path, [_turn(1), _turn(2, barge_in_of="turn-001", after_ms=1250.0),
                                  _turn(3)])
    # during the opening (turn-000) the next turn is not a barge-in of it
    assert persona.barge_in(ProductResponse(index=0)) is None
    _say(asyncio.run(persona.reply(ProductResponse(index=0))))
    barge = persona.barge_in(ProductResponse(index=1, status="in_progress"))
    assert barge is not None and barge.interrupt_after_seconds == pytest.approx(1.25)
    assert barge.text == "turn 2"
    persona.confirm_barge_in(barge)
    assert persona.barge_in(ProductResponse(index=2)) is None
    assert _say(asyncio.run(persona.reply(ProductResponse(index=2)))).text == "turn 3"


def test_a_barge_in_the_new_reply_was_too_short_for_is_said_after_it(tmp_path):
    persona = _persona(tmp_path, [_turn(1, barge_in_of="turn-000", after_ms=5000.0), _turn(2)])
    assert persona.barge_in(ProductResponse(index=0)) is not None  # armed, never spoken
    turn = _say(asyncio.run(persona.reply(ProductResponse(index=0))))
    assert turn.text == "turn 1" and turn.interrupt_after_seconds is None
    assert turn.metadata["original_barge_in_of"] == "turn-000"  # in user.turn_started
    assert _say(asyncio.run(persona.reply(ProductResponse(index=1)))).text == "turn 2"


def test_it_ends_the_way_the_original_persona_ended(tmp_path):
    persona = _persona(tmp_path, [_turn(1)], exit_reason="repeat_limit",
                       persona_end=PersonaEnd("repeat_limit", 0.0, "no match 3 times"))
    _say(asyncio.run(persona.opening()))
    end = asyncio.run(persona.reply(ProductResponse(index=1)))
    assert isinstance(end, PersonaEnd)
    assert (end.exit_reason, end.message) == ("repeat_limit", "no match 3 times")


def test_an_original_stopped_by_max_turns_stops_there_again(tmp_path):
    persona = _persona(tmp_path, [_turn(1), _turn(2)], exit_reason="max_turns", max_turns=2)
    _say(asyncio.run(persona.opening()))
    _say(asyncio.run(persona.reply(ProductResponse(index=1))))
    # the user had more to say: the runner refuses the third turn with max_turns
    beyond = _say(asyncio.run(persona.reply(ProductResponse(index=2))))
    assert beyond.metadata == {"beyond_recording": True}
    # with a higher limit the recording simply runs out
    persona = _persona(tmp_path, [_turn(1)], exit_reason="max_turns", max_turns=5)
    _say(asyncio.run(persona.opening()))
    assert isinstance(asyncio.run(persona.reply(ProductResponse(index=1))), PersonaEnd)


@pytest.mark.parametrize(("settings", "key", "message"), [
    ({}, "persona_settings.bundle", "needs bundle"),
    ({"bundle": "/no/such/run"}, "persona_settings.bundle", "no such run folder"),
    ({"bundle": ".", "speed": 2}, "persona_settings", "unknown setting(s) speed"),
])
def test_bad_settings_name_the_key(settings, key, message):
    loaded = voicelab.load_run(EXAMPLE)
    context = PersonaContext.for_trial(loaded, trial_index=1, seed=42)
    with pytest.raises(ConfigError) as raised:
        ReplayPersona.check_settings(settings, context)
    assert raised.value.key == key and message in raised.value.message


def _documents(tmp_path: Path) -> tuple[dict, dict]:
    loaded = voicelab.load_run(EXAMPLE)
    documents = dict(loaded.resolved_documents())  # what resolved-*.json keep
    sources = {kind: tmp_path / f"resolved-{kind}.json" for kind in documents}
    return documents, sources


def test_a_recorded_run_loads_back_with_overrides(tmp_path):
    documents, sources = _documents(tmp_path)
    loaded = load_recorded_run(documents, sources=sources, run_path=EXAMPLE, overrides=[
        "endpoint.settings.reply_latency_ms=250", "scenario.conversation.max_turns=3"])
    assert loaded.run.endpoint.settings == {"reply_latency_ms": 250}
    assert loaded.scenario.conversation.max_turns == 3
    assert loaded.script is not None and loaded.base_dir == EXAMPLE.parent
    original = voicelab.load_run(EXAMPLE)
    assert loaded.persona == original.persona and loaded.data == original.data


def test_a_bad_override_of_a_recorded_run_blames_the_argument_and_the_document(tmp_path):
    documents, sources = _documents(tmp_path)
    with pytest.raises(ConfigError) as raised:
        load_recorded_run(documents, sources=sources, run_path=EXAMPLE,
                          overrides=["scenario.conversation.max_turns=many"])
    line = raised.value.one_line()
    assert "--set scenario.conversation.max_turns=many (resolved-scenario.json)" in line
    assert "conversation.max_turns" in line
    documents["script"] = None
    with pytest.raises(ConfigError, match="the run has no script to override"):
        load_recorded_run(documents, sources=sources, run_path=EXAMPLE,
                          overrides=["script.max_repeat_requests=1"])
