"""Golden wire tests: a recorded exchange each adapter must produce and parse exactly.

The fixtures hold message types and JSON fields, not audio bytes: runs of audio frames are one
``{"binary_audio": "<frames>"}`` step and volatile values (monotonic ns) are ``"<ns>"``.
Regenerate after an intended protocol change with ``VOICELAB_UPDATE_GOLDEN=1 pytest <this file>``
and review the diff.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voicelab.audio import tone_speech
from voicelab.doubles.product import FakeHttpProduct, FakeProductEndpoint
from voicelab.endpoints import EndpointContext
from voicelab.endpoints.http import HttpEndpoint
from voicelab.endpoints.websocket import WebSocketEndpoint

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
WEBSOCKET_GOLDEN = GOLDEN / "websocket_v1_exchange.json"
HTTP_GOLDEN = GOLDEN / "http_v1_exchange.json"
UPDATE = os.environ.get("VOICELAB_UPDATE_GOLDEN") == "1"

SESSION = "planning-session-001"
DATA = {"session_id": SESSION,
        "context": {"topic": "daily planning",
                    "requested_reminder": "Submit the weekly summary at 16:00"}}
USER_LINE = "Please record the plan and save the reminder."
FRAMES = {"binary_audio": "<frames>"}


def context() -> EndpointContext:
    return EndpointContext(session_id=SESSION, data=DATA)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 15))


def stable(message: dict[str, Any]) -> dict[str, Any]:
    """A recorded message with its volatile values replaced by placeholders."""
    if "binary_audio" in message:
        return dict(FRAMES)
    message = dict(message)
    if isinstance(message.get("server_timing"), dict):
        message["server_timing"] = {key: None if value is None else "<ns>"
                                    for key, value in message["server_timing"].items()}
    if isinstance(message.get("client_messages"), list):
        message["client_messages"] = collapse(message["client_messages"])
    return message


def is_audio(item: Any) -> bool:
    if isinstance(item, list):  # an exchange step: [side, message]
        return item[1] == FRAMES
    return item == FRAMES or item in ("binary_audio", "audio_delta")


def collapse(items: list[Any]) -> list[Any]:
    """Consecutive repeats of an audio step become one."""
    out: list[Any] = []
    for item in items:
        if not (out and item == out[-1] and is_audio(item)):
            out.append(item)
    return out


async def drive(endpoint) -> list[str]:
    """The golden conversation: opening, one user turn, completion, close."""
    await endpoint.connect()
    events = endpoint.events()
    seen = []

    async def until(kind: str) -> None:
        while True:
            seen.append(await asyncio.wait_for(anext(events), 5))
            if seen[-1].type in (kind, "closed"):
                return

    await until("turn_complete")
    await endpoint.send_audio(tone_speech(USER_LINE, seed=42))
    await endpoint.commit_turn()
    await until("conversation_complete")
    await endpoint.close()
    await until("closed")
    return collapse([event.type for event in seen])


def check_or_update(path: Path, actual: dict[str, Any]) -> dict[str, Any]:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=2) + "\n", encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


def test_websocket_adapter_and_fake_product_produce_the_golden_exchange():
    async def scenario():
        endpoint = FakeProductEndpoint({}, context())
        event_types = await drive(endpoint)
        return endpoint.session_record, event_types

    record, event_types = run(scenario())
    exchange = collapse([[side, stable(message)] for side, message in record.exchange])
    actual = {"protocol": "voicelab websocket v1", "data": DATA, "user_turns": [USER_LINE],
              "exchange": exchange, "normalized_events": event_types}
    golden = check_or_update(WEBSOCKET_GOLDEN, actual)
    assert exchange == golden["exchange"]
    assert event_types == golden["normalized_events"]


def test_websocket_adapter_replays_the_golden_exchange_against_a_scripted_product():
    golden = json.loads(WEBSOCKET_GOLDEN.read_text(encoding="utf-8"))
    pcm = tone_speech("golden", seed=3).to_bytes()[:4800]
    received: list[list[Any]] = []

    def concrete(message: dict[str, Any]) -> str | bytes:
        if message == FRAMES:
            return pcm
        message = dict(message)
        if isinstance(message.get("server_timing"), dict):
            message["server_timing"] = {key: None if value is None else 1
                                        for key, value in message["server_timing"].items()}
        return json.dumps(message)

    async def product(ws: ServerConnection) -> None:
        pending: str | bytes | None = None
        for side, message in golden["exchange"]:
            if side == "product":
                for _ in range(3 if message == FRAMES else 1):
                    await ws.send(concrete(message))
                continue
            while True:  # an evaluator step: one message, or a run of audio frames
                incoming = pending if pending is not None else await ws.recv()
                pending = None
                is_audio = isinstance(incoming, bytes)
                if message == FRAMES and not is_audio:
                    pending = incoming
                    break
                received.append(["evaluator", FRAMES if is_audio else json.loads(incoming)])
                if message != FRAMES:
                    break
        with contextlib.suppress(ConnectionClosed):
            await ws.recv()

    async def scenario():
        async with serve(product, "127.0.0.1", 0, compression=None) as server:
            port = server.sockets[0].getsockname()[1]
            endpoint = WebSocketEndpoint({"uri": f"ws://127.0.0.1:{port}/"}, context())
            return await drive(endpoint)

    event_types = run(scenario())
    expected = [step for step in golden["exchange"] if step[0] == "evaluator"]
    assert collapse(received) == expected
    assert expected[0] == ["evaluator", {"type": "evaluator.init", "request": DATA}]
    assert event_types == golden["normalized_events"]


def http_stable(message: dict[str, Any]) -> dict[str, Any]:
    message = dict(message)
    for key in ("audio_bytes", "traceparent"):
        if key in message:
            message[key] = f"<{key}>"
    if isinstance(message.get("audio"), dict):
        message["audio"] = {**message["audio"], "byte_count": "<bytes>"}
    return message


def test_http_adapter_request_and_reply_shapes_match_the_golden():
    async def scenario():
        async with FakeHttpProduct() as product:
            endpoint = HttpEndpoint({"url": product.url, "opening_request": True}, context())
            await endpoint.connect()
            events = endpoint.events()
            seen = []
            while not seen or seen[-1].type != "turn_complete":
                seen.append(await asyncio.wait_for(anext(events), 5))
            await endpoint.send_audio(tone_speech(USER_LINE, seed=42))
            await endpoint.commit_turn()
            while seen[-1].type != "conversation_complete":
                seen.append(await asyncio.wait_for(anext(events), 5))
            await endpoint.close()
            return product.requests, seen

    requests, events = run(scenario())
    reply_raw = next(e.raw for e in events if e.type == "tool_call")
    actual = {"protocol": "voicelab.http.v1", "requests": [http_stable(r) for r in requests],
              "turn_reply": http_stable(reply_raw),
              "normalized_events": [e.type for e in events]}
    golden = check_or_update(HTTP_GOLDEN, actual)
    assert actual["requests"] == golden["requests"]
    assert actual["turn_reply"] == golden["turn_reply"]
    assert actual["normalized_events"] == golden["normalized_events"]


def test_http_adapter_parses_the_golden_reply_from_a_scripted_product():
    golden = json.loads(HTTP_GOLDEN.read_text(encoding="utf-8"))
    reply = dict(golden["turn_reply"])
    reply["audio"] = base64.b64encode(np.zeros(480, dtype="<i2").tobytes()).decode()
    body = json.dumps(reply).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        headers = (await reader.readuntil(b"\r\n\r\n")).decode().lower()
        length = int(headers.split("content-length:")[1].split("\r\n")[0])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()

    async def scenario():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        endpoint = HttpEndpoint({"url": f"http://127.0.0.1:{port}/turn"}, context())
        await endpoint.connect()
        await endpoint.send_audio(tone_speech("hi", seed=1))
        await endpoint.commit_turn()
        events = endpoint.events()
        seen = [await asyncio.wait_for(anext(events), 5)]
        while seen[-1].type != "conversation_complete":
            seen.append(await asyncio.wait_for(anext(events), 5))
        await endpoint.close()
        server.close()
        return seen

    events = run(scenario())
    turn_events = golden["normalized_events"][golden["normalized_events"].index("turn_complete")
                                              + 1:]
    assert [e.type for e in events] == turn_events
