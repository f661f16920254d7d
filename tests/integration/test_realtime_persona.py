"""The realtime persona against the local Realtime server playing the simulated user."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from voicelab.audio import PcmAudio, tone_speech
from voicelab.config import (
    OpenAIProvider,
    PersonaConfig,
    Providers,
    ScenarioConfig,
    VoiceLiveProvider,
)
from voicelab.doubles.realtime import RealtimeServer, RealtimeServerConfig
from voicelab.endpoints import EndpointError
from voicelab.errors import ConfigError, ExecutionError
from voicelab.personas import PersonaContext, PersonaEnd, ProductResponse, UserTurn
from voicelab.personas._realtime import END_TOOL, RealtimePersona, RealtimePersonaError

API_KEY = "persona-key-0123456789"
LINES = ["Hi, I'd like to book a table for two.", "Seven pm works, thank you, goodbye."]


def persona_context(providers: Providers, **overrides: Any) -> PersonaContext:
    return PersonaContext(
        scenario=ScenarioConfig(id="booking", description="Book a restaurant table by phone.",
                                expected_topics=["party size", "time"]),
        persona=PersonaConfig(name="Dana", communication_style="concise",
                              goals=["book a table for two", "at seven pm"]),
        data={"restaurant": "Luigi's", "party_size": 2},
        providers=providers, environ={}, **overrides)


def voice_live(server: RealtimeServer) -> Providers:
    return Providers(voice_live=VoiceLiveProvider(endpoint=server.http_endpoint, api_key=API_KEY,
                                                  voice="en-US-AvaNeural"))


def product(index: int, text: str) -> ProductResponse:
    return ProductResponse(index=index, transcript=text, audio=tone_speech(text, seed=3))


def test_opening_and_replies_come_from_the_session_and_end_with_persona_ended() -> None:
    async def scenario() -> tuple[list[Any], RealtimeServer, dict[str, Any]]:
        config = RealtimeServerConfig(spelling="beta", api_key=API_KEY, lines=LINES,
                                      end_call_on_last_line=True)
        async with RealtimeServer(config) as server:
            persona = RealtimePersona({}, persona_context(voice_live(server)))
            await asyncio.wait_for(persona.start(), 5)
            decisions = [await asyncio.wait_for(persona.opening(), 5)]
            decisions.append(await asyncio.wait_for(
                persona.reply(product(1, "For how many people, and when?")), 5))
            decisions.append(await asyncio.wait_for(
                persona.reply(product(2, "Booked. Anything else?")), 5))
            evidence = persona.evidence()
            await persona.close()
            return decisions, server, evidence

    decisions, server, evidence = asyncio.run(scenario())
    opening, answer, end = decisions
    assert isinstance(opening, UserTurn) and opening.source == "realtime"
    assert opening.text == LINES[0]
    assert opening.audio is not None
    assert opening.audio.to_bytes() == tone_speech(LINES[0], seed=0).to_bytes()
    assert isinstance(answer, UserTurn) and answer.text == LINES[1]
    assert answer.metadata["ending"] == "end_conversation"
    assert isinstance(end, PersonaEnd) and end.exit_reason == "persona_ended"
    record = server.connections[0]
    assert len(server.connections) == 1
    assert record.auth == "api-key" and record.path == "/voice-live/realtime"
    # The product's audio reached the persona exactly, and the evaluator drove the turns.
    assert record.committed_audio == [tone_speech("For how many people, and when?",
                                                  seed=3).to_bytes()]
    assert len(record.events_of("response.create")) == 2
    session = record.events_of("session.update")[0]["session"]
    assert session["turn_detection"] is None
    assert session["voice"] == {"name": "en-US-AvaNeural", "type": "azure-standard"}
    assert [tool["name"] for tool in session["tools"]] == [END_TOOL]
    for fragment in ("Dana", "book a table for two", "Book a restaurant table by phone.",
                     "party size", "Luigi's"):
        assert fragment in session["instructions"]
    assert evidence["mode"] == "realtime" and evidence["provider"] == "voice_live"
    directions = {event["direction"] for event in evidence["events"]}
    assert directions == {"sent", "received"}
    dumped = json.dumps(evidence)
    assert API_KEY not in dumped
    appends = [e["event"] for e in evidence["events"]
               if e["event"].get("type") == "input_audio_buffer.append"]
    assert appends and all(a["audio"]["omitted"] == "base64 pcm" for a in appends)


def test_a_silent_end_call_ends_at_once_and_resampled_product_audio_is_forwarded() -> None:
    product_audio = PcmAudio.silence(0.5, sample_rate_hz=16_000)

    async def scenario() -> tuple[Any, RealtimeServer]:
        config = RealtimeServerConfig(lines=["Hello there.", ""], end_call_on_last_line=True)
        async with RealtimeServer(config) as server:
            providers = Providers(openai=OpenAIProvider(base_url=server.http_endpoint + "/v1",
                                                        api_key=API_KEY, model="gpt-realtime"))
            persona = RealtimePersona({"provider": "openai"}, persona_context(providers))
            await persona.start()
            await persona.opening()
            decision = await asyncio.wait_for(persona.reply(ProductResponse(
                index=1, transcript="", audio=product_audio)), 5)
            await persona.close()
            return decision, server

    decision, server = asyncio.run(scenario())
    assert isinstance(decision, PersonaEnd) and decision.exit_reason == "persona_ended"
    assert "end_conversation" in decision.message
    record = server.connections[0]
    assert record.auth == "bearer"
    assert len(record.committed_audio[0]) == 24_000  # 0.5 s at 24 kHz, 2 bytes a sample
    session = record.events_of("session.update")[0]["session"]
    assert session["audio"]["input"]["turn_detection"] is None  # GA shape for OpenAI


def test_the_end_phrase_ends_after_it_is_spoken() -> None:
    async def scenario() -> list[Any]:
        async with RealtimeServer(RealtimeServerConfig(lines=["Okay, goodbye now."])) as server:
            persona = RealtimePersona({"end_phrase": "Goodbye now"},
                                      persona_context(voice_live(server)))
            await persona.start()
            decisions = [await persona.opening(), await persona.reply(product(1, "Bye!"))]
            await persona.close()
            return decisions

    spoken, end = asyncio.run(scenario())
    assert isinstance(spoken, UserTurn) and spoken.metadata["ending"] == "end_phrase"
    assert isinstance(end, PersonaEnd) and end.exit_reason == "persona_ended"


def test_a_session_dropping_mid_trial_is_a_clear_execution_error() -> None:
    async def scenario() -> ExecutionError:
        async with RealtimeServer(RealtimeServerConfig(drop_on_response=2, lines=LINES)) as server:
            persona = RealtimePersona({}, persona_context(voice_live(server)))
            await persona.start()
            await persona.opening()
            with pytest.raises(ExecutionError) as caught:
                await asyncio.wait_for(persona.reply(product(1, "When?")), 5)
            await persona.close()
            return caught.value

    error = asyncio.run(scenario())
    assert isinstance(error, RealtimePersonaError)
    assert "dropped mid-trial" in str(error) and "1006" in str(error)


def test_check_needs_a_configured_provider_and_credential() -> None:
    with pytest.raises(ConfigError) as caught:
        RealtimePersona.check_settings({}, persona_context(Providers()))
    assert caught.value.key == "providers"
    keyless = Providers(voice_live=VoiceLiveProvider(endpoint="https://x.services.ai.azure.com"))
    with pytest.raises(ConfigError) as caught:
        RealtimePersona.check_settings({}, persona_context(keyless))
    assert caught.value.key == "providers.voice_live.api_key"
    with pytest.raises(ConfigError) as caught:
        RealtimePersona.check_settings({"provider": "openai"}, persona_context(keyless))
    assert caught.value.key == "providers.openai"
    with pytest.raises(ConfigError) as caught:
        RealtimePersona.check_settings({"temprature": 0.7}, persona_context(keyless))
    assert caught.value.key == "persona_settings.temprature"


def test_a_persona_service_that_refuses_is_not_an_endpoint_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    providers = Providers(voice_live=VoiceLiveProvider(endpoint=f"http://127.0.0.1:{port}",
                                                       api_key=API_KEY))
    persona = RealtimePersona({"connect_timeout_seconds": 2}, persona_context(providers))
    with pytest.raises(RealtimePersonaError) as caught:
        asyncio.run(persona.start())
    assert not isinstance(caught.value, EndpointError)
    assert "connection_refused" in str(caught.value)
