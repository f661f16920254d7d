"""Delivery from a WebSocket to its adapter: the bounded :class:`MessageInbox`, and the
:class:`Closure` that ends every inbox (with :func:`closure_error`, the one mapping of an
unexpected closure to an error code)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

from websockets.exceptions import ConnectionClosed

#: Back-pressure bounds of a :class:`MessageInbox`: past either, reading the socket pauses until
#: the consumer has taken the inbox down to half of both. About 20 s of 24 kHz PCM (characters
#: count as bytes for text), or 20 s of 20 ms chunks: only a consumer that has stopped gets there.
INBOX_MAX_BYTES = 1024 * 1024
INBOX_MAX_MESSAGES = 1000

#: The close code this side sends for a message bigger than the adapter accepts.
MESSAGE_TOO_BIG = 1009


class SocketClosed(Exception):
    """Sending on a connection that is closing or closed."""


@dataclass(frozen=True, slots=True)
class Closure:
    """The end of a connection: close code and reason, and whether this side failed first
    (e.g. it closed with 1009 because a message was too big)."""

    code: int | None
    reason: str
    local_failure: bool = False


def closure_from(error: ConnectionClosed) -> Closure:
    if error.rcvd is not None:
        return Closure(error.rcvd.code, error.rcvd.reason)
    if error.sent is not None:
        return Closure(error.sent.code, error.sent.reason, local_failure=True)
    return Closure(1006, "connection lost without a close frame")


@dataclass(frozen=True, slots=True)
class ClosureError:
    """The ``error`` event an unexpected closure deserves: its ``code`` and message."""

    code: str
    message: str


def closure_error(closure: Closure, *, reason: str, mid_turn: bool,
                  max_message_bytes: int) -> ClosureError | None:
    """The error for a closure the evaluator did not ask for, or ``None`` when it is a normal end.

    ``message_too_large`` (this side closed with 1009), ``protocol_error`` (this side failed the
    connection otherwise), ``connection_lost`` (1006: no close frame), ``connection_closed``
    (the product closed with a code other than 1000/1001), ``closed_mid_turn`` (1000/1001 while
    a response was pending). ``reason`` is the closure's reason, already scrubbed of secrets.
    """
    described = f"code {closure.code}" + (f": {reason}" if reason else "")
    if closure.local_failure and closure.code == MESSAGE_TOO_BIG:
        return ClosureError("message_too_large", f"a product message exceeded max_message_bytes "
                            f"({max_message_bytes} bytes); connection closed")
    if closure.local_failure:
        return ClosureError("protocol_error", f"connection failed ({described})")
    if closure.code == 1006:
        return ClosureError("connection_lost", "connection to the product was lost "
                                               "(no close frame)")
    if closure.code not in (1000, 1001):
        return ClosureError("connection_closed", f"product closed the connection ({described})")
    if mid_turn:
        return ClosureError("closed_mid_turn",
                            f"product closed the connection mid-turn ({described})")
    return None


class _Reading(Protocol):
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...


class MessageInbox:
    """An adapter's queue of ``(arrival ns, message)`` in arrival order, its last item a
    :class:`Closure`; one consumer (``get``/``get_nowait``/``empty``, as :class:`asyncio.Queue`).

    Bounded without dropping anything: when more than ``max_bytes`` of messages or more than
    ``max_messages`` items wait, the connection filling it pauses reading its socket, and resumes
    once the consumer has taken it down to half of both bounds; meanwhile the product's bytes
    wait in the kernel and then in the product's own send buffer. Stamps are taken when bytes
    reach the process, so a paused socket delays the stamps of what it holds back by the pause,
    at most, and only once the consumer already lags by more than a bound. ``pauses`` counts
    them. ``put_nowait`` also takes an adapter's own items (a timer's wake-up), which never
    pause reading.
    """

    def __init__(self, *, max_bytes: int = INBOX_MAX_BYTES,
                 max_messages: int = INBOX_MAX_MESSAGES):
        self.max_bytes = max_bytes
        self.max_messages = max_messages
        self.pauses = 0
        self._items: deque[tuple[int, Any]] = deque()
        self._bytes = 0
        self._getter: asyncio.Future[None] | None = None
        self._reading: _Reading | None = None
        self._paused = False

    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def fill_from(self, reading: _Reading) -> None:
        """Pause and resume ``reading`` to keep this inbox within its bounds."""
        self._reading = reading

    def put_nowait(self, item: tuple[int, Any]) -> None:
        self._items.append(item)
        getter = self._getter
        if getter is not None and not getter.done():
            getter.set_result(None)
        message = item[1]
        kind = type(message)
        if kind is not bytes and kind is not str and not isinstance(message, str | bytes):
            return  # a Closure or the adapter's own item: nothing more to read behind it
        self._bytes += len(message)
        if not self._paused and self._reading is not None and (
                self._bytes > self.max_bytes or len(self._items) > self.max_messages):
            self._paused = True
            self.pauses += 1
            self._reading.pause_reading()

    def get_nowait(self) -> tuple[int, Any]:
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.popleft()
        message = item[1]
        kind = type(message)
        if kind is bytes or kind is str or isinstance(message, str | bytes):
            self._bytes -= len(message)
        if self._paused and self._bytes <= self.max_bytes // 2 and \
                len(self._items) <= self.max_messages // 2:
            self._paused = False
            assert self._reading is not None
            self._reading.resume_reading()
        return item

    async def get(self) -> tuple[int, Any]:
        while not self._items:
            self._getter = asyncio.get_running_loop().create_future()
            try:
                await self._getter
            finally:
                self._getter = None
        return self.get_nowait()
