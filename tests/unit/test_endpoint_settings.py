"""Adapter settings, capabilities and the loader contract (no sockets)."""

from __future__ import annotations

import datetime

import pytest

from voicelab.doubles.product import FakeEndpointSettings, FakeProductEndpoint
from voicelab.endpoints import (
    ENDPOINTS,
    EndpointContext,
    abilities_of,
    check_capabilities,
    declared_capabilities,
    load_endpoint_class,
)
from voicelab.endpoints.http import HttpEndpoint
from voicelab.endpoints.pipecat import PipecatEndpoint
from voicelab.endpoints.realtime import RealtimeEndpoint
from voicelab.endpoints.websocket import WebSocketEndpoint
from voicelab.errors import ConfigError


@pytest.mark.parametrize(("adapter", "settings", "key"), [
    ("websocket", {}, "endpoint.settings.uri"),
    ("websocket", {"uri": "http://x"}, "endpoint.settings.uri"),
    ("websocket", {"uri": "ws://x", "chunk_ms": 0}, "endpoint.settings.chunk_ms"),
    ("websocket", {"uri": "ws://x", "receive_timeout": 3}, "endpoint.settings.receive_timeout"),
    ("http", {"url": "ws://x"}, "endpoint.settings.url"),
    ("http", {"url": "http://x", "timeout_seconds": -1}, "endpoint.settings.timeout_seconds"),
    ("fake", {"audio_pacing": "slow"}, "endpoint.settings.audio_pacing"),
    ("fake", {"reply_latency_ms": -5}, "endpoint.settings.reply_latency_ms"),
    ("fake", {"reply_latency_ms": [0, -5]}, "endpoint.settings.reply_latency_ms"),
    ("fake", {"opening": "hi"}, "endpoint.settings.opening"),
])
def test_check_settings_names_the_bad_key(adapter, settings, key):
    adapter_class = load_endpoint_class(adapter)
    with pytest.raises(ConfigError) as caught:
        abilities_of(adapter_class).check_settings(settings)
    assert caught.value.key == key


def test_unknown_setting_lists_the_allowed_ones():
    with pytest.raises(ConfigError) as caught:
        abilities_of(WebSocketEndpoint).check_settings({"uri": "ws://x", "acess_token": "t"})
    assert "access_token" in caught.value.message


def test_settings_errors_never_repeat_the_value():
    with pytest.raises(ConfigError) as caught:
        abilities_of(WebSocketEndpoint).check_settings({"uri": "ws://x", "access_token": ["hunter2-secret"]})
    assert "hunter2-secret" not in str(caught.value)
    assert caught.value.key == "endpoint.settings.access_token"


def test_constructors_do_no_io_and_accept_unreachable_targets():
    context = EndpointContext(session_id="s")
    assert WebSocketEndpoint({"uri": "ws://203.0.113.1:9/"}, context).settings.chunk_ms == 100
    HttpEndpoint({"url": "http://203.0.113.1:9/turn"}, context)
    fake = FakeProductEndpoint({}, context)
    assert fake.product.port is None  # the server starts in connect()


def test_fake_settings_split_into_behaviour_and_client():
    settings = FakeEndpointSettings(access_token="tok-abcdef", chunk_ms=20, output_chunk_ms=10,
                                    receive_timeout_seconds=3)
    client = settings.client("ws://127.0.0.1:1/")
    assert (client.access_token, client.chunk_ms, client.receive_timeout_seconds) == \
        ("tok-abcdef", 20, 3)
    behaviour = settings.behaviour()
    assert (behaviour.access_token, behaviour.output_chunk_ms) == ("tok-abcdef", 10)


def test_declared_capabilities():
    assert all(declared_capabilities(WebSocketEndpoint).values())
    assert all(declared_capabilities(FakeProductEndpoint).values())
    http = declared_capabilities(HttpEndpoint)
    assert http["streaming_input"] is False
    assert http["streaming_output"] is False
    assert http["interruption"] is False


def test_streaming_scenario_fails_validation_for_http_only():
    for name in ("websocket", "fake"):
        check_capabilities(load_endpoint_class(name), ["streaming_input", "streaming_output",
                                                       "interruption"],
                           adapter_name=name, source="scenario.yaml")
    with pytest.raises(ConfigError) as caught:
        check_capabilities(load_endpoint_class("http"), ["streaming_input", "streaming_output"],
                           adapter_name="http", source="scenario.yaml")
    assert "streaming_input" in str(caught.value)
    assert caught.value.key == "conversation.required_capabilities"


def test_builtin_names_resolve_to_these_classes():
    assert ENDPOINTS.resolve("websocket") is WebSocketEndpoint
    assert ENDPOINTS.resolve("http") is HttpEndpoint
    assert ENDPOINTS.resolve("fake") is FakeProductEndpoint


@pytest.mark.parametrize(("adapter", "settings", "key"), [
    ("pipecat", {"uri": "ws://127.0.0.1:1/ws",
                 "connect_messages": [{"sent": datetime.date(2026, 1, 1)}]},
     "connect_messages"),
    ("realtime", {"uri": "ws://127.0.0.1:1/", "session": {"tools": [{1, 2}]}}, "session"),
])
def test_what_a_wire_sends_as_json_must_be_json(adapter: str, settings: dict[str, object],
                                                 key: str) -> None:
    # a YAML date or a set in a message the adapter serializes is a settings error at validate,
    # not a serializer crash at connect
    endpoint = {"pipecat": PipecatEndpoint, "realtime": RealtimeEndpoint}[adapter]
    with pytest.raises(ConfigError, match=key):
        abilities_of(endpoint).check_settings(settings)
