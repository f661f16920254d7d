"""The loop-lag watch bounds what it cannot see directly: a loop blocked for a known time just
after data reached a socket, at every phase of the 2 ms ticker, on a real event loop over a
real socket pair. Each chunk's stamp (taken where voicelab takes it, in ``data_received``)
must be within the error bound the late ticks give it, or the bound must say more. Only
orderings on one clock are asserted: the bound against each chunk's own logged truth (when its
bytes were written), never a wall-clock duration."""

from __future__ import annotations

import asyncio
import socket
import time

import numpy as np

from voicelab.metrics import LateTicks, stamp_error_bounds
from voicelab.runner._loop_lag import PACED_TICK_INTERVAL_MS, LoopLagMonitor

BLOCK_SECONDS = 0.008  # a synchronous call on the loop (a plug-in, a big decode)
PHASES = 24  # block start offsets spread over two tick intervals


class _Stamping(asyncio.Protocol):
    """Stamps each read like the WebSocket client: first thing in ``data_received``."""

    def __init__(self) -> None:
        self.stamps: list[int] = []

    def data_received(self, data: bytes) -> None:
        self.stamps.append(time.perf_counter_ns())


async def _blocked_reads() -> tuple[list[int], list[int], LateTicks, int]:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    _, reader = await loop.connect_accepted_socket(_Stamping, ours)
    monitor = LoopLagMonitor()
    start_ns = time.perf_counter_ns()
    window = monitor.open(interval_ms=PACED_TICK_INTERVAL_MS)
    written: list[int] = []

    def write_then_block() -> None:
        theirs.send(b"x")  # the product's send: the truth
        written.append(time.perf_counter_ns())
        time.sleep(BLOCK_SECONDS)  # the loop cannot read it meanwhile

    for phase in range(PHASES):
        await asyncio.sleep(0.02)  # a free loop between the samples
        loop.call_later(phase * PACED_TICK_INTERVAL_MS / PHASES * 2 / 1000, write_then_block)
        while len(reader.stamps) <= phase:
            await asyncio.sleep(0.001)
    monitor.close(window)
    theirs.close()
    late = _late_ticks(window.late_ticks(start_ns=start_ns))
    return written, reader.stamps, late, start_ns


def _late_ticks(pairs: list[list[int]]) -> LateTicks:
    array = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return LateTicks(1.0, array[:, 0] * 1000, array[:, 1] * 1000)


def test_a_read_delayed_by_a_blocked_loop_is_within_its_bound_at_every_tick_phase():
    written, stamps, ticks, start_ns = asyncio.run(_blocked_reads())
    assert len(stamps) == len(written) == PHASES
    offsets = {f"chunk-{i}": [stamp - start_ns] for i, stamp in enumerate(stamps)}
    bounds = stamp_error_bounds(offsets, ticks, interval_ms=PACED_TICK_INTERVAL_MS)
    for index, (sent, stamp) in enumerate(zip(written, stamps, strict=True)):
        late_ms = (stamp - sent) / 1e6
        assert stamp > sent
        # the bound covers how late the stamp really is: the block may have begun just after
        # an on-time tick, which the next tick sees as the block minus one interval
        assert bounds[f"chunk-{index}"].max_ms >= late_ms - 0.001, (index, late_ms, bounds)


def test_the_ticker_is_due_one_interval_after_the_wake_up_it_re_arms_from():
    # the bounds rely on it: the tick before a late one woke exactly one interval before
    # that one was due (a second clock reading would hide a stall between the two)
    readings = iter([0, 5_000_000, 50_000_000, 60_000_000])  # opened, woke, then a stall

    async def scenario() -> int:
        monitor = LoopLagMonitor(interval_ms=2.0, clock_ns=lambda: next(readings))
        window = monitor.open()
        loop = asyncio.get_running_loop()
        monitor._tick(loop)  # noqa: SLF001 - one tick, by hand
        intended = monitor._intended_ns  # noqa: SLF001
        monitor.close(window)
        return intended

    assert asyncio.run(scenario()) == 5_000_000 + 2_000_000


def test_the_ticker_wakes_at_the_finest_interval_an_open_window_wants():
    async def scenario() -> list[float]:
        monitor = LoopLagMonitor(interval_ms=10.0)
        seen = []
        coarse = monitor.open()
        seen.append(monitor._interval_ms)  # noqa: SLF001
        fine = monitor.open(interval_ms=PACED_TICK_INTERVAL_MS)
        seen.append(monitor._interval_ms)  # noqa: SLF001
        monitor.close(fine)
        seen.append(monitor._interval_ms)  # noqa: SLF001
        monitor.close(coarse)
        return seen

    assert asyncio.run(scenario()) == [10.0, PACED_TICK_INTERVAL_MS, 10.0]


def test_the_log_keeps_every_tick_an_open_window_needs_however_often_it_is_trimmed():
    clock = iter(range(0, 10**12, 1_000_000))

    async def scenario() -> tuple[int, int, int]:
        monitor = LoopLagMonitor(interval_ms=1.0, clock_ns=lambda: next(clock))
        monitor.TRIM_TICKS = 50
        loop = asyncio.get_running_loop()
        old = monitor.open()
        for _ in range(120):
            monitor._tick(loop)  # noqa: SLF001 - ticks by hand
        young = monitor.open()
        for _ in range(300):
            monitor._tick(loop)  # noqa: SLF001
        monitor.close(old)
        for _ in range(200):
            monitor._tick(loop)  # noqa: SLF001
        monitor.close(young)
        assert old.lateness_ns is not None and young.lateness_ns is not None
        return len(old.lateness_ns), len(young.lateness_ns), len(monitor._log)  # noqa: SLF001

    assert asyncio.run(scenario()) == (420, 500, 0)
