"""The WebSocket transport of the protocol v1 and the realtime adapters.

Built on websockets' documented Sans-I/O layer (:class:`websockets.client.ClientProtocol`),
driven by our own :class:`asyncio.Protocol`, so the library's private methods are never used:

* :func:`._socket_open.open_websocket` connects (TCP, TLS for ``wss://``, the opening
  handshake) and maps every failure to an :class:`EndpointError` code;
* :class:`WebSocketConnection` stamps the bytes with the trial clock in ``data_received``, before
  any parsing, gives each message the stamp of its first bytes (of its first fragment, when
  fragmented) and puts it into the adapter's :class:`MessageInbox`; it answers pings, keeps the
  connection alive and closes with a timeout;
* :class:`MessageInbox` is bounded: past :data:`INBOX_MAX_BYTES` or :data:`INBOX_MAX_MESSAGES`
  the connection stops reading the socket until the consumer catches up;
* a :class:`Closure` is the last item of every inbox; :func:`closure_error` says which error an
  unexpected one is;
* on Linux, a plain ``ws://`` connection reads its socket itself
  (:class:`._stamped_stream.StampedStreamTransport`): a message whose last byte ends a read that
  emptied the kernel's queue carries the kernel's receive stamp of that byte (exact whatever the
  loop was doing); any other keeps the loop's stamp and is listed in
  :attr:`WebSocketConnection.loop_stamped`, so its loop-lag bound still applies;
* any event loop's transports will do (the standard library's, uvloop's): only the methods
  asyncio documents for a stream transport are used (:class:`StreamTransport`), and a failure
  of this code itself is a :class:`WebSocketInternalError`, never the product's failure (a
  connect timeout, a lost connection).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State

from ._inbox import (
    INBOX_MAX_BYTES,
    INBOX_MAX_MESSAGES,
    Closure,
    ClosureError,
    MessageInbox,
    SocketClosed,
    closure_error,
    closure_from,
)
from ._proxy import ProxyRefused

__all__ = ["CLOSE_TIMEOUT_SECONDS", "INBOX_MAX_BYTES", "INBOX_MAX_MESSAGES",
           "KERNEL_STREAM_STAMPS", "LOOP_STAMPED_ATTRIBUTE", "Closure", "ClosureError", "MessageInbox", "ProxyRefused", "SocketClosed", "StreamTransport",
           "WebSocketConnection", "WebSocketInternalError", "closure_error", "closure_from"]

logger = logging.getLogger(__name__)

#: How long a closing handshake may take before the TCP connection is aborted.
CLOSE_TIMEOUT_SECONDS = 2.0
#: A ping goes out after this much time; without its pong one interval later, the connection
#: fails with 1011 (the keepalive websockets' own client does by default).
KEEPALIVE_SECONDS = 20.0
_INVALID_DATA = 1007
_INTERNAL_ERROR = 1011
_MAX_CLOSE_REASON_BYTES = 123
#: ``session.connected``'s ``arrival_stamps`` for a connection read with the kernel's stamps:
#: every product message carries the kernel's receive stamp except those its closing event
#: lists (``LOOP_STAMPED_ATTRIBUTE``: each as [ns before the closing event's own stamp, how late
#: it may be at most in ns, -1: not known])
KERNEL_STREAM_STAMPS = "kernel_stream"
LOOP_STAMPED_ATTRIBUTE = "loop_stamped_before_close_ns"
#: the most loop-stamped messages a kernel-stamped connection lists; past it the list is
#: dropped (``loop_stamped`` is ``None``) and every stamp is bounded by the loop's lag
MAX_LOOP_STAMPED = 20_000

BytesLike = bytes | bytearray | memoryview  # a frame's payload (Frame.data)


@runtime_checkable
class StreamTransport(Protocol):
    """What the connection uses of its transport: the stream-transport methods asyncio
    documents. The standard library's transports subclass :class:`asyncio.Transport`, uvloop's
    do not (they are its own classes with the same methods), so the type is checked by its
    methods, never by its class."""

    def write(self, data: bytes) -> None: ...
    def can_write_eof(self) -> bool: ...
    def write_eof(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def abort(self) -> None: ...
    def close(self) -> None: ...


class WebSocketInternalError(RuntimeError):
    """voicelab's own WebSocket client failed (a bug, an event loop whose transport lacks a
    stream method): raised by :func:`open_websocket` as itself, so the trial is reported as an
    internal error rather than as the product's timeout or refusal; after the handshake it ends
    the connection with a closure that says so (1011, this side's failure)."""

    CODE = _INTERNAL_ERROR


class WebSocketConnection(asyncio.Protocol):
    """One client connection: a :class:`ClientProtocol` driven by the event loop's callbacks.

    ``data_received`` stamps each chunk of bytes before parsing it; a message gets the stamp of
    the chunk that held its first byte (found by each frame's length on the wire: a server's
    frames are unmasked and, with no extension negotiated, carry their payload as is, RFC 6455
    section 5.2), so a busy loop or a message spread over many reads delays its processing,
    not its measurement. Complete messages go straight into the inbox (no task wake-up per
    message); once the connection is gone, its :class:`Closure` follows.
    """

    def __init__(self, protocol: ClientProtocol, *, clock_ns: Callable[[], int],
                 inbox: MessageInbox):
        self._protocol = protocol
        self._clock_ns = clock_ns
        self._inbox = inbox
        self._transport: StreamTransport | None = None
        self._internal: WebSocketInternalError | None = None  # this side's own failure
        # the handshake's outcome: None once open, else why it failed
        self._opened: asyncio.Future[Exception | None] = \
            asyncio.get_running_loop().create_future()
        self._open = False
        self._lost = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._close_timer: asyncio.TimerHandle | None = None
        self._keepalive: asyncio.TimerHandle | None = None
        self._awaiting_pong: bytes | None = None
        self._reading_paused = False
        self.closure: Closure | None = None
        # the handshake's bytes until its response is parsed, then the frames' byte accounting
        self._head = bytearray()
        self._stream_bytes = 0  # frame bytes received since the handshake
        self._parsed_bytes = 0  # frame bytes parsed so far
        # (end offset, loop ns, kernel ns of its last byte or -1, ns after which its bytes
        # arrived or -1) of the reads not yet parsed
        self._chunk_stamps: deque[tuple[int, int, int, int]] = deque()
        self.kernel_stamps = False  # reads carry the kernel's receive stamps (set on connect)
        self._loop_stamped: list[tuple[int, int]] | None = []
        self._last_stamp_ns = 0  # the last message's stamp
        self._fragments: list[BytesLike] = []
        self._fragments_text = False
        self._fragments_ns = 0
        self._fragments_since_ns = -1

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, StreamTransport):
            transport.close()
            self._internal_failure(TypeError(
                f"the event loop's transport {type(transport).__name__} lacks a stream "
                f"transport's methods"))
            return
        self._transport = transport
        try:
            self._flush()  # the handshake request
        except Exception as error:  # noqa: BLE001 - our own failure, said as such
            self._internal_failure(error)

    def data_received(self, data: bytes) -> None:
        try:
            self._received(data, self._clock_ns(), -1, -1)
        except Exception as error:  # noqa: BLE001 - our own failure, said as such
            self._internal_failure(error)

    def stamped_data_received(self, data: bytes, read_ns: int, kernel_ns: int,
                              since_ns: int) -> None:
        """``data`` read at ``read_ns``; ``kernel_ns``: when the kernel received its last byte
        (-1: not known); ``since_ns``: its bytes arrived after that (-1: not known); from
        :class:`._stamped_stream.StampedStreamTransport`."""
        try:
            self._received(data, read_ns, kernel_ns, since_ns)
        except Exception as error:  # noqa: BLE001 - our own failure, said as such
            self._internal_failure(error)

    def _received(self, data: bytes, arrival_ns: int, kernel_ns: int, since_ns: int) -> None:
        if self._open:
            self._stream_bytes += len(data)
            self._chunk_stamps.append((self._stream_bytes, arrival_ns, kernel_ns, since_ns))
        else:
            self._head += data
        self._protocol.receive_data(data)
        self._flush()
        for event in self._protocol.events_received():
            if isinstance(event, Frame):
                if not self._frame(event):
                    break  # the connection failed: nothing after this frame counts
            elif isinstance(event, Response):
                self._handshake_answered(arrival_ns, kernel_ns, since_ns)

    def eof_received(self) -> bool:
        self._protocol.receive_eof()
        self._flush()
        return False  # the transport closes: the server ended the TCP connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._protocol.receive_eof()  # an abrupt end moves the protocol to CLOSED
        self._protocol.data_to_send()  # nowhere to send it any more
        for timer in (self._close_timer, self._keepalive):
            if timer is not None:
                timer.cancel()
        if self._internal is not None:
            self.closure = Closure(WebSocketInternalError.CODE, str(self._internal),
                                   local_failure=True)
        elif self._protocol.state is State.CLOSED:
            self.closure = closure_from(self._protocol.close_exc)
        else:
            self.closure = Closure(1006, "connection lost without a close frame")
        if self._open:
            self._inbox.put_nowait((self._clock_ns(), self.closure))
        elif not self._opened.done():
            self._opened.set_result(self._internal or self._protocol.handshake_exc or
                                    ConnectionError("the connection closed during the "
                                                    "WebSocket handshake"))
        self._lost.set()
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def _internal_failure(self, error: Exception) -> None:
        """This code failed, not the product: the handshake's waiter gets the error (an open
        connection's closure names it) and the connection is dropped. Logged in one line (the
        traceback at debug level: no traceback reaches a user)."""
        if self._internal is not None:
            return
        self._internal = WebSocketInternalError(
            f"voicelab's WebSocket client failed: {type(error).__name__}: {error}")
        logger.error("%s", self._internal)
        logger.debug("the WebSocket client's failure", exc_info=error)
        if not self._opened.done():
            self._opened.set_result(self._internal)
        if self._transport is not None:
            self._transport.abort()

    # --- reading (called by the inbox) -------------------------------------------------------

    def pause_reading(self) -> None:
        if self._protocol.state is not State.OPEN:
            return  # closing: read on until the server's close frame
        self._reading_paused = True
        assert self._transport is not None
        logger.debug("consumer behind: reading paused")
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        if self._reading_paused:
            self._reading_paused = False
            assert self._transport is not None
            self._transport.resume_reading()

    # --- protocol plumbing -----------------------------------------------------------------

    def _flush(self) -> None:
        transport = self._transport
        assert transport is not None
        for data in self._protocol.data_to_send():
            if data:
                transport.write(data)
            elif transport.can_write_eof():
                transport.write_eof()
        if self._close_timer is None and self._protocol.close_expected():
            self._close_timer = asyncio.get_running_loop().call_later(
                CLOSE_TIMEOUT_SECONDS, transport.abort)

    def _handshake_answered(self, arrival_ns: int, kernel_ns: int, since_ns: int) -> None:
        if self._opened.done():
            return  # given up on (timeout)
        if self._protocol.handshake_exc is not None:
            self._opened.set_result(self._protocol.handshake_exc)
            return
        # A 101 response has no body: the frames start right after the blank line.
        leftover = len(self._head) - (self._head.find(b"\r\n\r\n") + 4)
        self._head = bytearray()
        self._stream_bytes = leftover
        self._chunk_stamps.append((leftover, arrival_ns, kernel_ns, since_ns))
        self._open = True
        self._opened.set_result(None)
        self._inbox.fill_from(self)
        self._schedule_keepalive()

    def _frame(self, frame: Frame) -> bool:
        start = self._parsed_bytes
        data = frame.data
        size = len(data)  # its bytes on the wire: the payload and a 2, 4 or 10-byte header
        end = self._parsed_bytes = start + size + (2 if size < 126 else 4 if size < 65536 else 10)
        stamps = self._chunk_stamps
        while len(stamps) > 1 and stamps[0][0] <= start:
            stamps.popleft()
        _, arrival_ns, _, since_ns = stamps[0]
        opcode = frame.opcode
        if opcode is Opcode.BINARY and frame.fin:  # audio, most frames: straight in
            self._inbox.put_nowait((self._message_stamp(arrival_ns, since_ns, end),
                                    bytes(data)))
            return True
        if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
            if not frame.fin:
                self._fragments = [data]
                self._fragments_text = opcode is Opcode.TEXT
                self._fragments_ns, self._fragments_since_ns = arrival_ns, since_ns
                return True
            return self._deliver(self._message_stamp(arrival_ns, since_ns, end),
                                 opcode is Opcode.TEXT, data)
        if opcode is Opcode.CONT:
            self._fragments.append(frame.data)
            if not frame.fin:
                return True
            payload, self._fragments = b"".join(self._fragments), []
            return self._deliver(self._message_stamp(self._fragments_ns,
                                                     self._fragments_since_ns, end),
                                 self._fragments_text, payload)
        if opcode is Opcode.PONG and frame.data == self._awaiting_pong:
            self._awaiting_pong = None
        return True  # pings and closes were answered by the protocol (see _flush)

    def _message_stamp(self, loop_ns: int, since_ns: int, end: int) -> int:
        """A complete message's stamp (``end``: the stream offset after its last byte).

        The kernel's receive stamp of its last byte when that byte ended a read that emptied
        the kernel's queue: the stamp is that byte's own, whatever the loop was doing. Else
        the loop's (``loop_ns``: the loop's stamp of the read that held its first byte, as on
        any connection), moved back to just before the kernel's stamp of the read that
        completed it when there is one (the message was complete by then: a stamp still late,
        by less, and told apart from the message that ends the read), and never before the
        stamp of the message ahead of it, so the stamps stay in arrival order. On a
        kernel-stamped connection such a stamp is listed in :attr:`loop_stamped` with how late
        it may be: its first byte arrived after ``since_ns``, when a read that emptied the
        queue began (the loop-lag watch bounds it too: the smaller bound holds)."""
        kernel_ns, ends_read = -1, False
        for chunk_end, _, chunk_kernel_ns, _ in self._chunk_stamps:
            if chunk_end >= end:
                kernel_ns, ends_read = chunk_kernel_ns, chunk_end == end
                break
        if ends_read and kernel_ns >= self._last_stamp_ns:
            self._last_stamp_ns = kernel_ns
            return kernel_ns
        stamp = loop_ns if kernel_ns < 0 else min(loop_ns, kernel_ns - 1)
        stamp = self._last_stamp_ns = max(stamp, self._last_stamp_ns)
        if self.kernel_stamps and self._loop_stamped is not None:
            if len(self._loop_stamped) < MAX_LOOP_STAMPED:
                self._loop_stamped.append((stamp, stamp - since_ns if since_ns >= 0 else -1))
            else:
                self._loop_stamped = None
        return stamp

    @property
    def loop_stamped(self) -> list[tuple[int, int]] | None:
        """On a kernel-stamped connection, the messages the kernel could not stamp: each one's
        stamp (the loop's, in arrival order) and how late it may be at most (ns; -1: not
        known); ``None``: more than :data:`MAX_LOOP_STAMPED`, no longer listed."""
        return None if self._loop_stamped is None else list(self._loop_stamped)

    def _deliver(self, arrival_ns: int, text: bool, data: BytesLike) -> bool:
        payload = bytes(data)  # received frames hold bytes already: no copy
        if not text:
            self._inbox.put_nowait((arrival_ns, payload))
            return True
        try:
            message = payload.decode()
        except UnicodeDecodeError as error:
            self._fail(_INVALID_DATA, f"{error.reason} at position {error.start}")
            return False
        self._inbox.put_nowait((arrival_ns, message))
        return True

    def _fail(self, code: int, reason: str) -> None:
        self._protocol.fail(code, reason)
        self._flush()

    def _schedule_keepalive(self) -> None:
        self._keepalive = asyncio.get_running_loop().call_later(KEEPALIVE_SECONDS,
                                                                self._ping)

    def _ping(self) -> None:
        if self._protocol.state is not State.OPEN:
            return
        if self._awaiting_pong is not None and not self._reading_paused:
            self._fail(_INTERNAL_ERROR, "keepalive ping timeout")
            return
        if self._awaiting_pong is None:
            self._awaiting_pong = os.urandom(4)
            self._protocol.send_ping(self._awaiting_pong)
            self._flush()
        self._schedule_keepalive()

    # --- the adapter's side ----------------------------------------------------------------

    async def handshake(self) -> None:
        """Wait for the opening handshake; raises its failure."""
        error = await self._opened
        if error is not None:
            raise error

    @property
    def closed(self) -> bool:
        """The TCP connection is gone and the inbox holds the :class:`Closure`."""
        return self._lost.is_set()

    async def send(self, message: str | bytes) -> None:
        """Send a text (``str``) or binary message; waits while the socket's write buffer is
        full. Raises :class:`SocketClosed` once the connection is closing."""
        if self._protocol.state is not State.OPEN:
            raise SocketClosed
        if isinstance(message, str):
            self._protocol.send_text(message.encode())
        else:
            self._protocol.send_binary(message)
        self._flush()
        if not self._writable.is_set():
            await self._writable.wait()
            if self._lost.is_set():
                raise SocketClosed

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """The closing handshake: returns once the TCP connection is gone, aborting it when the
        server has not closed it within :data:`CLOSE_TIMEOUT_SECONDS`. Never raises."""
        if self._protocol.state is State.OPEN:
            reason = reason.encode()[:_MAX_CLOSE_REASON_BYTES].decode(errors="ignore")
            self._protocol.send_close(code, reason)
            self._flush()
            self.resume_reading()  # the server's close frame may wait behind unread messages
        elif self._close_timer is None and not self._lost.is_set():
            self.abort()  # already ending, with no closing handshake to wait for
        await self._lost.wait()

    def abort(self) -> None:
        """Drop the TCP connection at once (the closure follows, as 1006 or as sent)."""
        if self._transport is not None:
            self._transport.abort()
