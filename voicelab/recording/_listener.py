"""The listener clock: when the simulated user hears each sound of the product.

* Positions are whole samples at 24 kHz on the *listener timeline* (an event's ``listener_ns``:
  real time plus the virtual advances recorded before it).
* Product audio plays in arrival order and never faster than real time: a chunk starts at
  ``max(arrival, end of the previous chunk)``; a later arrival than needed, inside one response,
  is a playback stall.
* An adapter's own constant conversion delay toward the user (``session.connected``'s
  ``conversion_delay_ms.to_user``: a resampling filter) is taken out: received audio is placed
  that much earlier, where its sound really arrived.
* A barge-in flushes the listener's buffer: the interrupted response's audio that arrived before
  the barge-in stops at the barge-in point; audio of that response arriving afterwards still
  plays (over the user), so a product that ignores a cancel stays audible.

The recording feeds its :class:`ListenerTimeline` every product chunk and barge-in as they are
recorded, live (the conversation waits for playback and times barge-ins with it) and again when a
recording is read back from a bundle: a pure function of the events in sequence order, so both
give the same placement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..audio import CANONICAL_SAMPLE_RATE_HZ
from ._events import Event

RATE = CANONICAL_SAMPLE_RATE_HZ


def samples_to_ns(count: int) -> int:
    return count * 1_000_000_000 // RATE


def ns_to_samples(ns: int) -> int:
    return ns * RATE // 1_000_000_000


@dataclass(slots=True)
class HeardChunk:
    """A product chunk on the listener timeline: ``heard`` of its samples were heard (fewer
    when a barge-in cut it short), from sample ``start``."""

    event: Event
    start: int
    heard: int
    after_cancel: bool = False

    @property
    def end(self) -> int:
        return self.start + self.heard


@dataclass
class HeardResponse:
    """How one product response sounded to the listener."""

    turn_id: str
    chunks: list[HeardChunk] = field(default_factory=list)
    barge_in_ns: int | None = None
    stall_samples: int = 0

    @property
    def stall_ns(self) -> int:
        return samples_to_ns(self.stall_samples)

    @property
    def start_ns(self) -> int | None:
        return samples_to_ns(self.chunks[0].start) if self.chunks else None

    @property
    def end_ns(self) -> int | None:
        ends = [c.end for c in self.chunks if c.heard and not c.after_cancel]
        return samples_to_ns(max(ends)) if ends else None

    def played_until_ns(self, threshold_ns: int) -> int | None:
        """Listener time when ``threshold_ns`` of this response has played (None: not yet)."""
        wanted = ns_to_samples(threshold_ns)
        played = 0
        for chunk in self.chunks:
            if chunk.after_cancel:
                continue
            if played + chunk.heard >= wanted:
                return samples_to_ns(chunk.start + wanted - played)
            played += chunk.heard
        return None


class ListenerTimeline:
    """Places product audio on the listener timeline as it arrives (see the module docstring)."""

    def __init__(self) -> None:
        self.cursor = 0  # sample where the next product sound can start
        self.responses: dict[str, HeardResponse] = {}
        #: every chunk in the order placed (which is the order of their start samples)
        self.heard: list[HeardChunk] = []
        self._cancelled: set[str] = set()
        #: the adapter's conversion delay toward the user, taken out of every placement
        self.lead_ns = 0

    @property
    def cursor_ns(self) -> int:
        """When the listener will have heard everything received so far."""
        return samples_to_ns(self.cursor)

    def start_sample(self, listener_ns: int) -> int:
        """Where product audio received at listener time ``listener_ns`` starts to play."""
        return max(ns_to_samples(listener_ns - self.lead_ns), self.cursor)

    def hear(self, event: Event) -> HeardChunk:
        """Place one ``product.audio_chunk`` event."""
        turn = event.turn_id or "turn-?"
        playback = self.responses.get(turn)
        if playback is None:
            playback = self.responses[turn] = HeardResponse(turn)
        start = self.start_sample(event.listener_ns)
        after_cancel = turn in self._cancelled
        if playback.chunks and not after_cancel and playback.barge_in_ns is None:
            gap = start - playback.chunks[-1].end
            if gap > 0:
                playback.stall_samples += gap
        chunk = HeardChunk(event, start, event.audio_samples, after_cancel)
        playback.chunks.append(chunk)
        self.heard.append(chunk)
        self.cursor = start + event.audio_samples
        return chunk

    def barge_in(self, turn_id: str | None, at_ns: int) -> int:
        """At listener time ``at_ns`` what was not yet heard of ``turn_id`` is dropped from the
        buffer (the user barged in, or the product cleared its own audio); returns how many
        samples were dropped."""
        at = ns_to_samples(at_ns)
        dropped = 0
        playback = self.responses.get(turn_id) if turn_id else None
        if playback is not None:
            playback.barge_in_ns = at_ns
            for chunk in playback.chunks:
                before = chunk.heard
                if chunk.start >= at:
                    chunk.heard = 0
                elif chunk.end > at:
                    chunk.heard = at - chunk.start
                dropped += before - chunk.heard
            self._cancelled.add(playback.turn_id)
        self.cursor = min(self.cursor, at)
        return dropped
