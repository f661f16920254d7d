"""One trial's recording: every event in order on one clock, and the audio of both directions.

Recording is cheap on purpose (an object appended to a list, audio appended to a buffer): the
receive path of an endpoint only timestamps, the runner records, and everything written after
the call (placement, transcript, tool calls, metrics, verdicts) is a pure function of the
recording. A bundle keeps enough to rebuild it (:func:`read_recording`).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from ..artifacts import Usage
from ..audio import BYTES_PER_SAMPLE, CANONICAL_SAMPLE_RATE_HZ
from ._attributes import (
    Connected,
    EventAttributes,
    ProductInterruption,
    UsageRecorded,
    UserBargeIn,
    VirtualAdvance,
    check_attributes,
)
from ._events import AUDIO_STREAMS, PRODUCT, USER, Event, EventType
from ._listener import ListenerTimeline
from ._store import PcmStream

#: The clean (unmixed) speech of each user turn, kept beside the two directions for the advisory
#: speech metrics (intelligibility of what was sent compared with what was meant).
USER_CLEAN = "user_clean"
#: What the simulated user heard of the product through an environment's ``to_user`` line
#: (present only when one is configured): the listener timeline, aligned, silence included.
USER_HEARD = "user_heard"
CLEAN_SPEECH = EventType.SPEECH_SYNTHESIZED
_PRODUCT_AUDIO = EventType.PRODUCT_AUDIO


class Recording:
    """Events of one trial, offsets from the trial's start on ``clock_ns`` (monotonic)."""

    def __init__(self, *, session_id: str, trace_id: str, root_span_id: str,
                 clock_ns: Callable[[], int] = time.perf_counter_ns,
                 start_ns: int | None = None, start_utc_ns: int | None = None):
        self.session_id = session_id
        self.trace_id = trace_id
        self.root_span_id = root_span_id
        self.clock_ns = clock_ns
        self.start_ns = clock_ns() if start_ns is None else start_ns
        self.start_utc_ns = time.time_ns() if start_utc_ns is None else start_utc_ns
        self.events: list[Event] = []
        self.streams: dict[str, PcmStream] = {USER: PcmStream(), PRODUCT: PcmStream(),
                                              USER_CLEAN: PcmStream()}
        #: the listener timeline's lead over real time (the sum of recorded virtual advances)
        self.shift_ns = 0
        self.timeline = ListenerTimeline()

    # --- crossing to another process (the scoring process) --------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Events and streams; not the clock (a trial's own, maybe a closure) nor the listener
        (rebuilt from the events by the same code that followed them live). Events go as
        tuples of their fields, made in one pass: pickling calls no Python code per event (it
        runs on the event loop, for thousands of events a call)."""
        state = {name: value for name, value in self.__dict__.items()
                 if name not in ("clock_ns", "timeline", "shift_ns", "events")}
        state["event_fields"] = [
            (e.sequence, e.offset_ns, e.listener_ns, e.type, e.source, e.direction,
             e.speaker_role, e.turn_id, e.span_id, e.attributes, e.audio_start,
             e.audio_samples, e.raw) for e in self.events]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        fields = state.pop("event_fields")
        self.__dict__.update(state)
        self.events = [Event(*values) for values in fields]
        self.clock_ns = time.perf_counter_ns
        self.shift_ns = 0
        self.timeline = ListenerTimeline()
        for event in self.events:
            self._follow(event)

    # --- the clock ------------------------------------------------------------------------

    def now_offset_ns(self) -> int:
        return self.clock_ns() - self.start_ns

    def listener_now_ns(self) -> int:
        return self.now_offset_ns() + self.shift_ns

    def offset_of(self, monotonic_ns: int) -> int:
        return monotonic_ns - self.start_ns

    # --- recording ------------------------------------------------------------------------

    def record(self, event_type: EventType, attributes: EventAttributes | None = None, *,
               source: str, direction: str, at_ns: int | None = None,
               speaker_role: str | None = None, turn_id: str | None = None,
               span_id: str | None = None, raw: object = None,
               audio: bytes | bytearray | memoryview | None = None) -> Event:
        """Append an event with its attributes (the event type's model, see
        :mod:`._attributes`); ``at_ns`` is a monotonic timestamp (default: now). ``audio``
        (whole samples) goes to the event type's stream."""
        check_attributes(event_type, attributes)
        offset = (self.clock_ns() if at_ns is None else at_ns) - self.start_ns
        event = Event(len(self.events), offset, offset + self.shift_ns, event_type, source,
                      direction, speaker_role, turn_id, span_id,
                      attributes.recorded() if attributes is not None else {}, raw=raw)
        if audio is not None:
            stream = USER_CLEAN if event_type is CLEAN_SPEECH else AUDIO_STREAMS[event_type]
            event.audio_start, event.audio_samples = self.streams[stream].append(audio)
        self.events.append(event)
        self._follow(event)
        return event

    def record_product_audio(self, at_ns: int, turn_id: str | None, audio: bytes,
                             raw: object) -> Event:
        """:meth:`record` of one received product chunk (``at_ns`` monotonic), the receive
        path's hot spot (hundreds a response): the same event, placed the same way."""
        offset = at_ns - self.start_ns
        event = Event(len(self.events), offset, offset + self.shift_ns, _PRODUCT_AUDIO,
                      "product", "inbound", "assistant", turn_id, None, {}, raw=raw)
        event.audio_start, event.audio_samples = self.streams[PRODUCT].append(audio)
        self.events.append(event)
        self.timeline.hear(event)
        return event

    def _follow(self, event: Event) -> None:
        kind = event.type
        if kind is EventType.PRODUCT_AUDIO:
            self.timeline.hear(event)
        elif kind is EventType.USER_BARGE_IN:
            barge_in = UserBargeIn.of(event)
            if barge_in.flush:
                self.timeline.barge_in(barge_in.response_turn_id, event.listener_ns)
        elif kind is EventType.PRODUCT_INTERRUPTION and ProductInterruption.of(event).flush:
            # the product drops its own audio still unplayed (a Twilio ``clear``): how much is
            # kept with the event
            dropped = self.timeline.barge_in(event.turn_id, event.listener_ns)
            event.attributes["dropped_ms"] = round(dropped * 1000 / CANONICAL_SAMPLE_RATE_HZ, 3)
        elif kind is EventType.VIRTUAL_ADVANCE:
            self.shift_ns += VirtualAdvance.of(event).advance_ns
        elif kind is EventType.CONNECTED:
            self.timeline.lead_ns = conversion_delay_ns(Connected.of(event), "to_user")

    def record_usage(self, usage: Usage, *, source: str, turn_id: str | None = None) -> Event:
        """A paid call's usage, as it is spent (``usage.recorded``; docs/cost.md)."""
        return self.record(EventType.USAGE_RECORDED, UsageRecorded(usage=usage), source=source,
                           direction="internal", turn_id=turn_id)

    def usage_recorder(self, source: str) -> Callable[[Usage], None]:
        """What a persona or an adapter is handed to record its usage with. It holds the
        recording weakly: an adapter's own reference cycles must not keep a finished trial's
        audio alive until the collector's next full pass (usage after the trial is dropped)."""
        recording = weakref.ref(self)

        def record(usage: Usage) -> None:
            alive = recording()
            if alive is not None:
                alive.record_usage(usage, source=source)

        return record

    def advance(self, advance_ns: int, reason: str) -> None:
        """Move the listener timeline ahead of real time (``pace_audio: false``: the runner
        records the time it would have waited instead of sleeping)."""
        if advance_ns > 0:
            self.record(EventType.VIRTUAL_ADVANCE,
                        VirtualAdvance(advance_ns=int(advance_ns), reason=reason),
                        source="runner", direction="internal")

    # --- reading --------------------------------------------------------------------------

    def of_type(self, *types: EventType) -> Iterator[Event]:
        return (e for e in self.events if e.type in types)

    def audio_of(self, event: Event) -> bytes:
        """The PCM of one audio event."""
        stream = USER_CLEAN if event.type is CLEAN_SPEECH else AUDIO_STREAMS[event.type]
        return self.streams[stream].pcm(event.audio_start, event.audio_samples)

    def turn_audio(self, event_type: EventType, turn_id: str) -> bytes:
        """Every chunk of ``event_type`` (user or product audio) of one turn, joined."""
        stream = self.streams[AUDIO_STREAMS[event_type]]
        return b"".join(stream.pcm(e.audio_start, e.audio_samples) for e in self.events
                        if e.type is event_type and e.turn_id == turn_id)

    @property
    def audio_bytes(self) -> dict[str, int]:
        return {name: s.num_samples * BYTES_PER_SAMPLE for name, s in self.streams.items()}


def conversion_delay_ns(connected: Connected, direction: str) -> int:
    """An adapter's constant conversion delay in one direction, from ``session.connected``'s
    attributes (0 when it declared none)."""
    delays = connected.conversion_delay_ms or {}
    try:
        return max(0, int(float(delays.get(direction) or 0.0) * 1_000_000))
    except (ValueError, OverflowError):  # not a finite number
        return 0
