"""The user's side of a Twilio media stream: line audio as 20 ms ``media`` messages, paced the
way Twilio sends them, and key presses in their place among them.

The runner hands over the live line every ``chunk_ms``; Twilio sends one 20 ms frame every
20 ms. Frame ``n`` of the line is due ``n * 20 ms`` after the line started, so audio handed over
on time goes out in real time whatever ``chunk_ms`` is, and audio handed over late (the loop was
busy) goes out at once to catch up. Later than :data:`CATCH_UP_NS`, the line is taken to have
paused, and frames are paced from the moment it resumes. Nothing here sleeps in the caller's
call: a task sends what is queued when it is due.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

import numpy as np

from .._g711_line import FRAME_MS, LineEncoder
from ._wire import CallerStream

FRAME_NS = FRAME_MS * 1_000_000
#: Line audio handed over this late is sent at once to catch up; later than this, the line is
#: taken to have paused and its frames are paced from the moment it resumes.
CATCH_UP_NS = 1_000_000_000


class CallerLine:
    """Queues the user's frames and digits and sends each when due, in order.

    ``send`` sends one message and returns False once the connection is gone; the line is then
    :attr:`broken` and drops what it still holds. Messages are numbered (``stream``) when they
    leave, so sequence numbers follow the order on the wire.
    """

    def __init__(self, stream: CallerStream, send: Callable[[str], Awaitable[bool]], *,
                 clock_ns: Callable[[], int]):
        self._stream = stream
        self._send = send
        self._clock_ns = clock_ns
        self._encoder = LineEncoder()
        #: (due ns, a frame of mu-law bytes or a digit)
        self._queue: deque[tuple[int, bytes | str]] = deque()
        self._next_frame_ns = 0
        self._task: asyncio.Task[None] | None = None
        self.broken = False

    def warm_up(self) -> None:
        """Load the filter's code now rather than in the first frame's time."""
        self._encoder.push(np.zeros(0, dtype=np.int16))

    def queue_audio(self, samples: np.ndarray) -> None:
        """The next stretch of the line (canonical PCM); a remainder under a frame waits."""
        now = self._clock_ns()
        frames = self._encoder.push(samples)
        if self._next_frame_ns < now - CATCH_UP_NS:  # the line starts, or resumes after a pause
            self._next_frame_ns = now
        for frame in frames:
            self._queue.append((self._next_frame_ns, frame))
            self._next_frame_ns += FRAME_NS
        self._start()

    def queue_digits(self, digits: str) -> None:
        """One ``dtmf`` message a digit, right after the frames already queued."""
        now = self._clock_ns()
        self._queue.extend((now, digit) for digit in digits)
        self._start()

    def stop(self) -> None:
        """The call is over: what is still queued is never sent."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._queue.clear()

    def _start(self) -> None:
        if self._queue and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._run(), name="voicelab-twilio-line")

    async def _run(self) -> None:
        while self._queue:
            due, item = self._queue[0]
            delay = due - self._clock_ns()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            self._queue.popleft()
            message = self._stream.media(item) if isinstance(item, bytes) \
                else self._stream.dtmf(item)
            if not await self._send(message):
                self.broken = True
                self._queue.clear()
                return
