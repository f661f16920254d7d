"""The WebSocket adapter against scripted local servers: wire details, every fault, secrets."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voicelab.audio import PcmAudio, tone_speech
from voicelab.config import SecretScrubber
from voicelab.doubles.product import FakeProduct
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent
from voicelab.endpoints.websocket import WebSocketEndpoint

TOKEN = "tok-SECRET-4d2f9a"
HEADER_SECRET = "hdr-SECRET-77c1e0"
RUN_SECRET = "run-SECRET-0b5e"
DATA = {"session_id": "s-1", "context": {"topic": "daily planning", "when": 3},
        "items": [1, "two", None]}


def context() -> EndpointContext:
    return EndpointContext(session_id="s-1", data=DATA, scrubber=SecretScrubber([RUN_SECRET]))


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 15))


async def collect_all(endpoint: WebSocketEndpoint, timeout: float = 5.0) -> list[EndpointEvent]:
    """Every event up to and including ``closed`` (``events()`` ends after it)."""

    async def drain() -> list[EndpointEvent]:
        return [event async for event in endpoint.events()]

    return await asyncio.wait_for(drain(), timeout)


@contextlib.asynccontextmanager
async def scripted(handler, **kwargs):
    """A WebSocket server on 127.0.0.1 running ``handler(ws, received)`` per connection."""
    received: list[str | bytes] = []

    async def session(ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            await handler(ws, received)

    async with serve(session, "127.0.0.1", 0, compression=None, **kwargs) as server:
        port = server.sockets[0].getsockname()[1]
        yield f"ws://127.0.0.1:{port}/", received, server


async def read(ws: ServerConnection, received: list, count: int = 1) -> None:
    for _ in range(count):
        received.append(await ws.recv())


async def wait_closed(ws: ServerConnection) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for _ in ws:
            pass


def websocket(uri: str, **settings) -> WebSocketEndpoint:
    return WebSocketEndpoint({"uri": uri, "receive_timeout_seconds": 2.0, **settings}, context())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def codes(events: list[EndpointEvent]) -> list[str]:
    return [e.data["code"] for e in events if e.type == "error"]


def test_handshake_headers_init_frames_and_control_messages():
    headers = {}

    async def handler(ws, received):
        headers.update((k.lower(), v) for k, v in ws.request.headers.raw_items())
        await read(ws, received, 1 + 4 + 2 + 1)
        await ws.close()

    async def scenario():
        async with scripted(handler) as (uri, received, _):
            endpoint = websocket(uri, access_token=TOKEN, chunk_ms=250,
                                 headers={"X-Api-Key": HEADER_SECRET})
            await endpoint.connect()
            await endpoint.send_audio(PcmAudio(np.ones(24_000, dtype=np.int16)))
            await endpoint.commit_turn()
            await endpoint.interrupt()
            events = await collect_all(endpoint)
            await endpoint.close()
            return received, events

    received, events = run(scenario())
    assert json.loads(received[0]) == {"type": "evaluator.init", "request": DATA}
    assert [len(frame) for frame in received[1:5]] == [12_000] * 4
    assert [json.loads(m)["type"] for m in received[5:]] == [
        "input_audio_buffer.commit", "response.create", "response.cancel"]
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["x-api-key"] == HEADER_SECRET
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, len(trace_id), len(span_id), flags) == ("00", 32, 16, "01")
    # the product closed (1000) while a response was pending
    assert [e.type for e in events] == ["error", "closed"]
    assert codes(events) == ["closed_mid_turn"]


def test_connection_refused_fails_fast():
    async def scenario():
        endpoint = websocket(f"ws://127.0.0.1:{free_port()}/", connect_timeout_seconds=3)
        with pytest.raises(EndpointError) as caught:
            await endpoint.connect()
        await endpoint.close()
        return caught.value

    error = run(scenario())
    assert error.code == "connection_refused"


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("tok-WRONG-31337", 403)])
def test_rejected_handshake_names_the_status_but_no_secret(token, status):
    async def scenario():
        async with FakeProduct({"access_token": TOKEN}) as product:
            endpoint = websocket(product.uri + f"?access_token={TOKEN}", access_token=token)
            with pytest.raises(EndpointError) as caught:
                await endpoint.connect()
            return caught.value

    error = run(scenario())
    assert error.code == "handshake_rejected"
    assert f"HTTP {status}" in str(error)
    assert TOKEN not in str(error)
    assert "tok-WRONG-31337" not in str(error)


def test_a_server_that_never_completes_the_handshake_times_out():
    async def scenario():
        async def silent(reader, writer):
            await asyncio.sleep(10)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        endpoint = websocket(f"ws://127.0.0.1:{port}/", connect_timeout_seconds=0.3)
        with pytest.raises(EndpointError) as caught:
            await endpoint.connect()
        server.close()
        return caught.value

    # the code is the proof, not a clock: the silent server holds the connection for 10 s,
    # so only the 0.3 s connect timeout gives ``connect_timeout``
    assert run(scenario()).code == "connect_timeout"


def test_malformed_json_odd_frames_and_unknown_types_do_not_end_the_stream():
    async def handler(ws, received):
        await read(ws, received)
        await ws.send("{not json")
        await ws.send(b"\x01\x02\x03")
        await ws.send(json.dumps({"type": "session.updated"}))
        await ws.send(b"\x00\x00\x01\x00")
        await ws.send(json.dumps({"type": "response.output_audio_transcript.done",
                                  "transcript": "still here"}))
        await ws.send(json.dumps({"type": "response.done", "response": {"status": "completed"}}))
        await ws.close()

    async def scenario():
        async with scripted(handler) as (uri, _, _server):
            endpoint = websocket(uri)
            await endpoint.connect()
            return await collect_all(endpoint)

    events = run(scenario())
    assert [e.type for e in events] == ["error", "error", "raw", "audio_delta",
                                        "transcript_final", "turn_complete", "closed"]
    assert codes(events) == ["malformed_json", "invalid_audio"]
    assert events[3].audio == b"\x00\x00\x01\x00"
    assert events[-1].data["code"] == 1000  # a clean close between turns is not an error
    assert events[-1].data["initiated_by"] == "product"


def test_an_oversized_message_closes_with_message_too_large():
    async def handler(ws, received):
        await read(ws, received)
        await ws.send(b"\x00" * 5000)
        await wait_closed(ws)

    async def scenario():
        async with scripted(handler) as (uri, _, _server):
            endpoint = websocket(uri, max_message_bytes=2048)
            await endpoint.connect()
            events = await collect_all(endpoint)
            with pytest.raises(EndpointError) as caught:
                await endpoint.commit_turn()
            await endpoint.close()
            await endpoint.close()  # idempotent
            return events, caught.value

    events, send_error = run(scenario())
    assert [e.type for e in events] == ["error", "closed"]
    assert codes(events) == ["message_too_large"]
    assert events[-1].data["code"] == 1009
    assert events[-1].data["initiated_by"] == "adapter"
    assert send_error.code == "connection_closed"


@pytest.mark.parametrize(("ending", "code", "close_code"), [
    ("close_1000", "closed_mid_turn", 1000),
    ("close_1011", "connection_closed", 1011),
    ("drop", "connection_lost", 1006),
])
def test_the_product_ending_the_connection_mid_turn(ending, code, close_code):
    async def handler(ws, received):
        await read(ws, received, 4)  # init, one frame, commit, response.create
        await ws.send(b"\x00\x00" * 480)
        if ending == "drop":
            ws.transport.abort()
        else:
            await ws.close(int(ending[-4:]), "going")

    async def scenario():
        async with scripted(handler) as (uri, _, _server):
            endpoint = websocket(uri, chunk_ms=1000)
            await endpoint.connect()
            await endpoint.send_audio(tone_speech("Hi.", seed=1).slice_seconds(0, 0.5))
            await endpoint.commit_turn()
            events = await collect_all(endpoint)
            await endpoint.close()
            return events

    events = run(scenario())
    assert [e.type for e in events] == ["audio_delta", "error", "closed"]
    assert codes(events) == [code]
    assert events[-1].data["code"] == close_code
    assert events[-1].data["initiated_by"] == "product"


def test_receive_timeout_applies_only_while_a_response_is_pending():
    async def handler(ws, received):
        await wait_closed(ws)

    async def scenario():
        async with scripted(handler) as (uri, _, _server):
            endpoint = websocket(uri, receive_timeout_seconds=0.2)
            await endpoint.connect()
            events = endpoint.events()
            with pytest.raises(TimeoutError):  # idle, no response pending: no timeout event
                await asyncio.wait_for(anext(events), 0.5)
            await endpoint.close()
            return [e async for e in endpoint.events()]

    events = run(scenario())
    assert [e.type for e in events] == ["closed"]
    assert events[0].data["initiated_by"] == "evaluator"


def test_configured_secrets_never_reach_events_errors_or_logs(caplog):
    async def handler(ws, received):
        await read(ws, received)
        leak = (f"{ws.request.headers['Authorization']} {ws.request.headers['X-Api-Key']} "
                f"{RUN_SECRET}")
        await ws.send(json.dumps({"type": "response.output_audio_transcript.done",
                                  "transcript": leak}))
        await ws.send(json.dumps({"type": "vendor.debug", "access_token": TOKEN, "note": leak}))
        await ws.send(json.dumps({"type": "error", "error": {"code": "e", "message": leak}}))
        await ws.send("{" + leak)
        await ws.close(4000, TOKEN)

    async def scenario():
        async with scripted(handler) as (uri, _, _server):
            endpoint = websocket(uri + f"?key={TOKEN}", access_token=TOKEN,
                                 headers={"X-Api-Key": HEADER_SECRET})
            await endpoint.connect()
            return await collect_all(endpoint)

    with caplog.at_level(logging.DEBUG, logger="voicelab"):
        events = run(scenario())
    assert [e.type for e in events] == ["transcript_final", "raw", "error", "error", "error",
                                        "closed"]
    dumped = json.dumps([[e.type, e.text, e.data, e.raw] for e in events]) + caplog.text
    for secret in (TOKEN, HEADER_SECRET, RUN_SECRET):
        assert secret not in dumped
    assert "***" in events[0].text
    assert events[1].raw["access_token"] == "***"
