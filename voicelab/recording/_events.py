"""The event vocabulary of a recording: what can happen in a trial, and one recorded event."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventType(StrEnum):
    """Every event a trial records; the value is the ``event_type`` in voice-events.jsonl."""

    TRIAL_STARTED = "trial.started"
    TRIAL_ENDED = "trial.ended"
    CONNECT_STARTED = "session.connect_started"
    CONNECTED = "session.connected"
    CLOSED_BY_EVALUATOR = "session.closed_by_evaluator"
    SPEECH_SYNTHESIZED = "speech.synthesized"
    ENVIRONMENT_MIXED = "environment.mixed"
    USER_TURN_STARTED = "user.turn_started"
    USER_AUDIO = "user.audio_chunk"
    USER_TURN_COMMITTED = "user.turn_committed"
    USER_SPEECH_STARTED = "user.speech_started"  # on a live line: the first speech sample sent
    USER_SPEECH_ENDED = "user.speech_ended"  # ... and the last
    USER_BARGE_IN = "user.barge_in"
    USER_DTMF = "user.dtmf"  # keys pressed on the user's phone
    #: a selectivity probe's sound on the live line: its first and last audible sample sent
    #: (backchannel, noise or interruption; docs/probes.md)
    PROBE_STARTED = "probe.started"
    PROBE_ENDED = "probe.ended"
    PROBE_SKIPPED = "probe.skipped"  # a noise probe whose reply was over before its moment
    ENVIRONMENT_ECHO = "environment.echo"  # the speakerphone echo path of the call
    PERSONA_ENDED = "persona.ended"
    PRODUCT_AUDIO = "product.audio_chunk"
    PRODUCT_TRANSCRIPT = "product.transcript"
    PRODUCT_INPUT_TRANSCRIPT = "product.input_transcript"
    PRODUCT_TOOL_CALL = "product.tool_call"
    PRODUCT_TOOL_RESULT = "product.tool_result"
    PRODUCT_INTERRUPTION = "product.interruption"
    PRODUCT_RESPONSE_DONE = "product.response_done"
    PRODUCT_CONVERSATION_COMPLETED = "product.conversation_completed"
    PRODUCT_ERROR = "product.error"
    PRODUCT_CLOSED = "product.closed"
    PRODUCT_RAW = "product.raw"
    PRODUCT_AUDIO_FLOOD = "product.audio_flood"
    VIRTUAL_ADVANCE = "timeline.virtual_advance"
    CHANNEL_PACKETS = "channel.packets"  # a telephony line's packets, per turn (end of call)
    OUTCOME_PROBED = "outcome.probed"
    #: a paid call's usage, recorded as it is spent (docs/cost.md)
    USAGE_RECORDED = "usage.recorded"


#: The endpoint's normalized event kinds (``EndpointEvent.type``) as recorded.
ENDPOINT_EVENT_TYPES: dict[str, EventType] = {
    "audio_delta": EventType.PRODUCT_AUDIO,
    "transcript_final": EventType.PRODUCT_TRANSCRIPT,
    "input_transcript": EventType.PRODUCT_INPUT_TRANSCRIPT,
    "tool_call": EventType.PRODUCT_TOOL_CALL,
    "tool_result": EventType.PRODUCT_TOOL_RESULT,
    "interruption": EventType.PRODUCT_INTERRUPTION,
    "turn_complete": EventType.PRODUCT_RESPONSE_DONE,
    "conversation_complete": EventType.PRODUCT_CONVERSATION_COMPLETED,
    "error": EventType.PRODUCT_ERROR,
    "closed": EventType.PRODUCT_CLOSED,
    "raw": EventType.PRODUCT_RAW,
}
#: ... and back (the ``type`` of raw-endpoint-events.json).
ENDPOINT_KINDS: dict[EventType, str] = {value: key for key, value in ENDPOINT_EVENT_TYPES.items()}

#: The two audio directions, each kept as one arrival-ordered PCM stream.
USER, PRODUCT = "user", "product"
AUDIO_STREAMS: dict[EventType, str] = {EventType.USER_AUDIO: USER,
                                       EventType.PRODUCT_AUDIO: PRODUCT}


@dataclass(slots=True)
class Event:
    """One recorded event.

    ``offset_ns`` is real time on the trial's monotonic clock; ``listener_ns`` is where the
    simulated listener is at that moment (``offset_ns`` plus every virtual advance recorded
    before it: with ``pace_audio: false`` the runner records the time it would have waited
    instead of sleeping). Audio events reference their samples in the direction's stream:
    ``audio_start`` (sample index) and ``audio_samples``. ``raw`` is a product message as the
    product sent it (secrets scrubbed, base64 audio elided) for raw-endpoint-events.json.
    """

    sequence: int
    offset_ns: int
    listener_ns: int
    type: EventType
    source: str
    direction: str
    speaker_role: str | None = None
    turn_id: str | None = None
    span_id: str | None = None
    attributes: dict[str, object] = field(default_factory=dict)
    audio_start: int = -1
    audio_samples: int = 0
    raw: object = None

    @property
    def audio_end(self) -> int:
        return self.audio_start + self.audio_samples

    def __reduce__(self) -> tuple[Any, ...]:
        # an event pickled on its own (a recording pickles its events as field tuples)
        return (Event, (self.sequence, self.offset_ns, self.listener_ns, self.type, self.source,
                        self.direction, self.speaker_role, self.turn_id, self.span_id,
                        self.attributes, self.audio_start, self.audio_samples, self.raw))
