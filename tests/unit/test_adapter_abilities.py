"""An adapter's optional abilities are read from its class once, against one Protocol each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from voicelab.endpoints import (
    ENDPOINTS,
    AdapterAbilities,
    EndpointContext,
    EndpointEvent,
    SendsDtmf,
    abilities_of,
    declared_capabilities,
    turn_taking_of,
)
from voicelab.personas import KeepsEvidence, PlansTurns
from voicelab.speech import ToneSpeechProvider, cacheable, synthesizes_ahead


class KeypadAdapter:
    """A minimal custom adapter with one optional ability: it presses keys."""

    capabilities = {"streaming_input": True}

    def __init__(self, settings: Mapping[str, Any], context: EndpointContext):
        self.pressed: list[str] = []

    async def connect(self) -> None: ...

    async def send_audio(self, audio: Any) -> None: ...

    async def commit_turn(self) -> None: ...

    async def events(self) -> AsyncIterator[EndpointEvent]:
        return
        yield

    async def interrupt(self) -> None: ...

    async def close(self) -> None: ...

    async def send_dtmf(self, digits: str) -> None:
        self.pressed.append(digits)


def test_twilio_sends_dtmf_and_carries_mulaw_with_constant_conversion_delays():
    twilio = abilities_of(ENDPOINTS.resolve("twilio"))
    assert twilio.sends_dtmf
    assert twilio.wire_codec == "mulaw"
    assert set(twilio.conversion_delay_ms) == {"to_product", "to_user"}
    assert all(delay > 0 for delay in twilio.conversion_delay_ms.values())
    assert twilio.turn_taking({"uri": "ws://127.0.0.1:9/"}) == "server_vad"


def test_websocket_presses_no_keys_declares_no_codec_and_no_delay():
    websocket = abilities_of(ENDPOINTS.resolve("websocket"))
    assert not websocket.sends_dtmf
    assert websocket.wire_codec is None
    assert not websocket.conversion_delay_ms
    assert not websocket.has_outcome_probe
    assert not websocket.checks_settings  # its settings model says everything
    assert websocket.declares_turn_taking


def test_http_says_when_the_product_can_open_and_defaults_to_client_turns():
    http = abilities_of(ENDPOINTS.resolve("http"))
    assert http.reports_product_can_speak_first
    assert not http.declares_turn_taking
    assert http.turn_taking({}) == "client"


def test_the_fake_product_carries_its_own_outcome_probe():
    assert abilities_of(ENDPOINTS.resolve("fake")).has_outcome_probe


def test_pipecat_takes_server_vad_turns_whatever_its_settings():
    assert turn_taking_of(ENDPOINTS.resolve("pipecat"), {"uri": "ws://127.0.0.1:9/"}) == \
        "server_vad"


def test_a_custom_adapter_with_one_ability_has_that_one_only():
    abilities = abilities_of(KeypadAdapter)
    assert isinstance(abilities, AdapterAbilities)
    assert abilities.sends_dtmf and issubclass(KeypadAdapter, SendsDtmf)
    assert not (abilities.has_outcome_probe or abilities.checks_settings
                or abilities.declares_turn_taking or abilities.reports_product_can_speak_first)
    assert abilities.wire_codec is None and not abilities.conversion_delay_ms
    assert abilities.turn_taking({}) == "client"
    assert abilities.product_can_speak_first({})  # an adapter that does not say is not refused
    assert abilities.capabilities["streaming_input"]
    assert not abilities.capabilities["interruption"]  # an undeclared capability is False


def test_abilities_are_resolved_once_per_class():
    assert abilities_of(KeypadAdapter) is abilities_of(KeypadAdapter)


def test_capabilities_that_are_no_mapping_are_a_type_error():
    class Broken(KeypadAdapter):
        capabilities = ["streaming_input"]  # type: ignore[assignment]

    assert abilities_of(Broken).capabilities_problem is not None
    with pytest.raises(TypeError, match="mapping"):
        declared_capabilities(Broken)


def test_a_turn_taking_mode_outside_the_vocabulary_is_refused():
    class Odd(KeypadAdapter):
        @classmethod
        def turn_taking(cls, settings: Mapping[str, Any]) -> str:
            return "telepathy"

    with pytest.raises(TypeError, match="telepathy"):
        abilities_of(Odd).turn_taking({})


def test_persona_abilities_are_protocols():
    from voicelab.personas import PERSONAS

    scripted = PERSONAS.resolve("scripted")
    assert issubclass(scripted, PlansTurns) and issubclass(scripted, KeepsEvidence)
    assert not issubclass(PERSONAS.resolve("synthesizer"), PlansTurns)


def test_speech_abilities_default_when_undeclared():
    assert not synthesizes_ahead(ToneSpeechProvider)  # tones cost a millisecond
    assert not cacheable(ToneSpeechProvider)
    assert synthesizes_ahead(object()) and not cacheable(object())
