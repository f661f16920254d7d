"""The attributes of each event type, as typed models.

An event's attributes are recorded from one of these models (checked when recorded: the model
must be the event type's) and read back through it (``TrialEnded.of(event).exit_reason``), so
no reader looks a value up by a string key. What is kept on an :class:`Event` and written to
voice-events.jsonl is the model's fields as they were given, in the order the model declares
them (a field left out is not written), then any further attributes.

Two kinds of models:

* what the evaluator itself records is validated strictly, when recorded and when a bundle is
  read back (a bundle is hostile input: a value of the wrong type is refused, naming the line);
* what a product reported (a tool call, an error, a response's status: an adapter's ``data``)
  is kept exactly as the adapter gave it: the model types what readers use of it, and a value
  it cannot type is read as it was sent (readers turn it into text where they show it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, cast

from pydantic import BaseModel, ConfigDict, JsonValue, PrivateAttr, ValidationError

from ..artifacts import ExecutionFailure, Usage
from ._events import Event, EventType

#: A number as recorded: kept as it was given (an int is not turned into a float).
Number = int | float


class EventAttributes(BaseModel):
    """The attributes of an event type (see the module docstring)."""

    model_config = ConfigDict(extra="allow", strict=True)

    def recorded(self) -> dict[str, object]:
        """The attributes as kept on the event: the fields given, then the extra ones."""
        return self.model_dump(exclude_unset=True)

    @classmethod
    def of(cls, event: Event) -> Self:
        """``event``'s attributes as this model (the event's type must be one of its types)."""
        if ATTRIBUTES.get(event.type) is not cls:
            raise TypeError(f"{event.type.value} events are not described by {cls.__name__}")
        return cls.model_validate(event.attributes)

    @classmethod
    def check(cls, attributes: Mapping[str, object]) -> str | None:
        """Why ``attributes`` (read from a bundle) do not fit this model (None: they do)."""
        try:
            cls.model_validate(attributes)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "attributes"
            return f"{where}: {first['msg']}"
        return None


class NoAttributes(EventAttributes):
    """An event that says everything with its type, turn and time."""


class ReportedAttributes(EventAttributes):
    """What a product reported, through its adapter (see the module docstring)."""

    model_config = ConfigDict(extra="allow", strict=False)
    _as_sent: dict[str, object] | None = PrivateAttr(default=None)

    @classmethod
    def reported(cls, data: Mapping[str, object]) -> Self:
        """The adapter's ``data`` as it gave it (recorded unchanged)."""
        values: dict[str, Any] = dict(data)
        attributes = cast(Self, cls.model_construct(**values))
        attributes._as_sent = dict(data)
        return attributes

    def recorded(self) -> dict[str, object]:
        return dict(self._as_sent) if self._as_sent is not None else super().recorded()

    @classmethod
    def of(cls, event: Event) -> Self:
        try:
            return super().of(event)
        except ValidationError:  # a product's value of another type: read as it was sent
            values: dict[str, Any] = dict(event.attributes)
            return cast(Self, cls.model_construct(**values))

    @classmethod
    def check(cls, attributes: Mapping[str, object]) -> str | None:
        return None  # the product's own words: never refused


# --- the trial --------------------------------------------------------------------------------

class TrialStarted(EventAttributes):
    trial: int | None = None
    seed: int | None = None
    #: the trial clock's zero (``time.perf_counter_ns``)
    clock_start_ns: int | None = None
    clock: str | None = None
    turn_taking: str | None = None
    #: the run's ``listener`` settings (jitter buffer, reply end hangover)
    listener: dict[str, JsonValue] | None = None
    #: the adapter's declared capabilities
    capabilities: dict[str, bool] | None = None


class TrialEnded(EventAttributes):
    """How the call ended (recorded once the conversation and its cleanup are over)."""

    exit_reason: str | None = None
    #: the event loop's lag during the call (a ``LoopLag``) and its late ticks
    loop_lag: dict[str, JsonValue] | None = None
    late_ticks: JsonValue = None
    #: the call's execution failures (none: it executed); absent in bundles before 3.0,
    #: whose trial report keeps them
    failures: list[ExecutionFailure] | None = None
    #: the user turns spoken and the product responses received
    user_turns: int | None = None
    product_responses: int | None = None

    @classmethod
    def ending(cls, *, late_ticks: JsonValue, **fields: Any) -> Self:
        """The attributes a runner records: ``late_ticks`` kept as built (JSON already, and a
        pair per tick of a saturated loop, which validating and copying would make the loop pay
        for at each trial's end), the rest validated. A bundle's are validated when read."""
        ended = cls(**fields)
        ended.late_ticks = late_ticks
        return ended

    def recorded(self) -> dict[str, object]:
        if "late_ticks" not in self.model_fields_set:
            return super().recorded()
        dumped = self.model_dump(exclude_unset=True, exclude={"late_ticks"})
        kept: dict[str, object] = {}
        for name in type(self).model_fields:  # the fields' order, as model_dump keeps it
            if name == "late_ticks":
                kept[name] = self.late_ticks
            elif name in dumped:
                kept[name] = dumped.pop(name)
        kept.update(dumped)  # the extra ones
        return kept


class OutcomeProbed(EventAttributes):
    """What the outcome probe answered after the call."""

    probe: str | None = None
    status: str | None = None
    error: str | None = None
    #: the product's persisted outcome (secrets scrubbed); absent in bundles before 3.0,
    #: whose trial report keeps it
    outcome: dict[str, JsonValue] | None = None


class PersonaEnded(EventAttributes):
    exit_reason: str | None = None
    message: str | None = None


class Connected(EventAttributes):
    #: the response the connection expects (``turn-000``: an opening), timed from here
    expects_response: str | None = None
    turn_detection: str | None = None
    #: the adapter's constant conversion delays, ms: ``{"to_product": .., "to_user": ..}``
    conversion_delay_ms: dict[str, Number] | None = None
    #: ``kernel``: the product's audio is stamped with the kernel's receive time (SIP's RTP),
    #: so the evaluator's loop lag does not make those stamps late (absent: stamped when read)
    arrival_stamps: str | None = None
    #: how long the call took to set up on its wire, ms (a SIP call: INVITE to 200 OK)
    call_setup_ms: Number | None = None


class VirtualAdvance(EventAttributes):
    """The listener timeline moved ahead of real time (``pace_audio: false``)."""

    advance_ns: int
    reason: str | None = None


# --- the user's side --------------------------------------------------------------------------

class SpeechSynthesized(EventAttributes):
    """A user turn's clean speech (further attributes: the provider's account of it)."""

    text: str | None = None
    duration_ms: Number | None = None
    provider: str | None = None
    #: what the provider applied to this turn (voice, rate, pitch), when it says
    rendering: dict[str, JsonValue] | None = None


class EnvironmentMixed(EventAttributes):
    """The environment mixed into a user turn (further attributes: the mixer's figures)."""

    speech_to_noise_db: Number | None = None


class UserTurnStarted(EventAttributes):
    """A user turn about to be spoken (further attributes: the script turn's metadata)."""

    text: str | None = None
    source_kind: str | None = None
    barge_in_of: str | None = None
    dtmf: str | None = None
    #: where the speech starts and ends in the turn's audio (samples)
    speech_start_sample: int | None = None
    speech_end_sample: int | None = None
    kind: str | None = None
    #: the persona's disfluencies in this turn: the script's own text and what was applied
    disfluency: dict[str, JsonValue] | None = None
    #: a hesitation turn's pauses in the turn's audio: [first silent sample, first sample of
    #: the next piece of speech] each (the same samples as ``speech_start_sample``)
    pauses: list[list[int]] | None = None


class UserAudio(EventAttributes):
    """A chunk of the user's audio sent (``line``: on a live line; ``lost``: a telephony
    line's packet lost or late, its concealment sent)."""

    line: bool | None = None
    chunk_index: int | None = None
    lost: bool | None = None


class ExpectsResponse(EventAttributes):
    """The user's turn is over (committed, or its speech ended on the line): the response it
    expects is timed from here."""

    expects_response: str | None = None


class UserDtmf(EventAttributes):
    digits: str | None = None


class UserBargeIn(EventAttributes):
    response_turn_id: str | None = None
    cancel_sent: bool | None = None
    #: the listener drops what it had buffered of the response (a client that cancels); on a
    #: line the user keeps hearing whatever the product still sends
    flush: bool = True
    after_product_audio_ms: Number | None = None
    kind: str | None = None
    heard_speech_onset_ms: Number | None = None


class ProbeMarked(EventAttributes):
    """A selectivity probe's first (or last) audible sample on the line (further attributes:
    the probe's own)."""

    frame_lead_ms: Number | None = None
    probe_id: str | None = None
    kind: str | None = None
    response_turn_id: str | None = None
    label: str | None = None
    #: a noise probe: which of the environment's, and its volume
    noise_probe_index: int | None = None
    volume: Number | None = None
    after_product_speech_ms: Number | None = None


class ProbeSkipped(EventAttributes):
    probe_id: str | None = None
    kind: str | None = None
    response_turn_id: str | None = None
    label: str | None = None
    noise_probe_index: int | None = None
    after_product_speech_ms: Number | None = None
    reason: str | None = None


class EnvironmentEcho(EventAttributes):
    """The speakerphone echo path of the call."""

    delay_ms: Number | None = None
    echo_return_loss_db: Number | None = None
    rt60_ms: Number | None = None
    lowpass_hz: Number | None = None
    rir_seed: int | None = None
    rir_samples: int | None = None
    frame_ms: Number | None = None


class ChannelPackets(EventAttributes):
    """A telephony line's packets, per turn (recorded at the end of the call)."""

    line: str | None = None
    codec: str | None = None
    packet_ms: Number | None = None
    base_delay_ms: Number | None = None
    configured_loss_rate: Number | None = None
    turns: list[dict[str, JsonValue]] | None = None
    total: dict[str, JsonValue] | None = None


# --- the product's side -----------------------------------------------------------------------

class ProductText(EventAttributes):
    """What the product said (a transcript) or heard the user say (an input transcript)."""

    text: str | None = None


class ProductRaw(ReportedAttributes):
    """A product message its adapter did not normalize: its ``type`` (or ``event``)."""

    message_type: JsonValue = None


class ToolCall(ReportedAttributes):
    call_id: JsonValue = None
    name: JsonValue = None
    arguments: JsonValue = None
    arguments_json: JsonValue = None


class ToolResult(ReportedAttributes):
    call_id: JsonValue = None
    output: JsonValue = None


class ResponseDone(ReportedAttributes):
    #: ``completed``, ``cancelled``...
    status: JsonValue = None


class ProductInterruption(ReportedAttributes):
    #: the product also drops its audio still unplayed (a Twilio ``clear``)
    flush: JsonValue = None
    #: how much of its audio that dropped (the recording computes it)
    dropped_ms: JsonValue = None


class ProductError(ReportedAttributes):
    code: JsonValue = None
    message: JsonValue = None
    #: ``adapter``: the adapter's own report (a closed connection), not the product's
    origin: JsonValue = None


class ProductClosed(ReportedAttributes):
    reason: JsonValue = None
    code: JsonValue = None


class ConversationCompleted(ReportedAttributes):
    pass


class AudioFlood(EventAttributes):
    """Product audio beyond the flood limit: from here it is not recorded."""

    message: str | None = None
    received_audio_seconds: Number | None = None
    elapsed_seconds: Number | None = None


class UsageRecorded(EventAttributes):
    """What a paid call used (a persona's model turn, a synthesis, a product response's
    tokens), recorded where it was spent: cost is derived from it (docs/cost.md)."""

    usage: Usage


#: The model of each event type's attributes.
ATTRIBUTES: dict[EventType, type[EventAttributes]] = {
    EventType.TRIAL_STARTED: TrialStarted,
    EventType.TRIAL_ENDED: TrialEnded,
    EventType.CONNECT_STARTED: NoAttributes,
    EventType.CONNECTED: Connected,
    EventType.CLOSED_BY_EVALUATOR: NoAttributes,
    EventType.SPEECH_SYNTHESIZED: SpeechSynthesized,
    EventType.ENVIRONMENT_MIXED: EnvironmentMixed,
    EventType.USER_TURN_STARTED: UserTurnStarted,
    EventType.USER_AUDIO: UserAudio,
    EventType.USER_TURN_COMMITTED: ExpectsResponse,
    EventType.USER_SPEECH_STARTED: NoAttributes,
    EventType.USER_SPEECH_ENDED: ExpectsResponse,
    EventType.USER_BARGE_IN: UserBargeIn,
    EventType.USER_DTMF: UserDtmf,
    EventType.PROBE_STARTED: ProbeMarked,
    EventType.PROBE_ENDED: ProbeMarked,
    EventType.PROBE_SKIPPED: ProbeSkipped,
    EventType.ENVIRONMENT_ECHO: EnvironmentEcho,
    EventType.PERSONA_ENDED: PersonaEnded,
    EventType.PRODUCT_AUDIO: NoAttributes,
    EventType.PRODUCT_TRANSCRIPT: ProductText,
    EventType.PRODUCT_INPUT_TRANSCRIPT: ProductText,
    EventType.PRODUCT_TOOL_CALL: ToolCall,
    EventType.PRODUCT_TOOL_RESULT: ToolResult,
    EventType.PRODUCT_INTERRUPTION: ProductInterruption,
    EventType.PRODUCT_RESPONSE_DONE: ResponseDone,
    EventType.PRODUCT_CONVERSATION_COMPLETED: ConversationCompleted,
    EventType.PRODUCT_ERROR: ProductError,
    EventType.PRODUCT_CLOSED: ProductClosed,
    EventType.PRODUCT_RAW: ProductRaw,
    EventType.PRODUCT_AUDIO_FLOOD: AudioFlood,
    EventType.VIRTUAL_ADVANCE: VirtualAdvance,
    EventType.CHANNEL_PACKETS: ChannelPackets,
    EventType.OUTCOME_PROBED: OutcomeProbed,
    EventType.USAGE_RECORDED: UsageRecorded,
}


def attributes_model(event_type: EventType) -> type[EventAttributes]:
    return ATTRIBUTES[event_type]


def check_attributes(event_type: EventType, attributes: EventAttributes | None) -> None:
    """``attributes`` are those of ``event_type`` (a recording's own invariant)."""
    model = ATTRIBUTES[event_type]
    if attributes is None:
        return
    if type(attributes) is not model:
        raise TypeError(f"{event_type.value} is recorded with {model.__name__}, "
                        f"not {type(attributes).__name__}")

