"""RTP arrival stamps come from the kernel: a datagram that waited in the socket while the
event loop was busy keeps the moment it arrived, not the moment it was read."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from voicelab.endpoints.sip._stamped_socket import StampedDatagramSocket

Address = tuple[str, int]


class Collect:
    def __init__(self) -> None:
        self.received: list[tuple[bytes, Address, int, int]] = []  # (data, addr, stamp, read)
        self.errors: list[Exception] = []

    def stamped_datagram_received(self, data: bytes, addr: Address, received_ns: int) -> None:
        self.received.append((data, addr, received_ns, time.perf_counter_ns()))

    def error_received(self, exc: Exception) -> None:
        self.errors.append(exc)


async def _kernel_stamping_on(stamped: StampedDatagramSocket, collect: Collect) -> None:
    """Wait until the kernel stamps arrivals. Linux turns its receive stamps on for the whole
    system some time after the first socket asks (deferred work, which a loaded machine runs
    late); until then a read gets the read's own time as its "stamp"."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for _ in range(100):
            sender.sendto(b"warm", stamped.get_extra_info("sockname"))  # type: ignore[arg-type]
            time.sleep(0.02)  # the loop is busy
            while not collect.received:
                await asyncio.sleep(0.001)
            _, _, stamp, read = collect.received.pop()
            if read - stamp >= 10_000_000:
                return


def test_a_datagram_keeps_its_arrival_while_the_loop_is_busy() -> None:
    async def test() -> None:
        collect = Collect()
        stamped = StampedDatagramSocket.bind(("127.0.0.1", 0), collect,
                                             clock_ns=time.perf_counter_ns)
        if not stamped.kernel_stamps:
            pytest.skip("this kernel gives no receive stamps (SO_TIMESTAMPNS)")
        await _kernel_stamping_on(stamped, collect)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sent_ns = time.perf_counter_ns()
            sender.sendto(b"rtp", stamped.get_extra_info("sockname"))  # type: ignore[arg-type]
            time.sleep(0.3)  # the loop is busy: the datagram waits in the socket
            while not collect.received:
                await asyncio.sleep(0.001)
        stamped.close()
        [(data, addr, stamp, read)] = collect.received
        assert data == b"rtp" and addr[0] == "127.0.0.1"
        # the stamp is the arrival (just after the send), not the read 300 ms later
        assert sent_ns <= stamp + 1_000_000 and stamp - sent_ns < read - stamp
        assert read - stamp >= 250_000_000

    asyncio.run(test())


def test_sending_and_closing() -> None:
    async def test() -> None:
        collect = Collect()
        first = StampedDatagramSocket.bind(("127.0.0.1", 0), collect,
                                           clock_ns=time.perf_counter_ns)
        second = StampedDatagramSocket.bind(("127.0.0.1", 0), collect,
                                            clock_ns=time.perf_counter_ns)
        where = second.get_extra_info("sockname")
        assert isinstance(where, tuple)
        for index in range(5):
            first.sendto(bytes([index]), (where[0], where[1]))
        deadline = time.monotonic() + 5
        while len(collect.received) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert [data for data, *_ in collect.received] == [bytes([i]) for i in range(5)]
        stamps = [stamp for _, _, stamp, _ in collect.received]
        assert stamps == sorted(stamps)
        first.close()
        first.close()
        assert first.is_closing()
        first.sendto(b"after", (where[0], where[1]))  # nothing happens, nothing raises
        second.close()

    asyncio.run(test())


def test_a_port_nobody_listens_on_is_an_error_not_an_exception() -> None:
    async def test() -> None:
        collect = Collect()
        stamped = StampedDatagramSocket.bind(("127.0.0.1", 0), collect,
                                             clock_ns=time.perf_counter_ns)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            closed_port = probe.getsockname()[1]
        sock = stamped.get_extra_info("socket")
        assert isinstance(sock, socket.socket)
        sock.connect(("127.0.0.1", closed_port))  # so the ICMP error comes back to this socket
        stamped.sendto(b"x", ("127.0.0.1", closed_port))
        deadline = time.monotonic() + 5
        while not collect.errors and time.monotonic() < deadline:
            stamped.sendto(b"x", ("127.0.0.1", closed_port))
            await asyncio.sleep(0.01)
        stamped.close()
        assert any(isinstance(error, ConnectionRefusedError) for error in collect.errors)

    asyncio.run(test())
