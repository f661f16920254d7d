"""The Twilio adapter's ends of a call, over real sockets: the product's close codes, a silent
product timing out, the calls the runner never makes, a refused connection, DTMF behind queued
audio, and the Twilio bot double's own strictness about protocol violations.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from _twilio_calls import Events, run, scripted_product
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from voicelab.audio import PcmAudio
from voicelab.doubles.twilio import TwilioBot
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent
from voicelab.endpoints._socket import LOOP_STAMPED_ATTRIBUTE
from voicelab.endpoints.twilio import TwilioEndpoint

# --- closures, timeouts and the calls the runner never makes ------------------------------------

@pytest.mark.parametrize("code, expected", [
    (1000, ["conversation_complete", "closed"]),  # the bot hung up
    (1011, ["error", "closed"]),
])
def test_the_products_close(code, expected):
    async def script(ws: ServerConnection, received: list[tuple[int, dict]]) -> None:
        await ws.close(code, "bye")

    async def body(uri: str) -> list[EndpointEvent]:
        endpoint = TwilioEndpoint({"uri": uri}, EndpointContext(session_id="s"))
        await endpoint.connect()
        events = Events(endpoint)
        await events.task
        line = PcmAudio(np.zeros(480, dtype=np.int16))
        if code == 1000:  # a caller talking on after the bot hung up is no failure of the line
            await endpoint.send_audio(line)
        else:
            with pytest.raises(EndpointError) as closed:
                await endpoint.send_audio(line)
            assert closed.value.code == "connection_closed"
        return events.items

    events, _ = run(scripted_product(script, body))
    assert [e.type for e in events] == expected
    closed = {k: v for k, v in events[-1].data.items() if k != LOOP_STAMPED_ATTRIBUTE}
    assert closed == {"reason": "bye", "code": code, "initiated_by": "product"}
    if code != 1000:
        assert events[0].data["code"] == "connection_closed"


def test_a_silent_product_times_out_and_the_runner_only_calls_are_harmless():
    async def script(ws: ServerConnection, received: list[tuple[int, dict]]) -> None:
        pass  # listens until the caller hangs up

    async def body(uri: str) -> list[EndpointEvent]:
        endpoint = TwilioEndpoint({"uri": uri, "receive_timeout_seconds": 0.3},
                                  EndpointContext(session_id="s"))
        await endpoint.connect()
        await endpoint.commit_turn()
        await endpoint.interrupt()
        events = Events(endpoint)
        await events.task
        await endpoint.close()
        return events.items

    events, received = run(scripted_product(script, body))
    assert [e.type for e in events] == ["error", "closed"]
    assert events[0].data["code"] == "receive_timeout"
    assert events[1].data["initiated_by"] == "adapter"
    assert [m["event"] for _, m in received] == ["connected", "start"]  # no stop: it timed out


def test_connecting_to_nothing_is_refused():
    async def body() -> None:
        endpoint = TwilioEndpoint({"uri": "ws://127.0.0.1:9/"}, EndpointContext(session_id="s"))
        with pytest.raises(EndpointError) as refused:
            await endpoint.connect()
        assert refused.value.code == "connection_refused"
        await endpoint.close()

    run(body())


def test_dtmf_follows_the_line_audio_already_queued():
    async def script(ws: ServerConnection, received: list[tuple[int, dict]]) -> None:
        pass  # listens until the caller hangs up

    async def body(uri: str) -> None:
        endpoint = TwilioEndpoint({"uri": uri}, EndpointContext(session_id="s"))
        await endpoint.connect()
        events = Events(endpoint)
        await endpoint.send_audio(PcmAudio(np.zeros(2400, dtype=np.int16)))  # 5 frames
        await endpoint.send_dtmf("4*")
        with pytest.raises(ValueError):
            await endpoint.send_dtmf("4a")
        await asyncio.sleep(0.3)
        await endpoint.close()
        await events.task

    _, received = run(scripted_product(script, body))
    kinds = [m["event"] for _, m in received]
    assert kinds == ["connected", "start", *["media"] * 5, "dtmf", "dtmf", "stop"]
    assert [m["dtmf"]["digit"] for _, m in received if m["event"] == "dtmf"] == ["4", "*"]
    stamps = [ns for ns, m in received if m["event"] == "media"]
    # one frame every 20 ms, not five at once: the five span 80 ms (less scheduling jitter)
    assert stamps[-1] - stamps[0] >= 50_000_000


def test_the_bot_closes_on_a_protocol_violation():
    async def call() -> tuple[list[str], list[EndpointEvent]]:
        async with TwilioBot({"greeting": ""}) as bot:
            from websockets.asyncio.client import connect

            async with connect(bot.uri) as ws:
                await ws.send(json.dumps({"event": "connected", "protocol": "Call",
                                          "version": "1.0.0"}))
                await ws.send(json.dumps({"event": "media", "sequenceNumber": "1"}))
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
            return bot.calls[0].violations, []

    violations, _ = run(call())
    assert violations == ["expected start after connected, got 'media'"]


@pytest.mark.parametrize("field, value, violation", [
    ("dtmf", "5", "malformed dtmf '5'"),
    ("media", "x", "media chunk None (expected 1), track None, timestamp None"),
    ("mark", "x", "echo of a mark never sent (or echoed twice): None"),
])
def test_a_field_that_is_not_an_object_is_a_violation(field, value, violation):
    start = {"accountSid": "AC1", "callSid": "CA1", "streamSid": "MZ1", "tracks": ["inbound"],
             "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
             "customParameters": {}}

    async def call() -> tuple[list[str], int | None]:
        async with TwilioBot({"greeting": ""}) as bot:
            from websockets.asyncio.client import connect

            async with connect(bot.uri) as ws:
                await ws.send(json.dumps({"event": "connected", "protocol": "Call",
                                          "version": "1.0.0"}))
                await ws.send(json.dumps({"event": "start", "sequenceNumber": "1",
                                          "streamSid": "MZ1", "start": start}))
                await ws.send(json.dumps({"event": field, "sequenceNumber": "2",
                                          "streamSid": "MZ1", field: value}))
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
            return bot.calls[0].violations, closed.value.rcvd.code if closed.value.rcvd else None

    violations, code = run(call())
    assert violations == [violation]
    assert code == 1008
