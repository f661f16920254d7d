"""A small HTTP/1.1 server on asyncio for the WebRTC bot's signalling (one request a
connection, ``Connection: close``).

The bot lives on one event loop with aiortc, so its signalling does too; a request is read
within bounds (request line and headers, their count, the body) and anything else is answered
with a 4xx, never an exception that escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
MAX_HEADERS = 64
MAX_BODY_BYTES = 1024 * 1024
READ_TIMEOUT_SECONDS = 10.0
REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
           404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large",
           415: "Unsupported Media Type", 422: "Unprocessable Content", 500: "Internal Server Error",
           503: "Service Unavailable"}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


class _BadRequest(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


async def _read_request(reader: asyncio.StreamReader) -> Request:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise _BadRequest(413, "request head too large") from None
    lines = head.decode("latin-1").split("\r\n")[:-2]
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(400, "malformed request line")
    if len(lines) - 1 > MAX_HEADERS:
        raise _BadRequest(400, "too many headers")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise _BadRequest(400, "malformed header")
        headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequest(400, "bad Content-Length") from None
    if length < 0 or length > MAX_BODY_BYTES:
        raise _BadRequest(413, "body too large")
    body = await reader.readexactly(length) if length else b""
    return Request(parts[0].upper(), parts[1], headers, body)


def _encode(response: Response) -> bytes:
    reason = REASONS.get(response.status, "Status")
    headers = {"Content-Length": str(len(response.body)), "Connection": "close",
               **response.headers}
    head = f"HTTP/1.1 {response.status} {reason}\r\n" + \
        "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    return head.encode("latin-1") + response.body


class SignallingServer:
    """Serves ``handler`` on ``host:port`` (0: a free port)."""

    def __init__(self, handler: Handler, *, host: str, port: int):
        self._handler, self.host, self._requested_port = handler, host, port
        self.port: int | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self._requested_port,
                                                  limit=MAX_HEAD_BYTES)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request = await asyncio.wait_for(_read_request(reader), READ_TIMEOUT_SECONDS)
            except _BadRequest as bad:
                response = Response(bad.status, str(bad).encode())
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                return
            else:
                try:
                    response = await self._handler(request)
                except Exception:  # a bug in the double: answer, and say so in its log
                    logger.exception("the WebRTC bot failed to answer %s %s", request.method,
                                     request.path)
                    response = Response(500, b"internal error")
            writer.write(_encode(response))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
