"""The user's side of a WebRTC call: the live line as 20 ms Opus packets, paced in real time.

The runner hands over the live line every ``chunk_ms``; the encoder cuts it into 20 ms Opus
packets, and packet ``n`` of the line is due ``n * 20 ms`` after the line started, as on the
phone line: audio handed over on time leaves in real time, audio handed over late (the loop was
busy) leaves at once to catch up, and later than :data:`CATCH_UP_NS` the line is taken to have
paused and is paced from when it resumes. aiortc's sender asks for the next packet
(:meth:`CallerLine.next_packet`) and sends it in the same step, so the stamp taken as a packet
is handed over is its departure. When the line has nothing (before the first chunk, after a
pause of more than :data:`IDLE_NS`), an encoded silence packet keeps the stream going, as a
muted microphone's does. RTP timestamps follow the packets' due times, so a pause is a gap in
time, not a shift of everything after it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import numpy as np
from pydantic import JsonValue

from ._opus import FRAME_MS, RTP_UNITS_PER_FRAME, OpusLineEncoder

FRAME_NS = FRAME_MS * 1_000_000
CATCH_UP_NS = 1_000_000_000
#: with nothing queued this long past a packet's due time, a silence packet goes out
IDLE_NS = 3 * FRAME_NS


class CallerLine:
    """Queues the user's packets and hands each to the sender when due."""

    def __init__(self, *, clock_ns: Callable[[], int]):
        self._clock_ns = clock_ns
        self._encoder = OpusLineEncoder()
        #: (due ns, Opus packet, what waits for its departure stamp)
        self._queue: deque[tuple[int, bytes, asyncio.Future[int | None] | None]] = deque()
        self._queued = asyncio.Event()
        self._next_frame_ns = 0
        self._origin_ns: int | None = None
        self._last_due_ns = 0
        self._last_units = -RTP_UNITS_PER_FRAME
        self._last_was_silence = False
        self.packets_sent = 0
        self.silence_sent = 0
        self.most_late_ms = 0.0
        self.last_sent_ns: int | None = None
        #: audio handed over while the line was behind: its moments are stamped when handed
        #: over, not when they left (see :meth:`queue_audio`)
        self.stamped_at_handover = 0
        self.stopped = False

    def warm_up(self) -> None:
        """Load the encoder's code now rather than in the first frame's time."""
        self._encoder.push(np.zeros(0, dtype=np.int16))

    def queue_audio(self, samples: np.ndarray) -> asyncio.Future[int | None] | None:
        """The next stretch of the line (canonical PCM); a remainder under a frame waits.

        Returns what resolves to the departure stamp of the first packet it completed, when
        the line is on time (nothing else queued, the packet due within a frame): waiting for
        it costs the caller an event-loop iteration. A line that is behind is not waited for
        (it catches up at once, as many packets in one step as are due) and returns None, as
        when no packet was completed; those packets are counted (``stamped_at_handover``).
        Resolved with None when the line stops first."""
        now = self._clock_ns()
        if self._next_frame_ns < now - CATCH_UP_NS:
            self._next_frame_ns = now
        on_time = not self._queue and self._next_frame_ns >= now - FRAME_NS
        first: asyncio.Future[int | None] | None = None
        for packet in self._encoder.push(samples):
            if first is None and on_time:
                first = asyncio.get_running_loop().create_future()
                self._queue.append((self._next_frame_ns, packet, first))
            else:
                self.stamped_at_handover += first is None
                self._queue.append((self._next_frame_ns, packet, None))
            self._next_frame_ns += FRAME_NS
        self._queued.set()
        return first

    def stop(self) -> None:
        self.stopped = True
        for _, _, departure in self._queue:
            if departure is not None and not departure.done():
                departure.set_result(None)
        self._queue.clear()
        self._queued.set()

    async def next_packet(self) -> tuple[bytes, int]:
        """The next packet and its RTP timestamp (48 kHz units from the line's start), when
        due; the departure is stamped as it is returned."""
        while not self._queue and not self.stopped:
            self._queued.clear()
            wait_ns = FRAME_NS if self._last_was_silence else IDLE_NS
            idle_until = max(self._last_due_ns, self._clock_ns()) + wait_ns \
                if self._origin_ns is not None else self._clock_ns()
            try:
                await asyncio.wait_for(self._queued.wait(),
                                       max(0, idle_until - self._clock_ns()) / 1e9)
            except TimeoutError:
                return self._sent(idle_until, self._encoder.silence(), silence=True)
        if self.stopped:
            await asyncio.Event().wait()  # the call is over: the sender is being stopped
        due, packet, departure = self._queue[0]
        delay = due - self._clock_ns()
        if delay > 0:
            await asyncio.sleep(delay / 1e9)
        self._queue.popleft()
        sent = self._sent(due, packet, silence=False)
        if departure is not None and not departure.done():
            departure.set_result(self.last_sent_ns)
        return sent

    def _sent(self, due_ns: int, packet: bytes, *, silence: bool) -> tuple[bytes, int]:
        now = self._clock_ns()
        if self._origin_ns is None:
            self._origin_ns = due_ns
        units = max(self._last_units + RTP_UNITS_PER_FRAME,
                    (due_ns - self._origin_ns) // FRAME_NS * RTP_UNITS_PER_FRAME)
        self._last_units, self._last_due_ns = units, max(due_ns, self._last_due_ns)
        self._last_was_silence = silence
        self.packets_sent += 1
        self.silence_sent += silence
        self.most_late_ms = max(self.most_late_ms, (now - due_ns) / 1e6)
        self.last_sent_ns = now
        return packet, units

    def facts(self) -> dict[str, JsonValue]:
        return {"packets_sent": self.packets_sent, "silence_packets": self.silence_sent,
                "silence_frames_reused": self._encoder.frames_reused,
                "stamped_at_handover": self.stamped_at_handover,
                "most_late_ms": round(self.most_late_ms, 3)}
