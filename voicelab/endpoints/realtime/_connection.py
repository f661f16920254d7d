"""One realtime WebSocket (Realtime API / Voice Live) for the adapter, the persona and the
``voice_live`` speech provider: its receive path only timestamps (at arrival) and enqueues (see
:mod:`voicelab.endpoints._socket`); parsing happens in :meth:`RealtimeConnection.next`, on the consumer's side."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping

from ...config import SecretScrubber
from .. import (
    Closure,
    EndpointError,
    MessageInbox,
    SocketClosed,
    WebSocketConnection,
    open_websocket,
    redacted_url,
)
from .._fields import JsonObject
from .wire import MALFORMED, USER_AGENT

__all__ = ["Closure", "RealtimeConnection"]


class RealtimeConnection:
    def __init__(self, ws: WebSocketConnection, inbox: MessageInbox, *,
                 clock_ns: Callable[[], int], where: str):
        self._ws = ws
        self._queue = inbox
        self._clock_ns = clock_ns
        self.where = where
        self.closed_by_us = False
        self.closure: Closure | None = None

    @classmethod
    async def open(cls, url: str, *, headers: Mapping[str, str], connect_timeout_seconds: float,
                   max_message_bytes: int, scrubber: SecretScrubber,
                   clock_ns: Callable[[], int]) -> RealtimeConnection:
        """Connect, mapping every failure to :class:`EndpointError` with a stable ``code``."""
        where = scrubber.scrub_text(redacted_url(url))
        inbox = MessageInbox()
        ws = await open_websocket(url, headers=headers,
                                  connect_timeout_seconds=connect_timeout_seconds,
                                  max_message_bytes=max_message_bytes, clock_ns=clock_ns,
                                  inbox=inbox, where=where, scrubber=scrubber,
                                  user_agent=USER_AGENT,
                                  rejected_codes={401: "unauthorized", 403: "forbidden"})
        return cls(ws, inbox, clock_ns=clock_ns, where=where)

    @property
    def is_open(self) -> bool:
        return self.closure is None and not self.closed_by_us

    async def send(self, event: Mapping[str, object]) -> None:
        if not self.is_open:
            raise EndpointError(f"the realtime connection to {self.where} is closed",
                                code="connection_closed")
        try:
            await self._ws.send(json.dumps(event))
        except SocketClosed:
            raise EndpointError(f"the realtime connection to {self.where} is closed",
                                code="connection_closed") from None

    async def next(self, timeout_seconds: float | None) -> tuple[int, JsonObject | Closure]:
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
        await self._ws.close(1000, reason)  # the closure follows in the inbox


def _parse(frame: str | bytes) -> JsonObject:
    if isinstance(frame, bytes | bytearray):
        return {"type": MALFORMED, "detail": f"binary frame of {len(frame)} bytes"}
    try:
        parsed = json.loads(frame)
    except ValueError as error:
        return {"type": MALFORMED, "detail": f"malformed JSON: {error}", "text": frame[:2000]}
    if not isinstance(parsed, dict):
        return {"type": MALFORMED, "detail": f"a JSON {type(parsed).__name__}, not an object"}
    return parsed
