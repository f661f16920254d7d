"""Pure parts of the realtime protocol: names, session shapes, URLs, auth, transcripts."""

from __future__ import annotations

import asyncio
import base64
import importlib.util

import pytest

from voicelab.config import PersonaConfig, Providers, ScenarioConfig, SessionBehavior
from voicelab.endpoints import EndpointError
from voicelab.endpoints.realtime import wire
from voicelab.errors import MissingDependencyError
from voicelab.personas import PersonaContext
from voicelab.personas._realtime import END_TOOL, persona_instructions
from voicelab.speech._voice_live import normalized_words, transcript_difference


@pytest.mark.parametrize(("ga", "beta", "kind"), [
    ("response.output_audio.delta", "response.audio.delta", "audio_delta"),
    ("response.output_audio_transcript.done", "response.audio_transcript.done",
     "transcript_done"),
    ("response.output_text.done", "response.text.done", "text_done"),
])
def test_both_spellings_map_to_one_kind(ga: str, beta: str, kind: str) -> None:
    assert wire.kind_of({"type": ga}) == wire.kind_of({"type": beta}) == kind


def test_other_kinds() -> None:
    assert wire.kind_of({"type": "conversation.item.input_audio_transcription.completed"}) == \
        "input_transcript"
    assert wire.kind_of({"type": "response.function_call_arguments.done"}) == "function_call_done"
    assert wire.kind_of({"type": "rate_limits.updated"}) == "other"
    assert wire.kind_of({"type": 5}) == "other"
    assert wire.kind_of({"type": wire.MALFORMED}) == "malformed"


def test_beta_session_keeps_flat_keys_and_turns_server_vad_off() -> None:
    session = wire.build_session("beta", {"voice": "alloy", "temperature": 0.7})
    assert session["turn_detection"] is None
    assert session["input_audio_format"] == session["output_audio_format"] == "pcm16"
    assert session["voice"] == "alloy" and session["temperature"] == 0.7
    vad = {"type": "server_vad"}
    assert wire.build_session("beta", {"turn_detection": vad})["turn_detection"] == vad


def test_ga_session_moves_flat_keys_to_their_nested_place() -> None:
    transcription = {"model": "whisper-1"}
    session = wire.build_session("ga", {
        "voice": "marin", "input_audio_transcription": transcription, "temperature": 0.8,
        "instructions": "Be brief.", "audio": {"output": {"speed": 1.1}}})
    assert session["type"] == "realtime" and session["output_modalities"] == ["audio"]
    assert session["audio"]["input"]["turn_detection"] is None
    assert session["audio"]["input"]["transcription"] == transcription
    assert session["audio"]["output"] == {"format": {"type": "audio/pcm", "rate": 24000},
                                          "voice": "marin", "speed": 1.1}
    assert session["instructions"] == "Be brief." and "temperature" not in session


def test_ga_session_puts_a_flat_key_in_place_of_a_non_object() -> None:
    # settings that set ``audio`` to a scalar and ``voice`` too: the voice's GA place wins
    session = wire.build_session("ga", {"audio": "loud", "voice": "alloy"})
    assert session["audio"] == {"output": {"voice": "alloy"}}


def test_client_events_refuse_what_is_not_json() -> None:
    with pytest.raises(ValueError, match=r"the session is not JSON at tools\.0"):
        wire.session_update({"tools": [object()]})
    with pytest.raises(ValueError, match="the response parameters is not JSON"):
        wire.response_create({"voice": {1, 2}})
    assert wire.response_create({"input": [{"type": "message"}]})["response"] == {
        "input": [{"type": "message"}]}


def test_urls_of_each_dialect() -> None:
    assert wire.realtime_url("openai", endpoint=None, model="gpt-realtime") == \
        "wss://api.openai.com/v1/realtime?model=gpt-realtime"
    assert wire.realtime_url("azure_openai", endpoint="https://r.openai.azure.com/",
                             model="dep") == "wss://r.openai.azure.com/openai/v1/realtime?model=dep"
    assert wire.realtime_url("azure_openai", endpoint="https://r.openai.azure.com",
                             model="dep", api_version="2025-04-01-preview") == (
        "wss://r.openai.azure.com/openai/realtime?api-version=2025-04-01-preview&deployment=dep")
    assert wire.realtime_url("voice_live", endpoint="https://r.services.ai.azure.com",
                             model="gpt-realtime") == ("wss://r.services.ai.azure.com/voice-live/"
                                                       "realtime?api-version=2025-10-01&"
                                                       "model=gpt-realtime")
    with pytest.raises(ValueError, match="endpoint"):
        wire.realtime_url("voice_live", endpoint=None, model="m")
    with pytest.raises(ValueError, match="model"):
        wire.realtime_url("openai", endpoint=None, model=None)
    with pytest.raises(ValueError, match="scheme"):
        wire.realtime_url("voice_live", endpoint="ftp://x", model="m")


def test_default_session_format() -> None:
    assert wire.default_session_format("openai") == "ga"
    assert wire.default_session_format("voice_live") == "beta"
    assert wire.default_session_format("azure_openai") == "ga"
    assert wire.default_session_format("azure_openai", api_version="2025-04-01-preview") == "beta"


def test_headers_per_dialect() -> None:
    def headers(target: wire.RealtimeTarget) -> dict[str, str]:
        return asyncio.run(target.headers(traceparent="00-a-b-01"))

    openai = headers(wire.RealtimeTarget(url="wss://x", dialect="openai", session_format="ga",
                                         api_key="sk-1234"))
    assert openai["Authorization"] == "Bearer sk-1234" and "api-key" not in openai
    assert openai["traceparent"] == "00-a-b-01" and "OpenAI-Beta" not in openai
    beta = headers(wire.RealtimeTarget(url="wss://x", dialect="openai", session_format="beta",
                                       api_key="sk-1234"))
    assert beta["OpenAI-Beta"] == "realtime=v1"
    azure = headers(wire.RealtimeTarget(url="wss://x", dialect="voice_live",
                                        session_format="beta", api_key="az-1234"))
    assert azure["api-key"] == "az-1234" and "Authorization" not in azure


def test_default_credential_uses_an_entra_token(monkeypatch: pytest.MonkeyPatch) -> None:
    scopes: list[str] = []

    async def fake_token(scope: str) -> str:
        scopes.append(scope)
        return "entra-token"

    monkeypatch.setattr(wire, "entra_token", fake_token)
    target = wire.RealtimeTarget(url="wss://x", dialect="voice_live", session_format="beta",
                                 auth="default_credential")
    assert asyncio.run(target.headers())["Authorization"] == "Bearer entra-token"
    assert scopes == [wire.TOKEN_SCOPES["voice_live"]]

    async def failing(scope: str) -> str:
        raise RuntimeError("no credential")

    monkeypatch.setattr(wire, "entra_token", failing)
    with pytest.raises(EndpointError) as caught:
        asyncio.run(target.headers())
    assert caught.value.code == "auth_failed"


def test_missing_azure_identity_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "azure.identity" else real(name, *a))
    with pytest.raises(MissingDependencyError) as caught:
        wire.require_azure_identity(purpose="Voice Live auth")
    assert str(caught.value).endswith("pip install 'voicelab[azure]'")


def test_audio_is_elided_and_decoded() -> None:
    pcm = bytes(range(200))
    encoded = base64.b64encode(pcm).decode()
    delta = {"type": "response.audio.delta", "delta": encoded}
    assert wire.elide_audio(delta)["delta"] == {"omitted": "base64 pcm", "byte_count": 200}
    assert wire.elide_audio(wire.append_audio(pcm[:199]))["audio"]["byte_count"] == 199
    text_delta = {"type": "response.output_audio_transcript.delta", "delta": "hi"}
    assert wire.elide_audio(text_delta) == text_delta
    assert wire.decode_audio(delta) == pcm
    with pytest.raises(ValueError, match="odd-length"):
        wire.decode_audio({"delta": base64.b64encode(b"abc").decode()})
    with pytest.raises(ValueError):
        wire.decode_audio({"delta": "not base64!"})


def test_client_event_builders() -> None:
    assert wire.function_call_output("c1", {"ok": True}) == {
        "type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": "c1", "output": '{"ok": true}'}}
    assert wire.response_create() == {"type": "response.create"}
    assert wire.audio_response_params("ga", voice="marin") == {
        "output_modalities": ["audio"], "audio": {"output": {"voice": "marin"}}}
    assert wire.audio_response_params("beta") == {"modalities": ["audio", "text"]}
    assert wire.voice_param("voice_live", "en-US-AvaNeural") == {"name": "en-US-AvaNeural",
                                                                 "type": "azure-standard"}
    assert wire.voice_param("voice_live", "alloy") == {"name": "alloy", "type": "openai"}
    assert wire.voice_param("openai", "alloy") == "alloy"
    assert wire.error_detail({"type": "error", "error": {"code": "x", "message": "m"}}) == ("x", "m")


@pytest.mark.parametrize(("expected", "spoken", "difference"), [
    ("Don't panic, it's 7 o'clock!", "don\u2019t panic  its 7 oclock", None),
    ("Book a table for two.", "Book a table for three.", "expected 'two' but 'three' was spoken"),
    ("Book a table.", "Book a table now.", "'now' was spoken but not requested"),
    ("Book a table now.", "Book a table.", "expected 'now', which was not spoken"),
])
def test_transcript_difference(expected: str, spoken: str, difference: str | None) -> None:
    found = transcript_difference(expected, spoken)
    assert (found is None) if difference is None else (difference in (found or ""))


def test_normalized_words() -> None:
    assert normalized_words("Hello, WORLD... it's") == ["hello", "world", "its"]


def test_persona_instructions_carry_persona_scenario_data_and_ending() -> None:
    context = PersonaContext(
        scenario=ScenarioConfig(id="s", description="Reschedule a visit.",
                                expected_topics=["date"]),
        persona=PersonaConfig(name="Ravi", goals=["move the visit to Friday"],
                              session_behavior=SessionBehavior(conclude_quickly=True,
                                                               patience="low")),
        data={"visit_id": "V-17"}, providers=Providers())
    text = persona_instructions(context, end_phrase="that is all", extra="Mumble a bit.")
    for fragment in ("Ravi", "move the visit to Friday", "Reschedule a visit.", "date",
                     '"visit_id": "V-17"', "patience is low", END_TOOL, '"that is all"',
                     "Mumble a bit."):
        assert fragment in text
