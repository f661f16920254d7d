"""A local server on 127.0.0.1 speaking the OpenAI Realtime / Azure Voice Live event protocol.

It stands in for the cloud service in tests and demos, over a real WebSocket: auth is checked at
the handshake (``api-key`` header or query parameter, or ``Authorization: Bearer``),
``session.update`` is answered with ``session.updated``, user audio is buffered from
``input_audio_buffer.append`` and committed (an empty commit is an ``error`` as on the real
service), and each ``response.create`` streams tone speech (:func:`voicelab.audio.tone_speech`)
as base64 pcm16 24 kHz deltas with its transcript, optionally a function call, then
``response.done``. ``response.cancel`` stops the audio promptly (status ``cancelled``).

What the "model" says comes from :class:`RealtimeServerConfig`: scripted ``lines`` (a product
reply or a simulated user's line per response), ``tool_calls`` by response number, and an
``end_conversation`` call on the last line for the persona role. A ``response.create`` carrying
Voice Live's ``pre_generated_assistant_message``, or an out-of-band response whose input is a
text, speaks that text (as exact-text synthesis does). Faults: a rejected handshake, an
``error`` on response N, a connection dropped mid-response, silence. Every client event is
recorded (audio as byte counts) for assertions. Both GA and beta spellings are selectable.

The server and its handshake are here; each connection is :mod:`._session`, the configuration
and what the server keeps :mod:`._config`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from urllib.parse import parse_qsl, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from ._config import RealtimeConnectionRecord, RealtimeServerConfig, RealtimeUsageCounts
from ._session import _Session
from ._shapes import JsonObject

logger = logging.getLogger(__name__)


class RealtimeServer:
    """``async with RealtimeServer(config) as server:`` then connect to ``server.url``."""

    def __init__(self, config: RealtimeServerConfig | None = None, *, host: str = "127.0.0.1"):
        self.config = config or RealtimeServerConfig()
        self.host = host
        self.port: int | None = None
        self.connections: list[RealtimeConnectionRecord] = []
        #: the usage every response reported (or would have, without ``report_usage``)
        self.usage = RealtimeUsageCounts()
        self._server: Server | None = None
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:<port>`` (any path is accepted)."""
        if self.port is None:
            raise RuntimeError("the realtime server is not started")
        return f"ws://{self.host}:{self.port}"

    @property
    def http_endpoint(self) -> str:
        """The same address as an ``http://`` resource endpoint (what Azure configs name)."""
        return self.url.replace("ws://", "http://", 1)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}"

    def events_of(self, event_type: str) -> list[JsonObject]:
        return [e for record in self.connections for e in record.events_of(event_type)]

    async def start(self) -> RealtimeServer:
        self._server = await serve(self._handle, self.host, 0, compression=None,
                                   max_size=16 * 1024 * 1024, process_request=self._authorize)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 3.0)

    async def __aenter__(self) -> RealtimeServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        if self.config.reject_status is not None:
            return connection.respond(self.config.reject_status, "rejected by configuration\n")
        key = self.config.api_key
        if key and _auth_scheme(request, key) is None:
            return connection.respond(401, "invalid or missing api key\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        request = ws.request
        assert request is not None
        parts = urlsplit(request.path)
        record = RealtimeConnectionRecord(
            path=parts.path, query=dict(parse_qsl(parts.query)), auth=_presented_auth(request))
        self.connections.append(record)
        await _Session(self, ws, record).run()


def _presented_auth(request: Request) -> str | None:
    """How the client authenticated: ``api-key`` (header), ``bearer``, ``query`` or ``None``."""
    if request.headers.get("api-key"):
        return "api-key"
    if (request.headers.get("Authorization") or "").startswith("Bearer "):
        return "bearer"
    return "query" if "api-key" in dict(parse_qsl(urlsplit(request.path).query)) else None


def _auth_scheme(request: Request, key: str | None) -> str | None:
    if request.headers.get("api-key") == key:
        return "api-key"
    if request.headers.get("Authorization") == f"Bearer {key}":
        return "bearer"
    if dict(parse_qsl(urlsplit(request.path).query)).get("api-key") == key:
        return "query"
    return None
