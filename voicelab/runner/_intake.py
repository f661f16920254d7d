"""Product event intake: records each normalized endpoint event and tracks product responses.

The intake task only records (a timeline append and a little bookkeeping) and wakes the
conversation loop; it never analyzes audio.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..endpoints import EndpointEvent
from ._timeline import Timeline, pcm_metadata

logger = logging.getLogger(__name__)

_EVENT_NAMES = {
    "audio_delta": "product.audio_chunk",
    "transcript_final": "product.transcript",
    "input_transcript": "product.input_transcript",
    "tool_call": "product.tool_call",
    "tool_result": "product.tool_result",
    "interruption": "product.interruption",
    "turn_complete": "product.response_done",
    "conversation_complete": "product.conversation_completed",
    "error": "product.error",
    "closed": "product.closed",
    "raw": "product.raw",
}
_RESPONSE_EVENTS = {"audio_delta", "transcript_final", "tool_call", "tool_result", "interruption",
                    "turn_complete"}
_OPENING_EVENTS = {"audio_delta", "transcript_final", "tool_call"}


@dataclass
class ProductResponseState:
    """What the evaluator has received of one product response so far."""

    turn_id: str
    index: int
    opened_ns: int
    chunks: list[tuple[int, int, bytes]] = field(default_factory=list)  # (ns, sequence, pcm)
    transcript_parts: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    status: str | None = None
    completed_ns: int | None = None
    barged_in: bool = False
    # listener model: (start on the listener timeline, duration) of each chunk, in ns
    playback: list[tuple[int, int]] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        return self.completed_ns is not None

    @property
    def transcript(self) -> str:
        return " ".join(p for p in self.transcript_parts if p).strip()

    audio_bytes: int = 0

    @property
    def audio_seconds(self) -> float:
        return self.audio_bytes / 2 / 24_000

    def played_until_ns(self, threshold_ns: int) -> int | None:
        """Listener-timeline moment when ``threshold_ns`` of this response has played."""
        played = 0
        for start, duration in self.playback:
            if played + duration >= threshold_ns:
                return start + (threshold_ns - played)
            played += duration
        return None


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
    """Consumes ``endpoint.events()`` into the timeline and the conversation state."""

    def __init__(self, timeline: Timeline, *, flood_limit: AudioFloodLimit | None = None):
        self.timeline = timeline
        self.flood_limit = flood_limit or AudioFloodLimit()
        self.product_audio_bytes = 0
        #: why product audio stopped being recorded (None while within the flood limit)
        self.flood: str | None = None
        self.flood_dropped_bytes = 0
        self._wake = asyncio.Event()
        #: wake the conversation loop for every audio chunk (only while a barge-in is armed)
        self.watch_audio = False
        self.responses: list[ProductResponseState] = []
        self.current: ProductResponseState | None = None
        self.pending: list[str] = []  # turn ids whose responses are expected, oldest first
        self.user_turn_id: str | None = None
        self.raw_events: list[tuple[int, int, str, Any]] = []  # (sequence, offset, type, raw)
        self.product_chunks: dict[int, bytes] = {}
        self.input_transcripts: dict[str, list[str]] = {}
        self.tool_calls: list[dict[str, Any]] = []
        self.tool_results: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.conversation_complete = False
        self.closed: dict[str, Any] | None = None
        self.listener_cursor_ns = 0
        self.last_event_ns: int | None = None

    # --- response bookkeeping ----------------------------------------------------------------

    def expect_response(self, turn_id: str) -> None:
        self.pending.append(turn_id)

    def _open_response(self, at_ns: int) -> ProductResponseState:
        if self.pending:
            turn_id = self.pending.pop(0)
        else:
            base = self.user_turn_id or "turn-000"
            same = sum(1 for r in self.responses if r.turn_id.split(".")[0] == base)
            turn_id = base if same == 0 else f"{base}.{same + 1}"
        response = ProductResponseState(turn_id, len(self.responses), at_ns)
        self.responses.append(response)
        self.current = response
        return response

    def flush_listener(self, at_virtual_ns: int) -> None:
        """A barge-in: the listener stops hearing buffered product audio at ``at_virtual_ns``."""
        self.listener_cursor_ns = min(self.listener_cursor_ns, at_virtual_ns)

    # --- intake ---------------------------------------------------------------------------------

    def _flooding(self, event: EndpointEvent) -> bool:
        """Count product audio; True when this chunk is beyond the flood limit (not recorded)."""
        size = len(event.audio or b"")
        if self.flood is not None:
            self.flood_dropped_bytes += size
            return True
        received = (self.product_audio_bytes + size) / 48_000
        offset = self.timeline.offset_of(event.received_ns)
        elapsed = max(0, offset + self.timeline.shift_ns) / 1e9
        problem = self.flood_limit.exceeded(received, elapsed)
        if problem is None:
            self.product_audio_bytes += size
            return False
        self.flood = problem
        self.flood_dropped_bytes = size
        self.timeline.record("product.audio_flood", source="product", direction="inbound",
                             at_ns=event.received_ns, message=problem,
                             received_audio_seconds=round(received, 3),
                             elapsed_seconds=round(elapsed, 3))
        logger.warning("audio flood: %s; further product audio is not recorded", problem)
        return True

    def handle(self, event: EndpointEvent) -> None:
        kind = event.type
        if kind == "audio_delta" and self._flooding(event):
            return
        name = _EVENT_NAMES.get(kind, "product.raw")
        response = self.current
        idle = response is None or response.completed
        if kind in _OPENING_EVENTS and idle:
            response = self._open_response(event.received_ns)
        elif kind == "turn_complete" and idle:
            # an empty response to an expected turn, or a stray response.done (kept, unattached)
            response = self._open_response(event.received_ns) if self.pending else None
        turn_id = response.turn_id if (kind in _RESPONSE_EVENTS and response) else None
        attributes: dict[str, Any] = {}
        pcm = None
        if kind == "audio_delta":
            audio = event.audio or b""
            pcm = pcm_metadata(len(audio))
        elif kind in ("transcript_final", "input_transcript"):
            attributes["text"] = event.text or ""
        elif kind in ("tool_call", "tool_result", "error", "closed", "turn_complete"):
            attributes.update(event.data)
        elif kind == "raw":
            raw = event.raw if isinstance(event.raw, dict) else {}
            attributes["message_type"] = raw.get("type")
        if kind == "input_transcript":
            turn_id = self.user_turn_id
        recorded = self.timeline.record(
            name, source="product", direction="inbound", at_ns=event.received_ns,
            speaker_role="assistant" if kind in _RESPONSE_EVENTS else None, turn_id=turn_id,
            pcm=pcm, **attributes)
        offset = recorded.offset_ns
        self.last_event_ns = event.received_ns
        self.raw_events.append((recorded.sequence, offset, kind, event.raw))

        if kind == "audio_delta" and response is not None:
            audio = event.audio or b""
            self.product_chunks[recorded.sequence] = audio
            response.chunks.append((event.received_ns, recorded.sequence, audio))
            response.audio_bytes += len(audio)
            arrival_virtual = offset + self.timeline.shift_ns
            start = max(arrival_virtual, self.listener_cursor_ns)
            duration = len(audio) * 1_000_000_000 // (2 * 24_000)
            if not response.barged_in:
                response.playback.append((start, duration))
            self.listener_cursor_ns = start + duration
        elif kind == "transcript_final" and response is not None:
            response.transcript_parts.append(event.text or "")
        elif kind == "tool_call":
            call = {**event.data, "turn_id": turn_id, "offset_ns": offset}
            self.tool_calls.append(call)
            if response is not None:
                response.tool_calls.append(call)
        elif kind == "tool_result":
            result = {**event.data, "turn_id": turn_id, "offset_ns": offset}
            self.tool_results.append(result)
            if response is not None:
                response.tool_results.append(result)
        elif kind == "input_transcript" and self.user_turn_id:
            self.input_transcripts.setdefault(self.user_turn_id, []).append(event.text or "")
        elif kind == "turn_complete" and response is not None:
            response.status = str(event.data.get("status", "completed"))
            response.completed_ns = event.received_ns
        elif kind == "conversation_complete":
            self.conversation_complete = True
        elif kind == "error":
            self.errors.append({"code": event.data.get("code"),
                                "message": event.data.get("message") or event.text,
                                "origin": event.data.get("origin", "product"),
                                "offset_ns": offset})
        elif kind == "closed":
            self.closed = {"reason": event.data.get("reason"), "code": event.data.get("code"),
                           "offset_ns": offset}
        elif kind == "raw":
            logger.debug("unnormalized product message: %s", attributes.get("message_type"))

    def _significant(self, event: EndpointEvent) -> bool:
        if event.type != "audio_delta" or self.flood is not None:
            return True
        response = self.current
        return self.watch_audio or (response is not None and len(response.chunks) == 1)

    async def pump(self, events: Any) -> None:
        """Record every event from the endpoint until it closes (or the task is cancelled)."""
        try:
            async for event in events:
                self.handle(event)
                if self._significant(event):
                    self._wake.set()
                if event.type == "closed":
                    break
        finally:
            if self.closed is None:
                self.closed = {"reason": "event stream ended", "code": None,
                               "offset_ns": self.timeline.now_offset_ns()}
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

    async def wait_for(self, predicate: Any, timeout_seconds: float | None) -> bool:
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
