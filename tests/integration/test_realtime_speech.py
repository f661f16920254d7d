"""``speech_provider: voice_live`` against the local Realtime server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from voicelab.audio import tone_speech
from voicelab.config import AzureOpenAIProvider, OpenAIProvider, Providers, VoiceLiveProvider
from voicelab.doubles.realtime import RealtimeServer, RealtimeServerConfig
from voicelab.errors import ConfigError, ExecutionError
from voicelab.speech import SpeechContext
from voicelab.speech._voice_live import SpeechMismatchError, VoiceLiveSpeechProvider

API_KEY = "speech-key-0123456789"
TEXT = "Please book a table for two at seven."


def voice_live_context(server: RealtimeServer) -> SpeechContext:
    return SpeechContext(providers=Providers(voice_live=VoiceLiveProvider(
        endpoint=server.http_endpoint, api_key=API_KEY)), environ={})


def run_synthesis(config: RealtimeServerConfig, texts: list[str],
                  settings: dict[str, Any] | None = None, *,
                  context_for=voice_live_context) -> tuple[list[Any], RealtimeServer]:
    async def scenario() -> tuple[list[Any], RealtimeServer]:
        async with RealtimeServer(config) as server:
            provider = VoiceLiveSpeechProvider(settings or {}, context_for(server))
            results: list[Any] = []
            try:
                for text in texts:
                    try:
                        results.append(await asyncio.wait_for(
                            provider.synthesize(text, voice="en-US-AvaNeural", seed=1), 5))
                    except ExecutionError as error:
                        results.append(error)
            finally:
                await provider.aclose()
                await provider.aclose()  # safe twice
            return results, server

    return asyncio.run(scenario())


def test_pre_generated_speech_returns_the_spoken_audio_and_reuses_the_session() -> None:
    results, server = run_synthesis(RealtimeServerConfig(spelling="beta", api_key=API_KEY),
                                    [TEXT, "Thank you!"])
    assert results[0].to_bytes() == tone_speech(TEXT, seed=0).to_bytes()
    assert results[1].to_bytes() == tone_speech("Thank you!", seed=0).to_bytes()
    assert len(server.connections) == 1
    record = server.connections[0]
    assert record.auth == "api-key"
    request = record.events_of("response.create")[0]["response"]
    message = request["pre_generated_assistant_message"]
    assert message["role"] == "assistant" and message["content"] == [{"type": "text",
                                                                      "text": TEXT}]
    assert request["voice"] == {"name": "en-US-AvaNeural", "type": "azure-standard"}
    assert record.events_of("session.update")[0]["session"]["turn_detection"] is None


def test_a_transcript_mismatch_raises_naming_the_difference() -> None:
    config = RealtimeServerConfig(spelling="beta", speak_instead="Please book a table for three "
                                                                 "at seven.")
    (error,), _ = run_synthesis(config, [TEXT])
    assert isinstance(error, SpeechMismatchError)
    assert "expected 'two' but 'three' was spoken" in str(error)


def test_instructed_mode_uses_an_out_of_band_response_and_retries_a_paraphrase() -> None:
    def openai_context(server: RealtimeServer) -> SpeechContext:
        return SpeechContext(providers=Providers(openai=OpenAIProvider(
            base_url=server.http_endpoint + "/v1", api_key=API_KEY, model="gpt-realtime")),
            environ={})

    (audio,), server = run_synthesis(RealtimeServerConfig(), ["Okay."], {"provider": "openai"},
                                     context_for=openai_context)
    assert audio.to_bytes() == tone_speech("Okay.", seed=0).to_bytes()
    request = server.events_of("response.create")[0]["response"]
    assert request["conversation"] == "none" and request["output_modalities"] == ["audio"]
    assert request["input"][0]["content"] == [{"type": "input_text", "text": "Okay."}]
    assert server.connections[0].auth == "bearer"

    (error,), server = run_synthesis(RealtimeServerConfig(speak_instead="Sure thing."), ["Okay."],
                                     {"provider": "openai", "max_attempts": 2},
                                     context_for=openai_context)
    assert isinstance(error, SpeechMismatchError)
    assert len(server.events_of("response.create")) == 2


def test_service_errors_and_drops_are_execution_errors_and_the_session_reconnects() -> None:
    async def drop_then_recover() -> tuple[ExecutionError, Any, RealtimeServer]:
        async with RealtimeServer(RealtimeServerConfig(drop_on_response=1)) as server:
            provider = VoiceLiveSpeechProvider({}, voice_live_context(server))
            with pytest.raises(ExecutionError) as caught:
                await asyncio.wait_for(provider.synthesize(TEXT, voice=None, seed=1), 5)
            server.config.drop_on_response = None
            audio = await asyncio.wait_for(provider.synthesize(TEXT, voice=None, seed=1), 5)
            await provider.aclose()
            return caught.value, audio, server

    error, audio, server = asyncio.run(drop_then_recover())
    assert "mid-synthesis" in str(error) and "1006" in str(error)
    assert audio.to_bytes() == tone_speech(TEXT, seed=0).to_bytes()
    assert len(server.connections) == 2

    (error,), _ = run_synthesis(RealtimeServerConfig(error_on_response=1), [TEXT])
    assert isinstance(error, ExecutionError) and "server_error" in str(error)


def test_check_and_defaults() -> None:
    with pytest.raises(ConfigError) as caught:
        VoiceLiveSpeechProvider.check_settings({}, SpeechContext(providers=Providers(), environ={}))
    assert caught.value.key == "providers.voice_live"
    azure = Providers(azure_openai=AzureOpenAIProvider(endpoint="https://r.openai.azure.com",
                                                       model="gpt-realtime", auth="api_key",
                                                       api_key="k" * 20))
    provider = VoiceLiveSpeechProvider({"provider": "azure_openai"},
                                       SpeechContext(providers=azure, environ={}))
    assert provider.mode == "instructed"
    assert VoiceLiveSpeechProvider.cacheable and not VoiceLiveSpeechProvider.seed_dependent
    with pytest.raises(ConfigError) as caught:
        VoiceLiveSpeechProvider.check_settings({"mode": "guess"}, SpeechContext(providers=azure))
    assert caught.value.key == "speech_settings.mode"
