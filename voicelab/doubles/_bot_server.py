"""The WebSocket server part of the doubles (the pipecat and Twilio bots, the protocol-v1
products): start on a free port of 127.0.0.1, say the ``ws://`` URI, stop, use as an async
context manager. Each double says how one connection goes (:meth:`BotServer._handle`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Self, TypedDict

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

#: How long stopping waits for the open connections to close.
STOP_TIMEOUT_SECONDS = 3.0


class ServeOptions(TypedDict, total=False):
    """More keywords a bot gives ``websockets.serve``."""

    #: answers the handshake itself (an HTTP response) or lets it proceed (None)
    process_request: Callable[[ServerConnection, Request], Response | None]


class BotServer:
    """A bot as a WebSocket server on ``host:port`` (0: a free port); ``await start()`` returns
    its ``ws://`` URI."""

    #: the bot's name in errors ("the pipecat bot")
    name = "the bot"

    def __init__(self, *, host: str, port: int, max_message_bytes: int):
        self.host, self._requested_port = host, port
        self.port: int | None = None
        self._max_message_bytes = max_message_bytes
        self._server: Server | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise RuntimeError(f"{self.name} is not started")
        return f"ws://{self.host}:{self.port}/"

    def _warm_up(self) -> None:
        """Run the bot's slow-to-load code once before serving (nothing by default)."""

    async def _handle(self, ws: ServerConnection) -> None:
        raise NotImplementedError

    async def _before_serving(self) -> None:
        """Called by :meth:`start` before the server listens."""
        self._warm_up()

    def _serve_options(self) -> ServeOptions:
        """More keywords for ``websockets.serve`` (e.g. ``process_request``)."""
        return {}

    async def start(self) -> str:
        await self._before_serving()
        self._server = await serve(self._handle, self.host, self._requested_port,
                                   compression=None, max_size=self._max_message_bytes,
                                   **self._serve_options())
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.uri

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), STOP_TIMEOUT_SECONDS)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
