"""Disfluent caller speech: seeded fillers, restarts and self-corrections on script text."""

from __future__ import annotations

import asyncio

import pytest

from voicelab.config import (
    DISFLUENCY_PROFILES,
    DisfluencyConfig,
    PersonaConfig,
    ScenarioConfig,
    ScriptConfig,
    ScriptTurn,
)
from voicelab.personas import PersonaContext
from voicelab.personas._disfluency import make_disfluent
from voicelab.personas._scripted import ScriptedPersona

TEXT = "I want to book a table for Tuesday at 7, for two people {pause: 1.2} please."
HEAVY = DISFLUENCY_PROFILES["heavy"]


def test_no_profile_leaves_the_text_alone() -> None:
    assert make_disfluent(TEXT, DisfluencyConfig(), seed=1, turn_key="0").text == TEXT


def test_same_seed_same_words_and_different_seeds_differ() -> None:
    runs = [make_disfluent(TEXT, HEAVY, seed=seed, turn_key="0") for seed in range(20)]
    again = [make_disfluent(TEXT, HEAVY, seed=seed, turn_key="0") for seed in range(20)]
    assert [r.text for r in runs] == [r.text for r in again]
    assert [r.applied for r in runs] == [r.applied for r in again]
    assert len({r.text for r in runs}) >= 5
    kinds = {item["kind"] for r in runs for item in r.applied}
    assert kinds == {"filler", "restart", "self_correction"}


def test_every_kind_always_applied_at_probability_one() -> None:
    profile = DisfluencyConfig(fillers=1, restarts=1, self_corrections=1, filler_words=["um"])
    for seed in range(10):
        spoken = make_disfluent(TEXT, profile, seed=seed, turn_key="0")
        assert sorted(item["kind"] for item in spoken.applied) == \
            ["filler", "restart", "self_correction"]
        assert "um," in spoken.text.lower()
        # the pause marker survives whole, and the script's words all stay, in order
        assert "{pause: 1.2}" in spoken.text
        remaining = iter(spoken.text.split())
        assert all(word in remaining for word in TEXT.split())


def test_a_self_correction_ends_on_the_scripts_own_word() -> None:
    profile = DisfluencyConfig(self_corrections=1)
    for seed in range(10):
        spoken = make_disfluent("See you on Tuesday.", profile, seed=seed, turn_key="0")
        (correction,) = spoken.applied
        assert correction["corrected_to"] == "Tuesday"
        assert correction["said"] != "Tuesday"
        assert spoken.text == f"See you on {correction['said']}, no, Tuesday."


def test_no_self_correction_without_a_correctable_word() -> None:
    profile = DisfluencyConfig(self_corrections=1)
    text = "Yes please, that may work for me."  # lowercase "may" is not the month
    assert make_disfluent(text, profile, seed=3, turn_key="0").text == text


def test_fillers_follow_the_language() -> None:
    profile = DisfluencyConfig(fillers=1)
    spoken = make_disfluent("Ich möchte einen Tisch, bitte.", profile, seed=2, turn_key="0",
                            language="de")
    assert spoken.applied[0]["word"] in {"äh", "ähm", "also"}


def test_named_profiles_and_bad_profile() -> None:
    assert PersonaConfig(name="p", disfluency="light").disfluency == \
        DISFLUENCY_PROFILES["light"]
    with pytest.raises(ValueError, match="unknown disfluency profile 'wild'"):
        PersonaConfig(name="p", disfluency="wild")


def _persona(seed: int) -> ScriptedPersona:
    script = ScriptConfig(turns=[
        ScriptTurn(response="I would like to move my booking to Friday please."),
        ScriptTurn(response="mm-hmm", kind="backchannel", interrupt_after_seconds=1.0)])
    context = PersonaContext(scenario=ScenarioConfig(id="s"),
                             persona=PersonaConfig(name="p", disfluency=DisfluencyConfig(
                                 fillers=1, restarts=1, self_corrections=1)),
                             data={}, script=script, seed=seed)
    return ScriptedPersona({}, context)


def test_the_scripted_persona_speaks_and_records_the_disfluent_text() -> None:
    persona = _persona(seed=5)
    opening = asyncio.run(persona.opening())
    assert opening.text != "I would like to move my booking to Friday please."
    metadata = opening.metadata["disfluency"]
    assert metadata["script_text"] == "I would like to move my booking to Friday please."
    assert {item["kind"] for item in metadata["applied"]} == \
        {"filler", "restart", "self_correction"}
    # what is synthesized ahead of the call is what is said
    assert opening.text in [turn.text for turn in _persona(seed=5).planned_turns()]
    assert _persona(seed=6).planned_turns()[0].text != opening.text
    # a backchannel stays as written
    assert persona.planned_turns()[1].text == "mm-hmm"
    assert "disfluency" not in persona.planned_turns()[1].metadata


def test_no_profile_asks_the_language_model_for_nothing() -> None:
    from voicelab.personas._disfluency import disfluency_instructions

    assert disfluency_instructions(DisfluencyConfig(), language="en-US") == []


def test_disfluencies_and_pauses_compose() -> None:
    said = "My account number is {pause: 1.2} 4 4 7 1 and I moved on Friday."
    script = ScriptConfig(turns=[ScriptTurn(response=said)])
    context = PersonaContext(scenario=ScenarioConfig(id="s"),
                             persona=PersonaConfig(name="p", disfluency=DisfluencyConfig(
                                 fillers=1, restarts=1, self_corrections=1)),
                             data={}, script=script, seed=3)
    turn = asyncio.run(ScriptedPersona({}, context).opening())
    # the pause stays where the script put it, between the disfluent pieces
    assert turn.pauses_seconds == (1.2,) and len(turn.pieces) == 2
    assert "{" not in turn.text and turn.text != said.replace(" {pause: 1.2}", "")
    assert turn.pieces[1].startswith("4") or "4 4 7 1" in turn.pieces[1]
    assert turn.metadata["disfluency"]["script_text"] == said
