"""Watching the event loop's lag while trials run: one light ticker per loop, one window per trial.

The ticker sleeps ``TICK_INTERVAL_MS`` and notes how late it woke (actual minus intended, on the
recording's clock). A late wake-up means the loop was busy (or blocked) and every arrival
stamped meanwhile waited as long. Trials sharing a loop share its lag, so they share one ticker:
its cost stays ~100 wake-ups a second whatever the number of concurrent trials (a ticker per
trial would itself load a saturated loop). Each trial opens a :class:`LagWindow` when its
conversation starts and closes it when the conversation ends; the window receives every
lateness measured in between. The ticker stops when the last window closes.
"""

from __future__ import annotations

import array
import asyncio
import time
import weakref
from collections.abc import Callable

from ..artifacts import LoopLag
from ..metrics import loop_lag_statistics

#: How often the ticker wakes (ms). Finer costs more wake-ups; coarser misses short stalls
#: between ticks only in the count, never in the lateness (a block delays the next wake-up).
TICK_INTERVAL_MS = 10.0


class LagWindow:
    """The lateness of every tick while one trial ran (ns)."""

    def __init__(self, interval_ms: float):
        self.interval_ms = interval_ms
        self.lateness_ns = array.array("q")
        self.closed = False

    def statistics(self) -> LoopLag:
        return loop_lag_statistics(self.lateness_ns, interval_ms=self.interval_ms)


class LoopLagMonitor:
    """The ticker of one event loop. Windows are held weakly: a trial that dies without closing
    its window stops receiving ticks once it is collected."""

    def __init__(self, *, interval_ms: float = TICK_INTERVAL_MS,
                 clock_ns: Callable[[], int] = time.perf_counter_ns):
        self.interval_ms = interval_ms
        self.clock_ns = clock_ns
        self._windows: weakref.WeakSet[LagWindow] = weakref.WeakSet()
        #: the next tick (a bare timer callback: no task or future per tick)
        self._timer: asyncio.TimerHandle | None = None
        self._intended_ns = 0

    @property
    def ticking(self) -> bool:
        return self._timer is not None

    def open(self) -> LagWindow:
        window = LagWindow(self.interval_ms)
        self._windows.add(window)
        if self._timer is None:
            self._schedule(asyncio.get_running_loop())
        return window

    def close(self, window: LagWindow) -> LoopLag:
        window.closed = True
        self._windows.discard(window)
        if not self._windows and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return window.statistics()

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        self._intended_ns = self.clock_ns() + int(self.interval_ms * 1_000_000)
        self._timer = loop.call_later(self.interval_ms / 1000.0, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        # the selector rounds its timeout to the millisecond: a quiet loop reads 0-1 ms
        lateness = max(0, self.clock_ns() - self._intended_ns)
        for window in self._windows:
            window.lateness_ns.append(lateness)
        if self._windows:
            self._schedule(loop)
        else:  # the last window was dropped without being closed
            self._timer = None


_monitors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLagMonitor] = \
    weakref.WeakKeyDictionary()


def loop_monitor() -> LoopLagMonitor:
    """The running loop's monitor (created on first use)."""
    loop = asyncio.get_running_loop()
    monitor = _monitors.get(loop)
    if monitor is None:
        monitor = _monitors[loop] = LoopLagMonitor()
    return monitor
