"""The realtime adapter against the local Realtime server, over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import Callable
from typing import Any

import pytest

from voicelab.audio import tone_speech
from voicelab.config import SecretScrubber
from voicelab.doubles.realtime import RealtimeServer, RealtimeServerConfig
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent
from voicelab.endpoints.realtime import RealtimeEndpoint
from voicelab.errors import ConfigError

API_KEY = "rt-test-key-0123456789"
LINE = "Sure, your table for two is booked at seven."


def context(**overrides: Any) -> EndpointContext:
    return EndpointContext(session_id="session-1", **overrides)


def settings_for(server: RealtimeServer, spelling: str, **extra: Any) -> dict[str, Any]:
    if spelling == "beta":  # Voice Live speaks the beta spelling
        base = {"dialect": "voice_live", "endpoint": server.http_endpoint, "model": "gpt-realtime"}
    else:
        base = {"dialect": "openai", "endpoint": server.http_endpoint + "/v1",
                "model": "gpt-realtime"}
    return {**base, "api_key": API_KEY, "connect_timeout_seconds": 5,
            "receive_timeout_seconds": 5, **extra}


async def collect(endpoint: RealtimeEndpoint, *, until: Callable[[EndpointEvent], bool],
                  timeout_seconds: float = 5.0,
                  on_event: Callable[[EndpointEvent], Any] | None = None) -> list[EndpointEvent]:
    seen: list[EndpointEvent] = []

    async def run() -> None:
        async for event in endpoint.events():
            seen.append(event)
            if on_event is not None:
                result = on_event(event)
                if asyncio.iscoroutine(result):
                    await result
            if until(event):
                return

    await asyncio.wait_for(run(), timeout_seconds)
    return seen


def of(events: list[EndpointEvent], kind: str) -> list[EndpointEvent]:
    return [event for event in events if event.type == kind]


@pytest.mark.parametrize("spelling", ["ga", "beta"])
def test_full_exchange_is_normalized_in_both_spellings(spelling: str) -> None:
    user_audio = tone_speech("I would like a table for two", seed=7)

    async def scenario() -> tuple[list[EndpointEvent], RealtimeServer, dict[str, Any]]:
        config = RealtimeServerConfig(spelling=spelling, api_key=API_KEY, lines=[LINE],
                                      input_transcript="I would like a table for two",
                                      tool_calls={1: {"name": "book_table",
                                                      "arguments": {"party": 2}}})
        async with RealtimeServer(config) as server:
            endpoint = RealtimeEndpoint(settings_for(server, spelling, tool_outputs={
                "book_table": {"booked": True}}), context())
            await endpoint.connect()
            await endpoint.send_audio(user_audio)
            await endpoint.commit_turn()
            events = await collect(endpoint, until=lambda e: e.type == "turn_complete")
            await endpoint.close()
            return events, server, endpoint.session_config

    events, server, session = asyncio.run(scenario())
    record = server.connections[0]
    # Client side: session.update first, with server VAD off, audio as base64 appends, commit.
    first = record.client_events[0]
    assert first["type"] == "session.update"
    if spelling == "beta":
        assert "turn_detection" in first["session"] and first["session"]["turn_detection"] is None
        assert first["session"]["input_audio_format"] == "pcm16"
        assert record.auth == "api-key" and record.path == "/voice-live/realtime"
        assert record.query == {"api-version": "2025-10-01", "model": "gpt-realtime"}
    else:
        assert first["session"]["audio"]["input"]["turn_detection"] is None
        assert first["session"]["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
        assert record.auth == "bearer" and record.path == "/v1/realtime"
    assert first["session"] == session
    order = [e["type"] for e in record.client_events if e["type"] != "input_audio_buffer.append"]
    assert order == ["session.update", "input_audio_buffer.commit", "response.create",
                     "conversation.item.create", "response.create"]
    assert record.committed_audio == [user_audio.to_bytes()]
    output = record.events_of("conversation.item.create")[0]["item"]
    assert output["type"] == "function_call_output" and json.loads(output["output"]) == {
        "booked": True}
    # Product side, normalized.
    assert [e.text for e in of(events, "input_transcript")] == ["I would like a table for two"]
    (call,) = of(events, "tool_call")
    assert call.data["name"] == "book_table" and call.data["arguments"] == {"party": 2}
    (result,) = of(events, "tool_result")
    assert result.data["call_id"] == call.data["call_id"] and result.data["output"] == {
        "booked": True}
    audio = b"".join(e.audio or b"" for e in of(events, "audio_delta"))
    assert audio == tone_speech(LINE, seed=0).to_bytes()
    assert [e.text for e in of(events, "transcript_final")] == [LINE]
    completes = of(events, "turn_complete")
    assert len(completes) == 1 and completes[0].data["status"] == "completed"
    assert any(e.type == "raw" and e.data.get("continued_after_tools") for e in events)
    deltas = of(events, "audio_delta")
    assert all(e.raw["delta"]["omitted"] == "base64 pcm" for e in deltas)
    stamps = [e.received_ns for e in events]
    assert stamps == sorted(stamps)


def test_interrupt_sends_cancel_and_reports_a_cancelled_turn() -> None:
    long_line = " ".join(["word"] * 60)

    async def scenario() -> tuple[list[EndpointEvent], RealtimeServer]:
        config = RealtimeServerConfig(lines=[long_line], delta_delay_seconds=0.02)
        async with RealtimeServer(config) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "ga"), context())
            await endpoint.connect()
            await endpoint.send_audio(tone_speech("hello", seed=1))
            await endpoint.commit_turn()
            interrupted = False

            async def barge_in(event: EndpointEvent) -> None:
                nonlocal interrupted
                if event.type == "audio_delta" and not interrupted:
                    interrupted = True
                    await endpoint.interrupt()

            events = await collect(endpoint, until=lambda e: e.type == "turn_complete",
                                   on_event=barge_in)
            await endpoint.close()
            return events, server

    events, server = asyncio.run(scenario())
    assert server.events_of("response.cancel")
    kinds = [e.type for e in events]
    assert kinds.index("interruption") < kinds.index("turn_complete")
    assert of(events, "turn_complete")[0].data["status"] == "cancelled"
    received = sum(len(e.audio or b"") for e in of(events, "audio_delta"))
    assert 0 < received < tone_speech(long_line, seed=0).byte_count / 2


def test_rejected_handshake_raises_unauthorized_without_the_key() -> None:
    async def scenario() -> EndpointError:
        async with RealtimeServer(RealtimeServerConfig(api_key="the-right-key")) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "beta"), context())
            with pytest.raises(EndpointError) as caught:
                await endpoint.connect()
            return caught.value

    error = asyncio.run(scenario())
    assert error.code == "unauthorized" and "HTTP 401" in str(error)
    assert API_KEY not in str(error)


def test_refused_connection_raises_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = RealtimeEndpoint({"uri": f"ws://127.0.0.1:{port}/realtime",
                                 "connect_timeout_seconds": 2}, context())
    with pytest.raises(EndpointError) as caught:
        asyncio.run(endpoint.connect())
    assert caught.value.code == "connection_refused"


def test_unanswered_session_update_times_out() -> None:
    async def scenario() -> EndpointError:
        async with RealtimeServer(RealtimeServerConfig(ignore_session_update=True)) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "ga", connect_timeout_seconds=0.3),
                                        context())
            with pytest.raises(EndpointError) as caught:
                await endpoint.connect()
            return caught.value

    assert asyncio.run(scenario()).code == "session_timeout"


def test_product_error_event_is_normalized_and_the_session_goes_on() -> None:
    async def scenario() -> list[EndpointEvent]:
        async with RealtimeServer(RealtimeServerConfig(error_on_response=1)) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "beta"), context())
            await endpoint.connect()
            await endpoint.send_audio(tone_speech("first", seed=1))
            await endpoint.commit_turn()
            events = await collect(endpoint, until=lambda e: e.type == "error")
            await endpoint.send_audio(tone_speech("second", seed=1))
            await endpoint.commit_turn()
            events += await collect(endpoint, until=lambda e: e.type == "turn_complete")
            await endpoint.close()
            return events

    events = asyncio.run(scenario())
    (error,) = of(events, "error")
    assert error.data["code"] == "server_error" and error.data["origin"] == "product"
    assert error.data["error_type"] == "server_error" and "server had an error" in error.text
    assert of(events, "turn_complete")[0].data["status"] == "completed"


def test_dropped_connection_becomes_error_then_closed() -> None:
    async def scenario() -> list[EndpointEvent]:
        async with RealtimeServer(RealtimeServerConfig(drop_on_response=1)) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "ga"), context())
            await endpoint.connect()
            await endpoint.send_audio(tone_speech("hello", seed=1))
            await endpoint.commit_turn()
            events = await collect(endpoint, until=lambda e: e.type == "closed")
            with pytest.raises(EndpointError):
                await endpoint.commit_turn()
            await endpoint.close()
            return events

    events = asyncio.run(scenario())
    assert [e.type for e in events[-2:]] == ["error", "closed"]
    assert events[-2].data["code"] == "connection_lost"
    assert events[-1].data["initiated_by"] == "product"


def test_silent_product_trips_the_receive_timeout() -> None:
    async def scenario() -> list[EndpointEvent]:
        async with RealtimeServer(RealtimeServerConfig(silent_from_response=1)) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "ga", receive_timeout_seconds=0.3),
                                        context())
            await endpoint.connect()
            await endpoint.commit_turn()  # nothing appended: response.create only
            events = await collect(endpoint, until=lambda e: e.type == "closed")
            assert not server.events_of("input_audio_buffer.commit")
            return events

    events = asyncio.run(scenario())
    assert [e.data.get("code") for e in of(events, "error")] == ["receive_timeout"]
    assert events[-1].type == "closed" and events[-1].data["initiated_by"] == "adapter"


def test_opening_response_makes_the_model_speak_first() -> None:
    async def scenario() -> list[EndpointEvent]:
        async with RealtimeServer(RealtimeServerConfig(lines=["Welcome!"])) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "beta", opening_response=True),
                                        context())
            await endpoint.connect()
            events = await collect(endpoint, until=lambda e: e.type == "turn_complete")
            await endpoint.close()
            return events

    events = asyncio.run(scenario())
    assert [e.text for e in of(events, "transcript_final")] == ["Welcome!"]


def test_secrets_never_reach_raw_events_or_messages() -> None:
    tenant_secret = "tenant-secret-value-42"

    async def scenario() -> list[EndpointEvent]:
        config = RealtimeServerConfig(api_key=API_KEY, lines=["ok"])
        async with RealtimeServer(config) as server:
            session = {"instructions": f"Use {API_KEY} and {tenant_secret} carefully."}
            endpoint = RealtimeEndpoint(settings_for(server, "beta", session=session),
                                        context(scrubber=SecretScrubber([tenant_secret])))
            await endpoint.connect()
            await endpoint.send_audio(tone_speech("hi", seed=1))
            await endpoint.commit_turn()
            events = await collect(endpoint, until=lambda e: e.type == "turn_complete")
            await endpoint.close()
            events += await collect(endpoint, until=lambda e: e.type == "closed")
            return events

    events = asyncio.run(scenario())
    echoed = [e for e in events if isinstance(e.raw, dict) and e.raw.get("type") ==
              "session.updated"]
    assert echoed and "***" in echoed[0].raw["session"]["instructions"]
    dumped = json.dumps([{"raw": e.raw, "data": e.data, "text": e.text} for e in events],
                        default=str)
    assert API_KEY not in dumped and tenant_secret not in dumped
    spoken = base64.b64encode(tone_speech("ok", seed=0).to_bytes()).decode()
    middle = spoken[len(spoken) // 2:len(spoken) // 2 + 64]
    assert middle.strip("A") and middle not in dumped  # PCM travels in `audio`, not in records


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError) as caught:
        RealtimeEndpoint.check_settings({"dialect": "openai", "model": "m", "colour": "x"})
    assert caught.value.key == "endpoint.settings.colour"
    with pytest.raises(ConfigError) as caught:
        RealtimeEndpoint.check_settings({"dialect": "voice_live", "model": "gpt-realtime"})
    assert "endpoint" in str(caught.value)
    assert RealtimeEndpoint.capabilities["interruption"] is True


def test_a_too_short_commit_is_reported_like_the_service_does() -> None:
    async def scenario() -> list[EndpointEvent]:
        async with RealtimeServer(RealtimeServerConfig()) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "ga"), context())
            await endpoint.connect()
            await endpoint.send_audio(tone_speech("a", seed=1).slice_seconds(0, 0.05))
            await endpoint.commit_turn()
            events = await collect(endpoint, until=lambda e: e.type == "turn_complete")
            await endpoint.close()
            return events

    events = asyncio.run(scenario())
    (error,) = of(events, "error")
    assert error.data["code"] == "input_audio_buffer_commit_empty"
    assert "50.00ms" in error.text


def test_a_storm_of_unknown_events_ends_in_a_resource_limit_error() -> None:
    """Whether the storm outruns the session setup (connect fails) or comes after it (an
    error event), it ends in ``resource_limit`` with at most the burst recorded."""
    async def scenario() -> tuple[str, str, list[EndpointEvent]]:
        config = RealtimeServerConfig(hostile="event_storm")
        async with RealtimeServer(config) as server:
            endpoint = RealtimeEndpoint(settings_for(server, "ga", limits={
                "events_per_second": 100, "events_burst": 500}), context())
            try:
                await endpoint.connect()
            except EndpointError as error:
                return error.code, str(error), []
            events = await collect(endpoint, until=lambda e: e.type == "error",
                                   timeout_seconds=20)
            await endpoint.close()
            return str(events[-1].data["code"]), str(events[-1].text), events

    code, text, events = asyncio.run(scenario())
    assert code == "resource_limit", text
    assert "of them telemetry.unknown" in text
    assert len(of(events, "raw")) <= 500  # what was recorded stayed within the burst
