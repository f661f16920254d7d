"""The `ConversationEndpoint` protocol, its context and the normalized event vocabulary.

Constructor / loader contract
-----------------------------
An adapter class is named in the run config (``endpoint.adapter``) by a built-in name
(``websocket``, ``http``, ``fake``, ``realtime``) or a dotted path (``pkg.module.Class``). The
runner constructs it as ``Adapter(settings, context)``:

* ``settings`` is ``endpoint.settings`` after ``${VAR}`` interpolation, parsed once by
  ``validate`` into the adapter's ``settings_model`` when it declares one (the mapping otherwise,
  and for a launched product's filled settings: the constructor parses a mapping itself);
* ``context`` is an :class:`EndpointContext` carrying the opaque run data, the session id, the
  W3C trace ids, the canonical audio format, the trial clock and the secret scrubber.

The constructor must not open connections; it may raise :class:`~voicelab.errors.ConfigError`
(or ``ValueError``) for bad settings. An optional classmethod ``check_settings(settings)`` is
called by ``voice-evaluator validate`` without constructing anything (given the parsed model, as
are ``turn_taking`` and ``product_can_speak_first`` below). ``capabilities`` must be
readable on the class so ``validate`` can compare it with a scenario's
``required_capabilities`` before any connection.

Everything below is optional; each ability is a ``typing.Protocol`` exported from
:mod:`voicelab.endpoints`, resolved once per class by ``abilities_of``.

**Turn taking.** An adapter may offer a classmethod ``turn_taking(settings) -> "client" |
"server_vad"``. ``client`` (the default): the evaluator ends each user turn explicitly
(``commit_turn``). ``server_vad``: the product listens; the evaluator streams a live line (speech,
then silence or room noise, in real time), never calls ``commit_turn`` or ``interrupt``, and
decides from the product's audio when a reply has ended.

An adapter may also offer ``outcome_probe() -> OutcomeProbe | None``: the product's own probe,
used when the run config names none (the embedded fake product does this), and a classmethod
``product_can_speak_first(settings) -> bool`` when, with some settings, the product cannot open
the conversation (``validate`` then refuses a scenario whose ``first_speaker`` is ``product``).

**Conversion delays.** An adapter whose own audio conversion delays the audio by a constant
(a resampling filter's group delay) says so in a class attribute ``conversion_delay_ms =
{"to_product": ms, "to_user": ms}``. That delay is the evaluator's processing, not the product's:
the runner records it at connect (``session.connected``), received audio is placed that much
earlier on the listener timeline, and the product's reaction times (response latency, stop
latency) leave out what the audio toward the product spent in it.

**Usage.** A product that reports what its own model used (a Realtime session's
``response.done`` ``usage``) may hand it to ``context.record_usage`` as a
:class:`~voicelab.artifacts.Usage` of component ``product``: it is recorded on the trial
(``usage.recorded``) and priced with the product's call minutes (docs/cost.md).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from ..artifacts import Usage
from ..audio import CANONICAL_FORMAT, AudioFormat, PcmAudio
from ..config import CAPABILITY_NAMES, SecretScrubber
from ..errors import ExecutionError

EventType = Literal[
    "audio_delta",            # product audio: ``audio`` holds canonical PCM bytes
    "transcript_final",       # assistant text of the current response: ``text``
    "input_transcript",       # what the product heard the user say: ``text``
    "tool_call",              # data: call_id, name, arguments (parsed JSON when possible)
    "tool_result",            # data: call_id, output
    "interruption",           # the product reports it stopped speaking (barge-in honoured);
                              # data flush: true when it also drops its audio still unplayed
                              # at the listener (a Twilio ``clear``)
    "turn_complete",          # a product response ended; data: status (completed|cancelled|...)
    "conversation_complete",  # the product ended the conversation
    "error",                  # data: code, message; ``text`` = message
    "closed",                 # the connection ended; data: reason, code
    "raw",                    # a message the adapter did not normalize (kept, logged at debug)
]

EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]

CAPABILITY_KEYS = CAPABILITY_NAMES

TurnTaking = Literal["client", "server_vad"]
TURN_TAKING_MODES: tuple[str, ...] = TurnTaking.__args__  # type: ignore[attr-defined]


class EndpointError(ExecutionError):
    """The endpoint could not be reached or used (refused, rejected handshake, timeout, closed).

    ``connect`` raises it; after a successful connect, problems arrive as ``error``/``closed``
    events instead, and ``send_audio``/``commit_turn`` raise it only when the connection is gone.
    Messages are scrubbed of configured secrets.
    """

    def __init__(self, message: str, *, code: str = "endpoint_error"):
        self.code = code
        super().__init__(message)


@dataclass(slots=True)
class EndpointEvent:
    """One normalized event; ``raw`` is the message exactly as the product sent it."""

    type: str
    received_ns: int
    audio: bytes | None = None
    text: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    raw: Any = None

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPES:
            raise ValueError(f"unknown endpoint event type {self.type!r}")


def new_trace_id() -> str:
    return uuid.uuid4().hex


def new_span_id() -> str:
    return uuid.uuid4().hex[:16]


class Playback(Protocol):
    """What the simulated listener has heard of the product, for wires whose product asks when
    its audio has played (a Twilio ``mark`` is echoed back then, not when it arrives)."""

    async def until_played(self, samples: int) -> None:
        """Return once the first ``samples`` canonical samples of product audio the adapter
        delivered (as ``audio_delta`` events) have played on the listener's clock, or will never
        play (a ``clear`` dropped them)."""


@dataclass(frozen=True)
class EndpointContext:
    """What the runner hands every adapter besides its settings."""

    session_id: str
    data: Mapping[str, Any] = field(default_factory=dict)
    trace_id: str = field(default_factory=new_trace_id)
    span_id: str = field(default_factory=new_span_id)
    audio_format: AudioFormat = CANONICAL_FORMAT
    scrubber: SecretScrubber = field(default_factory=SecretScrubber)
    clock_ns: Callable[[], int] = time.perf_counter_ns
    base_dir: Path = field(default_factory=Path.cwd)
    trial_index: int = 1
    seed: int = 0
    scenario_id: str = ""
    #: the listener's playback, during a trial (None when an adapter is used on its own)
    playback: Playback | None = None
    #: where the trial records the product's own reported usage (None: nowhere)
    usage: Callable[[Usage], None] | None = None

    def record_usage(self, usage: Usage) -> None:
        """Record what the product reported its model used (docs/cost.md)."""
        if self.usage is not None:
            self.usage(usage)

    @property
    def traceparent(self) -> str:
        """The W3C ``traceparent`` header value for this trial's endpoint span."""
        return f"00-{self.trace_id}-{self.span_id}-01"


@runtime_checkable
class ConversationEndpoint(Protocol):
    """A product's voice protocol, seen from the evaluator."""

    capabilities: Mapping[str, bool]

    async def connect(self) -> None:
        """Authenticate, open the connection and send any initialization (opaque run data)."""

    async def send_audio(self, audio: PcmAudio) -> None:
        """Translate canonical PCM into the product wire format and send it."""

    async def commit_turn(self) -> None:
        """Signal the end of evaluator input for this user turn and ask for a response."""

    def events(self) -> AsyncIterator[EndpointEvent]:
        """Normalized product events, each timestamped the moment it arrived."""

    async def interrupt(self) -> None:
        """Ask the product to stop its current output (barge-in)."""

    async def close(self) -> None:
        """Release network resources; safe to call twice."""


REQUIRED_METHODS = ("connect", "send_audio", "commit_turn", "events", "interrupt", "close")
