"""A client and a server for the WebSocket transport tests (test_socket_receive.py,
test_socket_tls_proxy.py): real sockets on 127.0.0.1, ports chosen by the OS."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from websockets.asyncio.server import ServerConnection, serve

from voicelab.config import SecretScrubber
from voicelab.endpoints import Closure, MessageInbox, WebSocketConnection, open_websocket


async def open_client(uri: str, inbox: MessageInbox, **options) -> WebSocketConnection:
    settings = {"headers": {}, "connect_timeout_seconds": 5, "max_message_bytes": 1 << 20,
                "clock_ns": time.perf_counter_ns, "where": "test server",
                "scrubber": SecretScrubber(), "user_agent": "voicelab-test"} | options
    return await open_websocket(uri, inbox=inbox, **settings)


async def until_closure(inbox: MessageInbox) -> list[tuple[int, object]]:
    received: list[tuple[int, object]] = []
    while not received or not isinstance(received[-1][1], Closure):
        received.append(await asyncio.wait_for(inbox.get(), 10))
    return received


@contextlib.asynccontextmanager
async def websocket_server(handler: Callable[[ServerConnection], Awaitable[None]],
                  **options) -> AsyncIterator[str]:
    async with serve(handler, "127.0.0.1", 0, compression=None, **options) as server:
        port = server.sockets[0].getsockname()[1]
        yield f"{'wss' if options.get('ssl') else 'ws'}://127.0.0.1:{port}"
