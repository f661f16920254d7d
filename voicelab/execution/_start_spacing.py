"""Trials on one event loop start a little apart.

Opening a conversation (connect, handshake, init) is the loop's busiest moment; trials that all
start at once delay the arrival timestamps of the first greetings of those already talking
(``benchmarks/bench_start_spacing.py``).
"""

from __future__ import annotations

import asyncio
import weakref

#: Trials on one event loop start at least this far apart.
START_SPACING_SECONDS = 0.005
_next_start: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, float] = \
    weakref.WeakKeyDictionary()


async def start_slot() -> None:
    """Wait for this trial's start slot (shared by every run on the loop, e.g. a sweep's)."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    at = max(now, _next_start.get(loop, now))
    _next_start[loop] = at + START_SPACING_SECONDS
    if at > now:
        await asyncio.sleep(at - now)
