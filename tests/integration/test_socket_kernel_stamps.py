"""Kernel receive stamps on the WebSocket's TCP socket, over real sockets on 127.0.0.1, on the
standard library's loop and on uvloop: a message that ends a read carries the moment the kernel
received it however long the loop was blocked; messages that queued up behind each other keep
the loop's stamp, are listed as such, and the loop-lag watch's bound covers their real error.

The product side is a plain socket in a thread (so blocking the client's loop does not block
it), speaking websockets' Sans-I/O server protocol; it notes each message's send time on the
same monotonic clock the client stamps with.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from websockets.server import ServerProtocol

from voicelab.config import SecretScrubber
from voicelab.endpoints import EndpointContext
from voicelab.endpoints._kernel_clock import (
    SO_TIMESTAMPNS,
    STAMP_ANCILLARY_BYTES,
    ancillary_stamp_ns,
)
from voicelab.endpoints._socket import (
    KERNEL_STREAM_STAMPS,
    LOOP_STAMPED_ATTRIBUTE,
    Closure,
    MessageInbox,
)
from voicelab.endpoints._socket_open import open_websocket
from voicelab.endpoints._stamped_stream import connect_stamped
from voicelab.endpoints.websocket import WebSocketEndpoint
from voicelab.metrics import stamp_error_bounds
from voicelab.metrics._measurement import LateTicks
from voicelab.runner._loop_lag import PACED_TICK_INTERVAL_MS, LoopLagMonitor

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="kernel receive stamps on TCP: Linux")

#: how far a kernel stamp may lie after the send: the loopback delivery and the conversion of
#: the wall-clock stamp to the monotonic clock (tens of microseconds; a busy CI machine may
#: delay the delivery itself, which is real arrival time, so this is generous)
KERNEL_STAMP_SLACK_NS = 2_000_000
BLOCK_SECONDS = 0.08


@pytest.fixture(autouse=True, scope="module")
def kernel_stamping_on() -> Iterator[None]:
    """Linux turns its receive stamps on for the whole system some time after a socket first
    asks (deferred work, which a loaded machine runs late); until then a read gets its own
    time, which voicelab rightly takes for a loop stamp. Keep a stamped socket open for the
    module and wait until a datagram that waited is stamped before its read."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        probe.settimeout(1.0)
        probe.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        for _ in range(100):
            probe.sendto(b"warm", probe.getsockname())
            time.sleep(0.02)
            _, ancillary, _, _ = probe.recvmsg(16, STAMP_ANCILLARY_BYTES)
            stamp = ancillary_stamp_ns(ancillary)
            if stamp is not None and time.time_ns() - stamp >= 10_000_000:
                break
        yield


def _loop_factories() -> list[Callable[[], asyncio.AbstractEventLoop]]:
    factories: list[Callable[[], asyncio.AbstractEventLoop]] = [asyncio.new_event_loop]
    try:
        import uvloop
    except ImportError:
        return factories
    return [*factories, uvloop.new_event_loop]


class ThreadedProduct:
    """A WebSocket server on a plain socket in its own thread. ``script`` runs there after the
    handshake with ``send(text)`` (returns the send time) and the test's events."""

    def __init__(self, script: Callable[[Callable[..., int]], None]):
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.uri = f"ws://127.0.0.1:{self._listener.getsockname()[1]}"
        self._script = script
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        protocol = ServerProtocol()
        while not (events := protocol.events_received()):
            protocol.receive_data(conn.recv(65536))
        protocol.send_response(protocol.accept(events[0]))
        conn.sendall(b"".join(protocol.data_to_send()))

        def send(*messages: str | bytes) -> int:
            """The messages in one write (one segment: the kernel stamps them as one)."""
            for message in messages:
                if isinstance(message, str):
                    protocol.send_text(message.encode())
                else:
                    protocol.send_binary(message)
            sent_ns = time.perf_counter_ns()
            conn.sendall(b"".join(protocol.data_to_send()))
            return sent_ns

        try:
            self._script(send)
            protocol.send_close(1000, "done")
            conn.sendall(b"".join(protocol.data_to_send()))
            conn.settimeout(5)
            while conn.recv(65536):
                pass
        finally:
            conn.close()
            self._listener.close()

    def join(self) -> None:
        self._thread.join(10)


def _run(factory: Callable[[], asyncio.AbstractEventLoop],
         script: Callable[[Callable[..., int], threading.Event], None]):
    """Connect, let ``script`` send while the test blocks the loop on its signal; returns the
    messages (stamp, text), the loop-stamped list and the late ticks of a watch over it all."""
    blocked = threading.Event()  # the loop is about to block: the product may send
    product = ThreadedProduct(lambda send: script(send, blocked))

    async def main():
        monitor = LoopLagMonitor()
        window = monitor.open(interval_ms=PACED_TICK_INTERVAL_MS)
        inbox = MessageInbox()
        connection = await open_websocket(
            product.uri, headers={}, connect_timeout_seconds=5, max_message_bytes=1 << 20,
            clock_ns=time.perf_counter_ns, inbox=inbox, where="test product",
            scrubber=SecretScrubber(), user_agent="voicelab-test")
        assert connection.kernel_stamps
        received: list[tuple[int, object]] = []
        for _ in range(50):
            await asyncio.sleep(0.01)
            blocked.set()  # the product sends now, while the loop sleeps without reading
            time.sleep(BLOCK_SECONDS)
            blocked.clear()
            await asyncio.sleep(0.01)
            while not inbox.empty():
                received.append(inbox.get_nowait())
            if received and isinstance(received[-1][1], Closure):
                break
        monitor.close(window)
        ticks = window.late_ticks(start_ns=0)
        return received, connection.loop_stamped, ticks

    with asyncio.Runner(loop_factory=factory) as runner:
        result = runner.run(main())
    product.join()
    return result


@pytest.mark.parametrize("factory", _loop_factories(), ids=lambda f: f.__module__)
def test_a_message_read_late_carries_the_kernels_stamp_and_queued_ones_keep_the_loops(factory):
    sent: dict[str, int] = {}

    def script(send: Callable[..., int], blocked: threading.Event) -> None:
        blocked.wait(5)
        sent["alone"] = send("alone")  # read ~BLOCK_SECONDS later, alone in its read
        time.sleep(BLOCK_SECONDS * 1.5)
        blocked.wait(5)
        sent["first"] = send("first")  # these two queue up while the loop is blocked
        time.sleep(0.01)
        sent["second"] = send("second")
        time.sleep(BLOCK_SECONDS * 1.5)  # the close frame comes in a read of its own

    received, loop_stamped, ticks = _run(factory, script)
    stamps = {item: stamp for stamp, item in received if isinstance(item, str)}
    assert list(stamps) == ["alone", "first", "second"]
    assert loop_stamped is not None
    # read late, yet stamped when the kernel received it
    for name in ("alone", "second"):
        assert 0 <= stamps[name] - sent[name] <= KERNEL_STAMP_SLACK_NS, name
    listed = dict(loop_stamped)
    assert stamps["alone"] not in listed
    # queued up with "second" in one read, which the kernel stamps as second's arrival: just
    # before that stamp (later than its own arrival), listed as the loop's, with how late it
    # may be: since the read before, which emptied the queue (before the product sent it)
    assert list(listed) == [stamps["first"]]
    assert stamps["first"] == stamps["second"] - 1
    assert stamps["first"] - sent["first"] >= 5_000_000
    assert listed[stamps["first"]] >= stamps["first"] - sent["first"]
    # ... and the loop-lag watch's bound covers its real error
    pairs = np.asarray(ticks, dtype=np.int64).reshape(-1, 2) * 1000  # us -> ns
    late_ticks = LateTicks(1.0, pairs[:, 0], pairs[:, 1])
    bound = stamp_error_bounds({"r": [stamps["first"]]}, late_ticks,
                               interval_ms=PACED_TICK_INTERVAL_MS)["r"]
    assert bound.max_ms * 1e6 >= stamps["first"] - sent["first"]
    assert [stamp for stamp, _ in received] == sorted(stamp for stamp, _ in received)


def test_the_protocol_v1_adapter_says_its_stamps_are_the_kernels_and_lists_the_loops():
    # the product sends its last audio and response.done together (one read): the audio is
    # listed on the closed event with how late it may be; response.done ends the read, exact
    def script(send: Callable[..., int], blocked: threading.Event) -> None:
        protocol_init.wait(5)
        send(b"\x00\x00" * 480)
        time.sleep(0.05)
        send(b"\x00\x00" * 480, json.dumps({"type": "response.done",
                                             "response": {"status": "completed"}}))
        time.sleep(0.05)

    protocol_init = threading.Event()
    product = ThreadedProduct(lambda send: script(send, protocol_init))

    async def scenario():
        endpoint = WebSocketEndpoint({"uri": product.uri}, EndpointContext(session_id="s"))
        await endpoint.connect()
        protocol_init.set()
        stamps = endpoint.arrival_stamps()
        events = [event async for event in endpoint.events()]
        return stamps, events

    stamps, events = asyncio.run(scenario())
    product.join()
    assert stamps == KERNEL_STREAM_STAMPS
    assert [e.type for e in events] == ["audio_delta", "audio_delta", "turn_complete", "closed"]
    closed = events[-1]
    listed = {closed.received_ns - before: late
              for before, late in closed.data[LOOP_STAMPED_ATTRIBUTE]}
    # read alone: the kernel's stamp (a loaded machine may split or join its reads: then
    # the loop's, listed with its bound, never silently)
    assert listed.get(events[0].received_ns, 0) >= 0
    assert listed[events[1].received_ns] >= 0  # ... queued with response.done: the loop's
    assert events[2].received_ns not in listed and events[2].received_ns > events[1].received_ns
    assert listed[closed.received_ns] == -1  # the closure's own stamp is the loop's


def test_the_stamped_transport_buffers_writes_pauses_the_writer_and_delivers_in_order():
    # a peer that does not read: the kernel's buffers fill, the transport keeps the rest and
    # pauses the writer past its high mark; once the peer reads, everything arrives in order
    events: list[str] = []

    class Recorder:
        def connection_made(self, transport) -> None:
            events.append("made")

        def stamped_data_received(self, data, read_ns, kernel_ns, since_ns) -> None:
            events.append("data")

        def eof_received(self) -> bool:
            events.append("eof")
            return False

        def connection_lost(self, exc) -> None:
            events.append("lost")

        def pause_writing(self) -> None:
            events.append("pause")

        def resume_writing(self) -> None:
            events.append("resume")

    payload = bytes(range(256)) * 16384  # 4 MiB: more than the kernel's buffers hold

    async def main() -> bytes:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.setblocking(False)
        loop = asyncio.get_running_loop()
        connecting = asyncio.ensure_future(connect_stamped(
            "127.0.0.1", listener.getsockname()[1], Recorder(), clock_ns=time.perf_counter_ns))
        peer, _ = await loop.sock_accept(listener)
        transport = await connecting
        for start in range(0, len(payload), 65536):
            transport.write(payload[start:start + 65536])
        assert "pause" in events
        transport.close()  # after the buffer is written
        received = bytearray()
        while chunk := await loop.sock_recv(peer, 1 << 20):
            received += chunk
        peer.close()
        listener.close()
        await asyncio.sleep(0)
        return bytes(received)

    assert asyncio.run(main()) == payload
    assert events[0] == "made" and events.index("pause") < events.index("resume")
    assert events[-1] == "lost"


@pytest.mark.parametrize(("setting", "stamped"), [("0", False), ("1", True), ("", True)])
def test_voicelab_kernel_stamps_0_keeps_the_loops_transport(monkeypatch, setting, stamped):
    # the diagnostic switch: with it the connection reads through the loop's own transport and
    # says so, so a benchmark can count what the stamps cost against it
    monkeypatch.setenv("VOICELAB_KERNEL_STAMPS", setting)
    product = ThreadedProduct(lambda send: send("hello"))

    async def main() -> tuple[bool, str | None]:
        inbox = MessageInbox()
        connection = await open_websocket(
            product.uri, headers={}, connect_timeout_seconds=5, max_message_bytes=1 << 20,
            clock_ns=time.perf_counter_ns, inbox=inbox, where="test product",
            scrubber=SecretScrubber(), user_agent="voicelab-test")
        _, message = await inbox.get()
        connection.abort()
        return connection.kernel_stamps, message if isinstance(message, str) else None

    assert asyncio.run(main()) == (stamped, "hello")
    product.join()
