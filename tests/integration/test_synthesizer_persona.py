"""The synthesizer persona driven directly with ProductResponse objects, against the local
OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from voicelab.config import (
    PersonaConfig,
    Providers,
    ScenarioConfig,
    SecretScrubber,
    SessionBehavior,
)
from voicelab.doubles.openai import ModelCall, OpenAIServer, ScriptedPolicy
from voicelab.errors import ConfigError, ExecutionError, MissingDependencyError
from voicelab.personas import PERSONAS, PersonaContext, PersonaEnd, ProductResponse, UserTurn
from voicelab.personas._synthesizer import SynthesizerPersona

SECRET = "sk-test-SECRET-123456"


def _context(providers: Providers, **overrides) -> PersonaContext:
    fields = dict(
        scenario=ScenarioConfig(id="reminder-basic", description="Set a reminder to call mom"),
        persona=PersonaConfig(name="Dana", communication_style="concise",
                              goals=["set a reminder for 5 pm"],
                              session_behavior=SessionBehavior(conclude_quickly=True)),
        data={"reminder_time": "17:00", "contact": "mom"},
        providers=providers, seed=41, environ={}, scrubber=SecretScrubber([SECRET]))
    fields.update(overrides)
    return PersonaContext(**fields)


def _openai(server: OpenAIServer, **extra) -> Providers:
    return Providers.model_validate({"openai": {"base_url": server.base_url, "api_key": SECRET,
                                                "model": "persona-model", **extra}})


def _run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


def test_a_conversation_with_a_farewell_then_end():
    replies = [
        {"reply": "Hi, I need a reminder.", "end_conversation": False, "reason": "open"},
        "Sure! ```json\n{\"reply\": \"At 5 pm, to call mom.\", \"end_conversation\": false, "
        "\"reason\": \"answer\"}\n```",
        {"reply": "Thanks, bye!", "end_conversation": True, "reason": "goal met"},
    ]
    with OpenAIServer(ScriptedPolicy(replies), model_version="persona-2025") as server:
        persona = SynthesizerPersona({"temperature": 0.7, "max_tokens": 120,
                                      "system_prompt_extra": "Mention no other errands."},
                                     _context(_openai(server)))

        async def conversation():
            await persona.start()
            try:
                opening = await persona.opening()
                second = await persona.reply(ProductResponse(index=0,
                                                             transcript="What time and what for?"))
                third = await persona.reply(ProductResponse(index=1, transcript="Saved for 5 pm."))
                end = await persona.reply(ProductResponse(index=2, transcript="Goodbye!"))
                return opening, second, third, end
            finally:
                await persona.close()

        opening, second, third, end = _run(conversation())
        chat = server.requests_for("chat")
    assert isinstance(opening, UserTurn) and opening.text == "Hi, I need a reminder."
    assert (opening.source, opening.audio) == ("synthesizer", None)
    assert second.text == "At 5 pm, to call mom."
    assert third.text == "Thanks, bye!" and third.metadata["end_conversation"] is True
    assert isinstance(end, PersonaEnd) and end.exit_reason == "persona_ended"
    assert end.message == "goal met"
    assert len(chat) == 3, "the farewell is spoken, then the persona ends without a model call"
    body = chat[1].body
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.7, 41, 120)
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert "Dana" in system["content"] and "set a reminder for 5 pm" in system["content"]
    assert "Set a reminder to call mom" in system["content"] and '"17:00"' in system["content"]
    assert "Mention no other errands." in system["content"]
    assert "YOU: Hi, I need a reminder." in user["content"]
    assert "The assistant just said:\nWhat time and what for?" in user["content"]
    evidence = persona.evidence()
    assert evidence["persona_mode"] == "synthesizer" and evidence["seed"] == 41
    assert [e["decision"]["reply"] for e in evidence["exchanges"]] == [
        "Hi, I need a reminder.", "At 5 pm, to call mom.", "Thanks, bye!"]
    assert evidence["exchanges"][0]["model_version"] == "persona-2025"
    assert evidence["exchanges"][1]["request"]["messages"] == body["messages"]
    assert SECRET not in json.dumps(evidence)


def test_unparseable_reply_is_retried_once_with_a_corrective_note():
    replies = ["I would say hello", {"reply": "Hello.", "end_conversation": False, "reason": "r"}]
    with OpenAIServer(ScriptedPolicy(replies)) as server:
        persona = SynthesizerPersona({}, _context(_openai(server)))

        async def opening():
            await persona.start()
            try:
                return await persona.opening()
            finally:
                await persona.close()

        turn = _run(opening())
        retry = server.requests_for("chat")[1].body["messages"]
    assert turn.text == "Hello."
    assert retry[-2] == {"role": "assistant", "content": "I would say hello"}
    assert "JSON object" in retry[-1]["content"]
    attempts = persona.evidence()["exchanges"]
    assert [a["attempt"] for a in attempts] == [1, 2] and "error" in attempts[0]


@pytest.mark.parametrize("fault", ["garbled_reply", "malformed_json"])
def test_two_unparseable_replies_fail_the_persona(fault):
    with OpenAIServer(ScriptedPolicy(["{}"])) as server:
        server.add_fault(fault, times=2)
        persona = SynthesizerPersona({}, _context(_openai(server)))

        async def opening():
            await persona.start()
            try:
                return await persona.opening()
            finally:
                await persona.close()

        with pytest.raises(ExecutionError, match="could not be parsed twice"):
            _run(opening())
        assert len(server.requests_for("chat")) == 2


def test_server_errors_become_execution_errors_without_secrets():
    with OpenAIServer(ScriptedPolicy(["{}"])) as server:
        server.add_fault("http_500", times=5)
        persona = SynthesizerPersona({"timeout_seconds": 5}, _context(_openai(server)))

        async def opening():
            await persona.start()
            try:
                return await persona.opening()
            finally:
                await persona.close()

        with pytest.raises(ExecutionError, match="InternalServerError") as caught:
            _run(opening())
    assert SECRET not in str(caught.value)


def test_azure_provider_without_response_format_support_uses_text_json():
    def policy(call: ModelCall) -> str:
        return 'Here you go: {"reply": "Hi there.", "end_conversation": false, "reason": "x"}'

    with OpenAIServer(policy, accept_response_format=False) as server:
        providers = Providers.model_validate({"azure_openai": {
            "endpoint": server.azure_endpoint, "model": "persona-dep", "auth": "api_key",
            "api_key": SECRET, "temperature": 0.2, "seed": 5}})
        persona = SynthesizerPersona({"seed": 9}, _context(providers))

        async def opening():
            await persona.start()
            try:
                return await persona.opening()
            finally:
                await persona.close()

        turn = _run(opening())
        first, second = server.requests_for("chat")
    assert turn.text == "Hi there."
    assert first.deployment == "persona-dep" and "response_format" in first.body
    assert "response_format" not in second.body
    assert (second.body["temperature"], second.body["seed"]) == (0.2, 9)
    assert second.body["max_completion_tokens"] > 0
    assert persona.evidence()["json_mode"] is False


def test_settings_and_validate_time_checks():
    providers = Providers.model_validate({"openai": {"model": "m", "base_url": "http://x"}})
    assert PERSONAS.resolve("synthesizer") is SynthesizerPersona
    with pytest.raises(ConfigError) as caught:
        SynthesizerPersona.check_settings({"temprature": 0.5}, _context(providers))
    assert caught.value.key == "persona_settings.temprature"
    with pytest.raises(ConfigError) as caught:
        SynthesizerPersona.check_settings({"provider": "azure_openai"}, _context(providers))
    assert caught.value.key == "persona_settings.provider"
    with pytest.raises(ConfigError) as caught:
        SynthesizerPersona.check_settings({}, _context(providers))
    assert caught.value.key == "providers.openai.api_key"
    SynthesizerPersona.check_settings({}, _context(providers, environ={"OPENAI_API_KEY": "k"}))
    with pytest.raises(ConfigError, match="configure providers"):
        SynthesizerPersona.check_settings({}, _context(Providers()))


def test_missing_openai_package_is_reported_at_check_time(monkeypatch):
    providers = Providers.model_validate({"openai": {"model": "m", "api_key": "k"}})
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependencyError) as caught:
        SynthesizerPersona.check_settings({}, _context(providers))
    assert str(caught.value) == ("providers.openai: persona_mode 'synthesizer' needs the "
                                 "'openai' package: pip install 'voicelab[azure]'")


def test_a_misrecognized_turn_is_shown_to_the_model():
    replies = [{"reply": "Call mom at five.", "end_conversation": False, "reason": "r"}] * 3
    with OpenAIServer(ScriptedPolicy(replies)) as server:
        persona = SynthesizerPersona({}, _context(_openai(server)))

        async def conversation():
            await persona.start()
            try:
                await persona.opening()
                await persona.reply(ProductResponse(index=0, transcript="Sure, what?",
                                                    input_transcript="call mom at five"))
                await persona.reply(ProductResponse(index=1, transcript="Who is Tom?",
                                                    input_transcript="Call Tom at nine."))
            finally:
                await persona.close()

        _run(conversation())
        prompts = [r.body["messages"][1]["content"] for r in server.requests_for("chat")]
    assert "heard your last turn" not in prompts[1], "same words, different case: no note"
    assert 'heard your last turn as: "Call Tom at nine."' in prompts[2]
