"""The shared WebSocket transport over real sockets on 127.0.0.1: messages in order, each with the
stamp of its first bytes; fragments joined; 1007 on invalid text, 1009 on oversize; pings
answered; the closing handshake (and its timeout); bounded buffering with back-pressure.
wss:// and proxies: test_socket_tls_proxy.py; the client and server both use: _websocket_peers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from _websocket_peers import open_client, until_closure, websocket_server
from websockets.server import ServerProtocol

from voicelab.endpoints import _socket
from voicelab.endpoints._socket import (
    INBOX_MAX_BYTES,
    Closure,
    MessageInbox,
)

# One read of the event loop takes up to 256 KiB: what can land in the inbox past its bound.
READ_SLACK_BYTES = 512 * 1024


class SteppedClock:
    """A trial clock the test moves by hand, so a stamp says which write it came from."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


async def _receive_all(handler, **options) -> list[tuple[int, object]]:
    async with websocket_server(handler) as uri:
        inbox = MessageInbox()
        await open_client(uri, inbox, **options)
        return await until_closure(inbox)


@contextlib.asynccontextmanager
async def _raw_server(after_handshake: Callable[[ServerProtocol, asyncio.StreamReader,
                                                 asyncio.StreamWriter], Awaitable[None]]
                      ) -> AsyncIterator[str]:
    """A server on websockets' Sans-I/O layer that writes bytes exactly as the test says. The
    handshake response is left in ``data_to_send()`` for ``after_handshake`` to write."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        protocol = ServerProtocol()
        while not (events := protocol.events_received()):
            protocol.receive_data(await reader.read(65536))
        protocol.send_response(protocol.accept(events[0]))
        try:
            await after_handshake(protocol, reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _wire(protocol: ServerProtocol) -> bytes:
    return b"".join(protocol.data_to_send())


# --- messages and stamps -------------------------------------------------------------------

def test_messages_fragments_and_the_closure_arrive_in_order():
    async def handler(ws):
        await ws.send("first")
        await ws.send(["frag", "mented ", "text"])
        await ws.send([b"\x01\x02", b"\x03"])
        await ws.send(b"\x00" * 4800)
        await ws.close(1000, "done")

    received = asyncio.run(_receive_all(handler))
    items = [item for _, item in received]
    assert items == ["first", "fragmented text", b"\x01\x02\x03", b"\x00" * 4800,
                     Closure(1000, "done")]
    stamps = [ns for ns, _ in received]
    assert stamps == sorted(stamps)


def test_the_handshake_sends_the_headers_and_asks_for_no_compression():
    seen = {}

    async def handler(ws):
        for name in ("Authorization", "traceparent", "User-Agent", "Sec-WebSocket-Extensions"):
            seen[name] = ws.request.headers.get(name)
        await ws.close()

    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    asyncio.run(_receive_all(handler, headers={"Authorization": "Bearer t0ken",
                                               "traceparent": traceparent}))
    assert seen["Authorization"] == "Bearer t0ken"
    assert seen["traceparent"] == traceparent
    assert seen["User-Agent"] == "voicelab-test"
    assert seen["Sec-WebSocket-Extensions"] is None


def test_a_fragmented_message_carries_the_stamp_of_its_first_fragment():
    clock = SteppedClock()

    async def fragments():
        yield "first fragment, "
        await asyncio.sleep(0.1)  # the client reads the first fragment meanwhile
        clock.now = 2
        yield "last fragment"

    async def handler(ws):
        clock.now = 1
        await ws.send(fragments())
        await ws.send("after")
        await ws.close()

    received = asyncio.run(_receive_all(handler, clock_ns=clock))
    assert received[:2] == [(1, "first fragment, last fragment"), (2, "after")]


def test_each_message_carries_the_stamp_of_the_read_that_held_its_first_byte():
    # Frames with 2-, 4- and 10-byte headers; one in the same read as the handshake response,
    # one whose first byte ends that read, one split across reads, one starting a read: a byte
    # count off by one would move a stamp.
    clock = SteppedClock()
    big = bytes(range(256)) * 300  # 76800 bytes: a 10-byte header

    async def writes(protocol: ServerProtocol, reader, writer) -> None:
        steps: list[bytes] = []
        protocol.send_text(b"hello")
        protocol.send_binary(b"a" * 100)
        first = _wire(protocol)  # with the handshake response
        steps.append(first[:-101])  # ... "hello" and the first byte of the next frame
        protocol.send_binary(big)
        second = first[-101:] + _wire(protocol)
        steps.append(second[:40_000])
        protocol.send_binary(b"c" * 300)
        protocol.send_text(b"d")
        steps.append(second[40_000:] + _wire(protocol))
        protocol.send_text(b"e")
        steps.append(_wire(protocol))
        protocol.send_close(1000, "done")
        steps.append(_wire(protocol))
        for step, data in enumerate(steps, start=1):
            clock.now = step
            writer.write(data)
            await asyncio.sleep(0.1)  # the client reads this step before the next
        await reader.read(65536)  # the client's close frame

    async def main():
        async with _raw_server(writes) as uri:
            inbox = MessageInbox()
            await open_client(uri, inbox, clock_ns=clock)
            return await until_closure(inbox)

    received = asyncio.run(main())
    assert received == [(1, "hello"), (1, b"a" * 100), (2, big), (3, b"c" * 300), (3, "d"),
                        (4, "e"), (5, Closure(1000, "done"))]


# --- failures ------------------------------------------------------------------------------

def test_invalid_utf8_text_fails_the_connection_with_1007():
    server_saw = {}

    async def handler(ws):
        await ws.send("ok")
        await ws.send(b"\xff\xfe not utf-8", text=True)
        await ws.send("never delivered")
        await ws.wait_closed()
        server_saw["code"] = ws.close_code

    received = asyncio.run(_receive_all(handler))
    assert [item for _, item in received[:1]] == ["ok"]
    closure = received[-1][1]
    assert isinstance(closure, Closure)
    assert closure.code == 1007 and closure.local_failure
    assert len(received) == 2
    assert server_saw["code"] == 1007


@pytest.mark.parametrize("message", [b"\x00" * 2048, [b"\x00" * 600] * 3],
                         ids=["one frame", "fragments"])
def test_a_message_over_max_message_bytes_fails_the_connection_with_1009(message):
    async def handler(ws):
        await ws.send("small")
        await ws.send(message)
        await ws.wait_closed()

    received = asyncio.run(_receive_all(handler, max_message_bytes=1024))
    assert [item for _, item in received[:-1]] == ["small"]
    closure = received[-1][1]
    assert isinstance(closure, Closure)
    assert closure.code == 1009 and closure.local_failure


# --- control frames and closing ------------------------------------------------------------

def test_pings_are_answered():
    async def handler(ws):
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 5)
        await ws.send("pong received")
        await ws.close()

    received = asyncio.run(_receive_all(handler))
    assert [item for _, item in received] == ["pong received", Closure(1000, "")]


def test_closing_completes_the_handshake_with_the_server():
    server_saw = {}

    async def handler(ws):
        await ws.wait_closed()
        server_saw["close"] = (ws.close_code, ws.close_reason)

    async def main():
        async with websocket_server(handler) as uri:
            inbox = MessageInbox()
            ws = await open_client(uri, inbox)
            await ws.send("hello")
            await ws.close(1000, "bye")
            assert ws.closed
            return await until_closure(inbox)

    received = asyncio.run(main())
    assert received[-1][1] == Closure(1000, "bye")  # the server's echo: not a local failure
    assert server_saw["close"] == (1000, "bye")


def test_closing_gives_up_on_a_silent_server_after_the_timeout(monkeypatch):
    monkeypatch.setattr(_socket, "CLOSE_TIMEOUT_SECONDS", 0.2)

    async def silent(protocol, reader, writer) -> None:
        writer.write(_wire(protocol))
        await reader.read(65536)  # the close frame, never answered
        await reader.read(65536)  # until the client aborts

    async def main():
        async with _raw_server(silent) as uri:
            inbox = MessageInbox()
            ws = await open_client(uri, inbox)
            await asyncio.wait_for(ws.close(1000, "bye"), 5)
            return await until_closure(inbox)

    received = asyncio.run(main())
    assert received == [(received[0][0], Closure(1000, "bye", local_failure=True))]


def test_an_unanswered_keepalive_ping_fails_the_connection_with_1011(monkeypatch):
    monkeypatch.setattr(_socket, "KEEPALIVE_SECONDS", 0.05)
    monkeypatch.setattr(_socket, "CLOSE_TIMEOUT_SECONDS", 0.2)

    async def deaf(protocol, reader, writer) -> None:
        writer.write(_wire(protocol))
        while await reader.read(65536):  # pings read, never answered
            pass

    async def main():
        async with _raw_server(deaf) as uri:
            inbox = MessageInbox()
            await open_client(uri, inbox)
            return await until_closure(inbox)

    received = asyncio.run(main())
    closure = received[-1][1]
    assert closure == Closure(1011, "keepalive ping timeout", local_failure=True)


# --- back-pressure -------------------------------------------------------------------------

def test_a_consumer_that_falls_behind_pauses_reading_without_losing_anything():
    count, size = 1024, 32 * 1024  # 32 MiB: more than the kernel's socket buffers can hold
    sent = {"messages": 0}

    async def flood(ws):
        for index in range(count):
            await ws.send(index.to_bytes(4, "big") + bytes(size - 4))
            sent["messages"] = index + 1
        await ws.close(1000, "done")

    async def main():
        async with websocket_server(flood) as uri:
            inbox = MessageInbox()
            await open_client(uri, inbox)
            async with asyncio.timeout(10):
                while not inbox.pauses:  # the consumer takes nothing until reading pauses
                    await asyncio.sleep(0.01)
            held = (len(inbox), inbox.buffered_bytes)
            await asyncio.sleep(0.2)
            assert (len(inbox), inbox.buffered_bytes) == held  # nothing read while paused
            assert INBOX_MAX_BYTES < inbox.buffered_bytes <= INBOX_MAX_BYTES + READ_SLACK_BYTES
            assert sent["messages"] < count  # the server is held back, not buffered for
            peak = 0
            received = []
            while not received or not isinstance(received[-1][1], Closure):
                peak = max(peak, inbox.buffered_bytes)
                received.append(await asyncio.wait_for(inbox.get(), 10))
                if len(received) % 16 == 0:
                    await asyncio.sleep(0)  # a consumer slower than the socket
            return received, peak, inbox.pauses

    received, peak, pauses = asyncio.run(main())
    messages = [item for _, item in received[:-1]]
    assert [int.from_bytes(m[:4], "big") for m in messages] == list(range(count))
    assert all(len(m) == size for m in messages)
    assert received[-1][1] == Closure(1000, "done")
    stamps = [ns for ns, _ in received]
    assert stamps == sorted(stamps)
    assert peak <= INBOX_MAX_BYTES + READ_SLACK_BYTES
    assert pauses >= 1


def test_the_inbox_resumes_reading_once_drained_to_half_its_bounds():
    class Reading:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def pause_reading(self) -> None:
            self.calls.append("pause")

        def resume_reading(self) -> None:
            self.calls.append("resume")

    reading = Reading()
    inbox = MessageInbox(max_bytes=100, max_messages=4)
    inbox.fill_from(reading)
    for index in range(5):
        inbox.put_nowait((index, "x"))
    assert reading.calls == ["pause"]  # five messages: over the message bound
    inbox.get_nowait()
    inbox.get_nowait()
    assert reading.calls == ["pause"]  # three left: above half of four
    inbox.get_nowait()
    assert reading.calls == ["pause", "resume"]
    inbox.put_nowait((5, "y" * 101))
    assert reading.calls == ["pause", "resume", "pause"]  # over the byte bound
    assert [inbox.get_nowait()[0] for _ in range(3)] == [3, 4, 5]
    assert reading.calls[-1] == "resume"
