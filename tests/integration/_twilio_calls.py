"""What the Twilio adapter tests share (test_twilio_endpoint.py, test_twilio_marks.py,
test_twilio_closures.py): running a call with a hang guard, waiting for a condition, consuming
the adapter's events, and a scripted product on 127.0.0.1 that records what it receives."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voicelab.endpoints import EndpointEvent
from voicelab.endpoints.twilio import TwilioEndpoint


def run(coroutine: Awaitable[Any], timeout: float = 30) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


async def until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.01)


class Events:
    """Consumes ``endpoint.events()`` for the whole call."""

    def __init__(self, endpoint: TwilioEndpoint, on_event: Callable[[EndpointEvent], None]
                 = lambda event: None):
        self.items: list[EndpointEvent] = []
        self.on_event = on_event
        self.task = asyncio.create_task(self._consume(endpoint))

    async def _consume(self, endpoint: TwilioEndpoint) -> None:
        async for event in endpoint.events():
            self.items.append(event)
            self.on_event(event)

    def of(self, kind: str) -> list[EndpointEvent]:
        return [e for e in self.items if e.type == kind]


async def scripted_product(script: Callable[[ServerConnection, list[tuple[int, dict]]],
                                            Awaitable[None]], body: Callable[[str], Awaitable[Any]]
                           ) -> tuple[Any, list[tuple[int, dict]]]:
    """Serve ``script`` (after reading connected and start) and run ``body(uri)`` against it;
    returns what ``body`` returned and every message the product received, stamped."""
    received: list[tuple[int, dict]] = []

    async def product(ws: ServerConnection) -> None:
        async def reader() -> None:
            try:
                async for message in ws:
                    received.append((time.perf_counter_ns(), json.loads(message)))
            except ConnectionClosed:
                pass

        reading = asyncio.create_task(reader())
        await until(lambda: len(received) >= 2)
        try:
            await script(ws, received)
        except ConnectionClosed:
            pass
        await reading

    async with serve(product, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        return await body(f"ws://127.0.0.1:{port}/"), received
