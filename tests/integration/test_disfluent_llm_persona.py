"""A language-model persona with a disfluency profile is asked for it, in the scenario's
language, over real HTTP to the local OpenAI-compatible server."""

from __future__ import annotations

import asyncio

from voicelab.config import PersonaConfig, Providers, ScenarioConfig
from voicelab.doubles.openai import OpenAIServer, ScriptedPolicy
from voicelab.personas import PersonaContext
from voicelab.personas._synthesizer import SynthesizerPersona


def test_a_language_model_persona_is_asked_for_its_profile_in_its_language() -> None:
    reply = {"reply": "Ähm, ich möchte einen Tisch.", "end_conversation": False, "reason": "x"}
    with OpenAIServer(ScriptedPolicy([reply])) as server:
        providers = Providers.model_validate({"openai": {
            "base_url": server.base_url, "api_key": "k", "model": "persona-model"}})
        persona = SynthesizerPersona({}, PersonaContext(
            scenario=ScenarioConfig(id="s", language="de"),
            persona=PersonaConfig(name="p", disfluency="heavy"), data={},
            providers=providers, seed=3, environ={}))

        async def opening():
            await persona.start()
            try:
                return await persona.opening()
            finally:
                await persona.close()

        turn = asyncio.run(asyncio.wait_for(opening(), 20))
        (call,) = server.requests_for("chat")
    system = call.body["messages"][0]["content"]
    assert turn.text == "Ähm, ich möchte einen Tisch."
    assert "converted to speech in de" in system
    assert "in about 70% of your replies, hesitate once with a filler such as 'äh'" in system
    assert "\"Tuesday, no, Wednesday\"" in system and "about 30%" in system
