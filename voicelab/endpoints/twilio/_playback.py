"""A stand-in for the listener's playback when the Twilio adapter runs outside a trial.

In a trial the runner hands every adapter the listener's own clock (``context.playback``), and
marks are echoed when the recording says their audio has played. An adapter used on its own (a
notebook, a wire test) has no listener, so it keeps this simpler one: product audio plays from
its arrival, in arrival order, never faster than real time, and a ``clear`` drops what has not
played yet.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Callable

from ...audio import CANONICAL_SAMPLE_RATE_HZ

#: How often a wait looks again while the audio it waits for has not arrived.
POLL_SECONDS = 0.01


def _duration_ns(samples: int) -> int:
    return samples * 1_000_000_000 // CANONICAL_SAMPLE_RATE_HZ


class ArrivalPlayback:
    """:class:`voicelab.endpoints.Playback` on the adapter's own clock (see the module
    docstring). Positions count canonical samples delivered since the connection opened."""

    def __init__(self, clock_ns: Callable[[], int]):
        self._clock_ns = clock_ns
        self._ends: list[int] = []  # each chunk's end position
        self._end_ns: list[int] = []  # ... and when that end plays
        self._delivered = 0
        self._cursor_ns = 0  # when everything delivered so far has played
        self._cleared_up_to: list[int] = []  # what each clear dropped ended here ...
        self._cleared_ns: list[int] = []  # ... and it stopped then

    def hear(self, samples: int, at_ns: int) -> None:
        """``samples`` more arrived at ``at_ns``."""
        start = max(at_ns, self._cursor_ns)
        self._delivered += samples
        self._cursor_ns = start + _duration_ns(samples)
        self._ends.append(self._delivered)
        self._end_ns.append(self._cursor_ns)

    def clear(self, at_ns: int) -> None:
        """What has not played by ``at_ns`` never will: it counts as played then."""
        self._cleared_up_to.append(self._delivered)
        self._cleared_ns.append(at_ns)
        self._cursor_ns = min(self._cursor_ns, at_ns)

    def played_at_ns(self, samples: int) -> int | None:
        """When the first ``samples`` have played, or a clear dropped them (None: not all of
        them have arrived)."""
        if samples <= 0:
            return 0
        if samples > self._delivered:
            return None
        chunk = bisect_left(self._ends, samples)  # the chunk holding the last of them
        at = self._end_ns[chunk] - _duration_ns(self._ends[chunk] - samples)
        clear = bisect_left(self._cleared_up_to, samples)  # the first clear that reached them
        return min(at, self._cleared_ns[clear]) if clear < len(self._cleared_ns) else at

    async def until_played(self, samples: int) -> None:
        while True:
            at = self.played_at_ns(samples)
            now = self._clock_ns()
            if at is not None and now >= at:
                return
            await asyncio.sleep(POLL_SECONDS if at is None else (at - now) / 1e9)
