"""The synthesizer persona's seeded hesitation profile, against the local OpenAI-compatible
server: the same trial seed gives the same pauses, another seed others; bad profiles are
settings errors."""

from __future__ import annotations

import asyncio

import pytest

from voicelab.config import PersonaConfig, Providers, ScenarioConfig
from voicelab.doubles.openai import OpenAIServer, ScriptedPolicy
from voicelab.errors import ConfigError
from voicelab.personas import PersonaContext, ProductResponse
from voicelab.personas._hesitation import HesitationProfile, hesitate
from voicelab.personas._synthesizer import SynthesizerPersona

REPLY = "My account number is 4 4 7 1 and my name is Dana"
PROFILE = {"probability": 0.5, "pause_seconds": [0.4, 1.5], "max_pauses": 2}


def _turns(seed: int, settings: dict) -> list:
    replies = [{"reply": REPLY, "end_conversation": False, "reason": "r"}] * 2
    with OpenAIServer(ScriptedPolicy(replies)) as server:
        providers = Providers.model_validate({"openai": {
            "base_url": server.base_url, "api_key": "sk-test", "model": "persona-model"}})
        context = PersonaContext(scenario=ScenarioConfig(id="s"),
                                 persona=PersonaConfig(name="Dana"), data={},
                                 providers=providers, seed=seed, environ={})
        persona = SynthesizerPersona(settings, context)

        async def conversation():
            await persona.start()
            try:
                return [await persona.opening(),
                        await persona.reply(ProductResponse(index=0, transcript="And?"))]
            finally:
                await persona.close()

        return asyncio.run(asyncio.wait_for(conversation(), 20))


def test_the_same_seed_hesitates_the_same_way():
    first, again, other = (_turns(seed, {"hesitation": PROFILE}) for seed in (41, 41, 42))
    shapes = [[(t.pieces, t.pauses_seconds) for t in turns] for turns in (first, again, other)]
    assert shapes[0] == shapes[1] and shapes[0] != shapes[2]
    for turn in first:
        assert turn.text == REPLY and " ".join(turn.pieces) == REPLY
        assert len(turn.pieces) == len(turn.pauses_seconds) + 1
        assert all(0.4 <= pause <= 1.5 for pause in turn.pauses_seconds)
    # without a profile, replies are said in one go
    assert all(t.pauses_seconds == () for t in _turns(41, {}))


def test_probability_decides_how_often():
    never = HesitationProfile(probability=0, pause_seconds=(0.5, 0.5))
    always = HesitationProfile(probability=1, pause_seconds=(0.5, 0.5), max_pauses=3)
    assert hesitate(REPLY, never, seed=1, turn=1) == {}
    found = hesitate(REPLY, always, seed=1, turn=1)
    assert found["pieces"][:3] == ("My", "account", "number")
    assert found["pauses_seconds"] == (0.5, 0.5, 0.5)
    assert hesitate("Yes", always, seed=1, turn=1) == {}  # one word: nowhere to pause


@pytest.mark.parametrize("profile", [
    {"probability": 1.5, "pause_seconds": [0.4, 1.0]},
    {"probability": 0.5, "pause_seconds": [1.0, 0.4]},
    {"probability": 0.5, "pause_seconds": [0.4, 11]},
    {"probability": 0.5, "pause_seconds": [0.4, 1.0], "often": True},
])
def test_a_bad_profile_is_a_settings_error(profile):
    with pytest.raises(ConfigError) as caught:
        SynthesizerPersona.check_settings({"hesitation": profile}, PersonaContext(
            scenario=ScenarioConfig(id="s"), persona=PersonaConfig(name="Dana"), data={},
            environ={}))
    assert "persona_settings" in str(caught.value) and "hesitation" in str(caught.value)
