"""The product's responses as recorded: its events grouped by the turn they answer.

One view serves everything that reads responses: the intake builds it live (each product event
added to its response as it is recorded), and the documents and metrics build it again from the
events (:meth:`ProductTurns.follow`, one event at a time, or :meth:`ProductTurns.of`). A
response is known by its turn id (``turn-001``: the response to the user's first turn;
``turn-000``: an opening).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..audio import CANONICAL_SAMPLE_RATE_HZ
from ._attributes import ProductText, ResponseDone, UserBargeIn
from ._events import Event, EventType
from ._recording import Recording


@dataclass(eq=False)
class ProductTurn:
    """One product response: its events in the order they were recorded."""

    turn_id: str
    #: its position among the responses (in the order each was first seen)
    index: int
    #: the response's own events (audio, transcripts, tool calls and results, interruptions,
    #: response.done)
    events: list[Event] = field(default_factory=list)
    audio: list[Event] = field(default_factory=list)
    #: its response.done events (a product may say more than once that it is done)
    done: list[Event] = field(default_factory=list)
    #: its transcript, as the product sent it (one part per transcript event)
    transcript_parts: list[str] = field(default_factory=list)
    tool_calls: int = 0
    #: the user turn that barged in on it (the first one)
    barged_in_by: str | None = None
    #: what the product said it heard of the user's turn of the same id
    heard: list[str] = field(default_factory=list)

    def add(self, event: Event) -> None:
        """The response's next event."""
        self.events.append(event)
        kind = event.type
        if kind is EventType.PRODUCT_AUDIO:
            self.audio.append(event)
        elif kind is EventType.PRODUCT_RESPONSE_DONE:
            self.done.append(event)
        elif kind is EventType.PRODUCT_TRANSCRIPT:
            self.transcript_parts.append(ProductText.of(event).text or "")
        elif kind is EventType.PRODUCT_TOOL_CALL:
            self.tool_calls += 1

    @property
    def answered(self) -> bool:
        """The product responded (not only heard the user's turn of this id)."""
        return bool(self.events)

    @property
    def completed(self) -> bool:
        return bool(self.done)

    @property
    def opened_ns(self) -> int | None:
        return self.events[0].offset_ns if self.events else None

    @property
    def first_audio_ns(self) -> int | None:
        return self.audio[0].offset_ns if self.audio else None

    @property
    def done_ns(self) -> int | None:
        return self.done[0].offset_ns if self.done else None

    @property
    def status(self) -> str | None:
        """What its first response.done said (None: not done)."""
        return _status(self.done[0]) if self.done else None

    @property
    def latest_status(self) -> str | None:
        """What its latest response.done said (None: not done)."""
        return _status(self.done[-1]) if self.done else None

    @property
    def transcript(self) -> str:
        """Its transcript parts joined as received."""
        return " ".join(self.transcript_parts).strip()

    @property
    def audio_samples(self) -> int:
        return sum(e.audio_samples for e in self.audio)

    @property
    def audio_seconds(self) -> float:
        return self.audio_samples / CANONICAL_SAMPLE_RATE_HZ

    def of_type(self, event_type: EventType) -> list[Event]:
        return [e for e in self.events if e.type is event_type]


def _status(done: Event) -> str:
    status = ResponseDone.of(done).status
    return "completed" if status is None else str(status)


class ProductTurns:
    """Every response of a recording by turn id, in the order each was first seen, built by
    following the events in order: a product event of a response is added to it; a turn the
    product only heard (an input transcript) or a response a barge-in named gets an entry
    too (with no events of its own until the product answers)."""

    def __init__(self) -> None:
        self.by_turn: dict[str, ProductTurn] = {}

    @classmethod
    def of(cls, recording: Recording) -> ProductTurns:
        turns = cls()
        for event in recording.events:
            turns.follow(event)
        return turns

    def turn(self, turn_id: str) -> ProductTurn:
        found = self.by_turn.get(turn_id)
        if found is None:
            found = self.by_turn[turn_id] = ProductTurn(turn_id, len(self.by_turn))
        return found

    def follow(self, event: Event) -> None:
        """Take the recording's next event into account."""
        kind, turn = event.type, event.turn_id
        if turn is None:
            return
        if kind is EventType.USER_BARGE_IN:
            target = UserBargeIn.of(event).response_turn_id
            if target:
                response = self.turn(target)
                if response.barged_in_by is None:
                    response.barged_in_by = turn
        elif kind is EventType.PRODUCT_INPUT_TRANSCRIPT:
            self.turn(turn).heard.append(ProductText.of(event).text or "")
        elif event.source == "product" and event.speaker_role == "assistant":
            self.turn(turn).add(event)

    @property
    def responses(self) -> list[ProductTurn]:
        """The responses the product gave (not the turns it only heard), in order."""
        return [turn for turn in self.by_turn.values() if turn.answered]

    def __iter__(self) -> Iterator[ProductTurn]:
        return iter(self.by_turn.values())
