"""One realtime WebSocket (Realtime API / Voice Live) for the adapter, the persona and the
``voice_live`` speech provider: its receive task only timestamps (at arrival) and enqueues;
parsing happens in :meth:`RealtimeConnection.next`, on the consumer's side."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from ..config import SecretScrubber
from ._protocol import EndpointError
from ._realtime_wire import MALFORMED, USER_AGENT
from ._settings import redacted_url
from ._socket import CLOSE_TIMEOUT_SECONDS, Closure, open_websocket, receive_into

logger = logging.getLogger(__name__)

__all__ = ["Closure", "RealtimeConnection"]


class RealtimeConnection:
    def __init__(self, ws: ClientConnection, *, clock_ns: Callable[[], int], where: str):
        self._ws = ws
        self._clock_ns = clock_ns
        self.where = where
        self._queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
        self._receiver = asyncio.create_task(
            receive_into(ws, self._queue.put_nowait),
            name="voicelab-realtime-receive")
        self.closed_by_us = False
        self.closure: Closure | None = None

    @classmethod
    async def open(cls, url: str, *, headers: Mapping[str, str], connect_timeout_seconds: float,
                   max_message_bytes: int, scrubber: SecretScrubber,
                   clock_ns: Callable[[], int]) -> RealtimeConnection:
        """Connect, mapping every failure to :class:`EndpointError` with a stable ``code``."""
        where = scrubber.scrub_text(redacted_url(url))
        ws = await open_websocket(url, headers=headers,
                                  connect_timeout_seconds=connect_timeout_seconds,
                                  max_message_bytes=max_message_bytes, clock_ns=clock_ns,
                                  where=where, scrubber=scrubber, user_agent=USER_AGENT,
                                  rejected_codes={401: "unauthorized", 403: "forbidden"})
        return cls(ws, clock_ns=clock_ns, where=where)

    @property
    def is_open(self) -> bool:
        return self.closure is None and not self.closed_by_us

    async def send(self, event: Mapping[str, Any]) -> None:
        if not self.is_open:
            raise EndpointError(f"the realtime connection to {self.where} is closed",
                                code="connection_closed")
        try:
            await self._ws.send(json.dumps(event))
        except ConnectionClosed:
            raise EndpointError(f"the realtime connection to {self.where} is closed",
                                code="connection_closed") from None

    async def next(self, timeout_seconds: float | None) -> tuple[int, dict[str, Any] | Closure]:
        """The next server event (parsed) or the :class:`Closure`; ``TimeoutError`` on timeout.

        After the closure has been returned once, every later call returns it again at once.
        """
        if self.closure is not None and self._queue.empty():
            return self._clock_ns(), self.closure
        received_ns, item = await asyncio.wait_for(self._queue.get(), timeout_seconds)
        if isinstance(item, Closure):
            self.closure = item
            return received_ns, item
        return received_ns, _parse(item)

    async def close(self, reason: str = "closed by the evaluator") -> None:
        """Close with code 1000 and stop receiving; idempotent, never raises."""
        self.closed_by_us = True
        try:
            await asyncio.wait_for(self._ws.close(1000, reason[:100]), CLOSE_TIMEOUT_SECONDS + 1)
        except Exception as error:  # noqa: BLE001 - closing must not raise
            logger.debug("closing the realtime WebSocket failed: %s", type(error).__name__)
            transport = getattr(self._ws, "transport", None)
            if transport is not None:
                transport.abort()
        if not self._receiver.done():
            await asyncio.wait({self._receiver}, timeout=1.0)
            if not self._receiver.done():
                self._receiver.cancel()
                self._queue.put_nowait((self._clock_ns(), Closure(1000, reason)))


def _parse(frame: str | bytes) -> dict[str, Any]:
    if isinstance(frame, bytes | bytearray):
        return {"type": MALFORMED, "detail": f"binary frame of {len(frame)} bytes"}
    try:
        parsed = json.loads(frame)
    except ValueError as error:
        return {"type": MALFORMED, "detail": f"malformed JSON: {error}", "text": frame[:2000]}
    if not isinstance(parsed, dict):
        return {"type": MALFORMED, "detail": f"a JSON {type(parsed).__name__}, not an object"}
    return parsed
