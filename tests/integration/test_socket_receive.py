"""The shared WebSocket receive path: messages straight from the protocol callback, in order,
stamped with their arrival; fragments joined; invalid text closes with 1007; the end of the
connection is one Closure."""

from __future__ import annotations

import asyncio
import time

from websockets.asyncio.server import serve

from voicelab.config import SecretScrubber
from voicelab.endpoints._socket import Closure, open_websocket, receive_into


async def _receive_all(handler) -> list[tuple[int, object]]:
    async with serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        ws = await open_websocket(f"ws://127.0.0.1:{port}", headers={},
                                  connect_timeout_seconds=5, max_message_bytes=1 << 20,
                                  clock_ns=time.perf_counter_ns, where="test server",
                                  scrubber=SecretScrubber(), user_agent="test")
        # messages that arrive before the receiver is attached wait, in order
        await asyncio.sleep(0.05)
        received: list[tuple[int, object]] = []
        await asyncio.wait_for(receive_into(ws, received.append), 5)
        return received


def test_messages_fragments_and_the_closure_arrive_in_order():
    async def handler(ws):
        await ws.send("first")
        await ws.send(["frag", "mented ", "text"])
        await ws.send([b"\x01\x02", b"\x03"])
        await ws.send(b"\x00" * 4800)
        await ws.close(1000, "done")

    received = asyncio.run(_receive_all(handler))
    items = [item for _, item in received]
    assert items[:4] == ["first", "fragmented text", b"\x01\x02\x03", b"\x00" * 4800]
    assert items[4] == Closure(1000, "done")
    stamps = [ns for ns, _ in received]
    assert stamps == sorted(stamps)


def test_invalid_utf8_text_closes_the_connection_with_1007():
    async def handler(ws):
        await ws.send("ok")
        async with ws.send_context():
            ws.protocol.send_text(b"\xff\xfe not utf-8")
        await asyncio.sleep(1)

    received = asyncio.run(_receive_all(handler))
    assert received[0][1] == "ok"
    closure = received[-1][1]
    assert isinstance(closure, Closure)
    assert closure.code == 1007 and closure.local_failure
    assert len(received) == 2
