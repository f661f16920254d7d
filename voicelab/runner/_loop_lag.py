"""Watching the event loop's lag while trials run: one light ticker per loop, one window per trial.

The ticker sleeps ``TICK_INTERVAL_MS`` (``PACED_TICK_INTERVAL_MS`` while a trial in real time
is open) and notes how late it woke (actual minus intended, on the recording's clock). A late wake-up means the loop was busy (or blocked) and every arrival
stamped meanwhile waited as long. Trials sharing a loop share its lag, so they share one ticker:
its cost stays ~100 wake-ups a second whatever the number of concurrent trials (a ticker per
trial would itself load a saturated loop). Each trial opens a :class:`LagWindow` when its
conversation starts and closes it when the conversation ends; the window receives every
lateness measured in between, and the moment of each wake-up (so a trial can tell *where* its
loop lagged: :func:`voicelab.metrics.stamp_error_bounds`). The ticker stops when the last
window closes.
"""

from __future__ import annotations

import array
import asyncio
import time
import weakref
from collections.abc import Callable

import numpy as np

from ..artifacts import LoopLag
from ..metrics import LATE_TICK_FLOOR_MS, loop_lag_statistics

#: How often the ticker wakes (ms). Finer costs more wake-ups; coarser misses a block shorter
#: than the interval that ends before a tick is due (a longer one delays the next wake-up).
TICK_INTERVAL_MS = 10.0
#: ... while a trial whose timings are real time (paced audio, a live line) is open: a block
#: of a few ms between 10 ms ticks would delay a first audio packet unseen; a tick every 2 ms
#: sees it (each wake-up costs the loop, so unpaced runs keep the coarser tick).
PACED_TICK_INTERVAL_MS = 2.0


class LagWindow:
    """One trial's view of the ticker: the ticks from ``start`` (an absolute tick number) until
    it is closed; ``lateness_ns`` and ``woke_ns`` (when each tick ran, on the monotonic clock)
    hold them once closed."""

    def __init__(self, interval_ms: float, start: int):
        self.interval_ms = interval_ms
        self.start = start
        self.lateness_ns: array.array[int] | None = None
        self.woke_ns: array.array[int] | None = None

    def statistics(self) -> LoopLag:
        return loop_lag_statistics(self.lateness_ns if self.lateness_ns is not None else [],
                                   interval_ms=self.interval_ms)

    def late_ticks(self, *, start_ns: int, floor_ms: float = LATE_TICK_FLOOR_MS
                   ) -> list[list[int]]:
        """The ticks later than ``floor_ms``, as ``[wake offset, lateness]`` pairs in whole
        microseconds, the offset on a recording's clock starting at ``start_ns`` (the quiet
        ticks are left out: a free loop keeps nothing, a saturated one a pair per tick)."""
        return self.late_tick_pairs(start_ns=start_ns, floor_ms=floor_ms).tolist()

    def late_tick_pairs(self, *, start_ns: int, floor_ms: float = LATE_TICK_FLOOR_MS
                        ) -> np.ndarray:
        """:meth:`late_ticks` as an ``(n, 2)`` integer array (picked in numpy: a paced trial
        has a tick every 2 ms, and its window closes on the loop)."""
        if self.lateness_ns is None or self.woke_ns is None or not len(self.lateness_ns):
            return np.zeros((0, 2), dtype=np.int64)
        late = np.frombuffer(self.lateness_ns, dtype=np.int64)
        woke = np.frombuffer(self.woke_ns, dtype=np.int64)
        if late.size != woke.size:
            raise ValueError("a lag window's ticks and wake-ups differ in number")
        kept = late > int(floor_ms * 1_000_000)
        return np.stack([(woke[kept] - start_ns) // 1000, late[kept] // 1000], axis=1)


class LoopLagMonitor:
    """The ticker of one event loop. Every tick appends one lateness to a log shared by the open
    windows (constant work per tick, however many trials run); a window takes its slice when it
    closes, and the log keeps only what open windows still need. Windows are held weakly: a
    trial that dies without closing its window stops holding the log once it is collected.
    The interval and the trimming point are worked out when a window opens or closes and when
    the log is trimmed, not at every tick (each would walk every open window)."""

    #: the log is trimmed to what open windows need when it grows past this many ticks
    TRIM_TICKS = 6000

    def __init__(self, *, interval_ms: float = TICK_INTERVAL_MS,
                 clock_ns: Callable[[], int] = time.perf_counter_ns):
        self.interval_ms = interval_ms
        self.clock_ns = clock_ns
        self._windows: weakref.WeakSet[LagWindow] = weakref.WeakSet()
        self._log: array.array[int] = array.array("q")
        self._woke: array.array[int] = array.array("q")  # when each tick of _log ran
        self._first = 0  # the absolute tick number of _log[0]
        #: the next tick (a bare timer callback: no task or future per tick)
        self._timer: asyncio.TimerHandle | None = None
        self._intended_ns = 0
        #: the finest interval an open window wants (a collected window's may linger: finer
        #: ticks are only more cautious), and the log's length its last trim kept
        self._interval_ms = interval_ms
        self._kept = 0

    @property
    def ticking(self) -> bool:
        return self._timer is not None

    def open(self, *, interval_ms: float | None = None) -> LagWindow:
        """A trial's window; ``interval_ms``: how often it wants the loop watched (the ticker
        wakes at the finest interval any open window wants)."""
        window = LagWindow(interval_ms or self.interval_ms, self._first + len(self._log))
        self._windows.add(window)
        self._interval_ms = self._finest_interval()
        if self._timer is None:
            self._schedule(asyncio.get_running_loop())
        return window

    def close(self, window: LagWindow) -> LoopLag:
        if window.lateness_ns is None:
            window.lateness_ns = self._log[max(0, window.start - self._first):]
            window.woke_ns = self._woke[max(0, window.start - self._first):]
        self._windows.discard(window)
        if not self._windows:
            self._forget()
        else:
            self._interval_ms = self._finest_interval()
        return window.statistics()

    def _finest_interval(self) -> float:
        # a window that wants a coarser interval gets finer ticks: its bounds, computed with
        # its own interval, are only more cautious
        return min((window.interval_ms for window in self._windows), default=self.interval_ms)

    def _forget(self) -> None:
        self._first += len(self._log)
        self._log = array.array("q")
        self._woke = array.array("q")
        self._interval_ms = self.interval_ms
        self._kept = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self, loop: asyncio.AbstractEventLoop, woke_ns: int | None = None) -> None:
        interval = self._interval_ms
        # due one interval after the wake-up it re-arms from (the stamp bounds rely on it: the
        # tick before a late one woke exactly one interval before it was due), not after a
        # second clock reading that a stall between the two would hide behind
        now = self.clock_ns() if woke_ns is None else woke_ns
        self._intended_ns = now + int(interval * 1_000_000)
        self._timer = loop.call_later(interval / 1000.0, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        # the selector rounds its timeout to the millisecond: a quiet loop reads 0-1 ms
        woke = self.clock_ns()
        self._log.append(max(0, woke - self._intended_ns))
        self._woke.append(woke)
        if not self._windows:  # the last window was dropped without being closed
            self._timer = None
            self._forget()
            return
        if len(self._log) > self._kept + self.TRIM_TICKS:
            oldest = min(window.start for window in self._windows)
            del self._log[:max(0, oldest - self._first)]
            del self._woke[:max(0, oldest - self._first)]
            self._first = max(self._first, oldest)
            # what the open windows still need stays: looked at again once as much is added
            self._kept = len(self._log)
        self._schedule(loop, woke)


_monitors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLagMonitor] = \
    weakref.WeakKeyDictionary()


def loop_monitor() -> LoopLagMonitor:
    """The running loop's monitor (created on first use)."""
    loop = asyncio.get_running_loop()
    monitor = _monitors.get(loop)
    if monitor is None:
        monitor = _monitors[loop] = LoopLagMonitor()
    return monitor
