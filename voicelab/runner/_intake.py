"""Product event intake: records each normalized endpoint event once, and tracks responses.

The intake task only records (an append to the recording, whose listener places product audio)
and wakes the conversation loop; it never analyzes audio. What the conversation needs to decide
(is the response complete, how much of it has played) is read from the recorded events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ..audio import BYTES_PER_SAMPLE, CANONICAL_FORMAT
from ..endpoints import EndpointEvent
from ..recording import (
    ENDPOINT_EVENT_TYPES,
    AudioFlood,
    Event,
    EventAttributes,
    EventType,
    HeardResponse,
    ProductClosed,
    ProductError,
    ProductInterruption,
    ProductRaw,
    ProductText,
    ProductTurn,
    Recording,
    ReportedAttributes,
    ResponseDone,
    ToolCall,
    ToolResult,
    ns_to_samples,
)

logger = logging.getLogger(__name__)

_RESPONSE_KINDS = {"audio_delta", "transcript_final", "tool_call", "tool_result", "interruption",
                   "turn_complete"}
_OPENING_KINDS = {"audio_delta", "transcript_final", "tool_call"}
#: The kinds whose ``data`` the adapter reported is recorded as it gave it.
_REPORTED: dict[str, type[ReportedAttributes]] = {
    "tool_call": ToolCall, "tool_result": ToolResult, "error": ProductError,
    "closed": ProductClosed, "turn_complete": ResponseDone, "interruption": ProductInterruption}
BYTES_PER_SECOND = CANONICAL_FORMAT.bytes_per_second


@dataclass(frozen=True)
class AudioFloodLimit:
    """How much product audio a trial accepts: at most ``speed`` times faster than the listener's
    clock beyond a ``burst_seconds`` allowance, and at most ``max_total_seconds`` in all."""

    speed: float = 10.0
    burst_seconds: float = 60.0
    max_total_seconds: float | None = None

    def exceeded(self, received_seconds: float, elapsed_seconds: float) -> str | None:
        if self.max_total_seconds is not None and received_seconds > self.max_total_seconds:
            return (f"the product sent {received_seconds:.1f} s of audio, more than the "
                    f"scenario's max_time_seconds ({self.max_total_seconds:g} s) can play")
        if received_seconds > self.speed * elapsed_seconds + self.burst_seconds:
            return (f"the product sent {received_seconds:.1f} s of audio in "
                    f"{elapsed_seconds:.1f} s, faster than {self.speed:g}x real time beyond a "
                    f"{self.burst_seconds:g} s burst")
        return None


class Intake:
    """Consumes ``endpoint.events()`` into the recording and the conversation's live state."""

    def __init__(self, recording: Recording, *, flood_limit: AudioFloodLimit | None = None,
                 listening: bool = False, max_time_ns: int | None = None):
        self.recording = recording
        #: the listener sample where the trial's time limit falls: product audio that would
        #: play past it is cut there (and not recorded)
        self.max_time_sample = ns_to_samples(max_time_ns) if max_time_ns is not None else None
        #: product audio reached the time limit (the rest was dropped, ``overtime_bytes``)
        self.time_limit_reached = False
        self.overtime_bytes = 0
        #: listening turn taking: product output belongs to the turn whose speech ended last
        #: (``period_turn``), not to a response opened and closed by protocol events
        self.listening = listening
        self.period_turn = "turn-000"
        self.flood_limit = flood_limit or AudioFloodLimit()
        self._wake = asyncio.Event()
        #: wake the conversation loop for every audio chunk (only while a barge-in is armed)
        self.watch_audio = False
        self.responses: list[ProductTurn] = []
        self.current: ProductTurn | None = None
        self.pending: list[str] = []  # turn ids whose responses are expected, oldest first
        self.user_turn_id: str | None = None
        self.errors: list[Event] = []
        self.closed: Event | None = None
        self.stream_ended = False
        self.conversation_complete = False
        self.last_event_ns: int | None = None
        self.product_audio_bytes = 0
        #: why product audio stopped being recorded (None while within the flood limit)
        self.flood: str | None = None
        self.flood_dropped_bytes = 0

    # --- response bookkeeping ----------------------------------------------------------------

    def expect_response(self, turn_id: str) -> None:
        self.pending.append(turn_id)

    def _open_response(self) -> ProductTurn:
        if self.pending:
            turn_id = self.pending.pop(0)
        else:
            base = self.user_turn_id or "turn-000"
            same = sum(1 for r in self.responses if r.turn_id.split(".")[0] == base)
            turn_id = base if same == 0 else f"{base}.{same + 1}"
        response = ProductTurn(turn_id, len(self.responses))
        self.responses.append(response)
        self.current = response
        return response

    def _period_response(self) -> ProductTurn:
        current = self.current
        if current is None or current.turn_id != self.period_turn:
            current = ProductTurn(self.period_turn, len(self.responses))
            self.responses.append(current)
            self.current = current
        return current

    def response_for(self, turn_id: str) -> ProductTurn | None:
        for response in reversed(self.responses):
            if response.turn_id == turn_id:
                return response
        return None

    def playback(self, response: ProductTurn) -> HeardResponse | None:
        """How the listener has heard ``response`` so far."""
        return self.recording.timeline.responses.get(response.turn_id)

    def input_transcript(self, turn_id: str) -> str | None:
        """What the product said it heard of user turn ``turn_id``."""
        parts = [ProductText.of(e).text or "" for e in self.recording.events
                 if e.type is EventType.PRODUCT_INPUT_TRANSCRIPT and e.turn_id == turn_id]
        return " ".join(parts) if parts else None

    # --- intake ---------------------------------------------------------------------------------

    def _flooding(self, event: EndpointEvent) -> bool:
        """Count product audio; True when this chunk is beyond the flood limit (not recorded)."""
        size = len(event.audio or b"")
        if self.flood is not None:
            self.flood_dropped_bytes += size
            return True
        received = (self.product_audio_bytes + size) / BYTES_PER_SECOND
        recording = self.recording
        elapsed = max(0, recording.offset_of(event.received_ns) + recording.shift_ns) / 1e9
        problem = self.flood_limit.exceeded(received, elapsed)
        if problem is None:
            self.product_audio_bytes += size
            return False
        self.flood = problem
        self.flood_dropped_bytes = size
        recording.record(EventType.PRODUCT_AUDIO_FLOOD, AudioFlood(
            message=problem, received_audio_seconds=round(received, 3),
            elapsed_seconds=round(elapsed, 3)),
            source="product", direction="inbound", at_ns=event.received_ns)
        logger.warning("audio flood: %s; further product audio is not recorded", problem)
        return True

    def _within_time(self, event: EndpointEvent, audio: bytes) -> bytes:
        """``audio`` up to where it would play past the time limit (all of it, mostly)."""
        if self.time_limit_reached:
            self.overtime_bytes += len(audio)
            return b""
        if self.max_time_sample is None:
            return audio
        recording = self.recording
        listener_ns = event.received_ns - recording.start_ns + recording.shift_ns
        room = self.max_time_sample - recording.timeline.start_sample(listener_ns)
        if len(audio) // BYTES_PER_SAMPLE <= room:
            return audio
        kept = audio[:max(0, room) * BYTES_PER_SAMPLE]
        self.time_limit_reached = True
        self.overtime_bytes = len(audio) - len(kept)
        logger.info("product audio reached the trial's time limit; the rest is not recorded")
        return kept

    def _audio(self, event: EndpointEvent, audio: bytes) -> None:
        """:meth:`handle` of one product audio chunk (hundreds a response): the same event."""
        audio = self._within_time(event, audio)
        if not audio:
            return
        limit, recording = self.flood_limit, self.recording
        received = (self.product_audio_bytes + len(audio)) / BYTES_PER_SECOND
        elapsed = (event.received_ns - recording.start_ns + recording.shift_ns) / 1e9
        total = limit.max_total_seconds
        if self.flood is None and (total is None or received <= total) and \
                received <= limit.speed * elapsed + limit.burst_seconds:
            self.product_audio_bytes += len(audio)  # well within the limit (_flooding, inlined)
        elif self._flooding(event):
            return
        response = self.current
        if self.listening:
            response = self._period_response()
        elif response is None or response.completed:
            response = self._open_response()
        recorded = self.recording.record_product_audio(event.received_ns, response.turn_id,
                                                       audio, event.raw)
        self.last_event_ns = event.received_ns
        response.add(recorded)

    def handle(self, event: EndpointEvent) -> None:
        kind = event.type
        if kind == "audio_delta" and event.audio is not None:
            self._audio(event, event.audio)
            return
        if kind == "audio_delta" and self._flooding(event):
            return
        response = self.current
        idle = response is None or response.completed
        if self.listening:
            if kind in _RESPONSE_KINDS:
                response = self._period_response()
        elif kind in _OPENING_KINDS and idle:
            response = self._open_response()
        elif kind == "turn_complete" and idle:
            # an empty response to an expected turn, or a stray response.done (kept, unattached)
            response = self._open_response() if self.pending else None
        in_response = kind in _RESPONSE_KINDS and response is not None
        turn_id = response.turn_id if in_response and response else None
        attributes: EventAttributes | None = None
        if kind in ("transcript_final", "input_transcript"):
            attributes = ProductText(text=event.text or "")
        elif kind in _REPORTED:
            attributes = _REPORTED[kind].reported(event.data)
        elif kind == "raw":
            raw = event.raw if isinstance(event.raw, dict) else {}
            message_type = raw.get("type") or raw.get("event")
            attributes = ProductRaw.reported({"message_type": message_type})
            logger.debug("unnormalized product message: %s", message_type)
        if kind == "input_transcript":
            turn_id = self.user_turn_id
        recorded = self.recording.record(
            ENDPOINT_EVENT_TYPES[kind], attributes, source="product", direction="inbound",
            at_ns=event.received_ns,
            speaker_role="assistant" if kind in _RESPONSE_KINDS else None, turn_id=turn_id,
            raw=event.raw, audio=event.audio if kind == "audio_delta" else None)
        self.last_event_ns = event.received_ns
        if in_response and response is not None:
            response.add(recorded)  # a turn_complete completes it
        if kind == "conversation_complete":
            self.conversation_complete = True
        elif kind == "error":
            self.errors.append(recorded)
        elif kind == "closed":
            self.closed = recorded

    def _significant(self, event: EndpointEvent) -> bool:
        if event.type != "audio_delta" or self.flood is not None or self.time_limit_reached:
            return True
        response = self.current
        return self.watch_audio or (response is not None and len(response.audio) == 1)

    async def pump(self, events: AsyncIterator[EndpointEvent]) -> None:
        """Record every event from the endpoint until it closes (or the task is cancelled)."""
        try:
            async for event in events:
                self.handle(event)
                if self._significant(event):
                    self._wake.set()
                if event.type == "closed":
                    break
        finally:
            self.stream_ended = True
            self._wake.set()

    @property
    def ended(self) -> bool:
        """The connection is gone (a ``closed`` event, or the event stream ended)."""
        return self.closed is not None or self.stream_ended

    def wake(self) -> None:
        """Wake the conversation loop (something other than an event happened)."""
        self._wake.set()

    async def wait_signal(self, timeout_seconds: float | None) -> bool:
        """Wait for the next significant event; False when ``timeout_seconds`` passed first."""
        self._wake.clear()
        try:
            async with asyncio.timeout(timeout_seconds):
                await self._wake.wait()
            return True
        except TimeoutError:
            return False

    async def wait_for(self, predicate: Callable[[], bool], timeout_seconds: float | None) -> bool:
        """Wait until ``predicate()`` holds; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_seconds is None else loop.time() + timeout_seconds
        while not predicate():
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            if not await self.wait_signal(remaining) and deadline is not None \
                    and loop.time() >= deadline:
                return bool(predicate())
        return True
