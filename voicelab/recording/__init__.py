"""The recording of one trial: typed events on one clock, both directions' audio, the listener.

Each event type's attributes are a model (:data:`ATTRIBUTES`): recorded from it and read
through it (``TrialEnded.of(event)``).

Everything written after a call derives from the recording; a bundle keeps enough to rebuild it
(see :mod:`voicelab.artifacts` ``read_recording`` and ``voicelab.rescore``).
"""

from ._attributes import (
    ATTRIBUTES,
    AudioFlood,
    ChannelPackets,
    Connected,
    ConversationCompleted,
    EnvironmentEcho,
    EnvironmentMixed,
    EventAttributes,
    ExpectsResponse,
    NoAttributes,
    OutcomeProbed,
    PersonaEnded,
    ProbeMarked,
    ProbeSkipped,
    ProductClosed,
    ProductError,
    ProductInterruption,
    ProductRaw,
    ProductText,
    ReportedAttributes,
    ResponseDone,
    SpeechSynthesized,
    ToolCall,
    ToolResult,
    TrialEnded,
    TrialStarted,
    UsageRecorded,
    UserAudio,
    UserBargeIn,
    UserDtmf,
    UserTurnStarted,
    VirtualAdvance,
)
from ._documents import build_raw_events, build_tool_calls, build_transcript, transcript_markdown
from ._events import (
    AUDIO_STREAMS,
    ENDPOINT_EVENT_TYPES,
    ENDPOINT_KINDS,
    PRODUCT,
    USER,
    Event,
    EventType,
)
from ._jsonl import (
    CONTRACT_VERSION,
    MAX_TIMELINE_SECONDS,
    RECORD_FIELDS,
    RecordingError,
    encode_voice_events,
    pcm_metadata,
    recording_from_records,
    to_records,
    voice_events_jsonl,
)
from ._listener import (
    HeardChunk,
    HeardResponse,
    ListenerTimeline,
    ns_to_samples,
    samples_to_ns,
)
from ._recording import USER_CLEAN, USER_HEARD, Recording, conversion_delay_ns
from ._responses import ProductTurn, ProductTurns
from ._store import PcmStream

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "PRODUCT",
    "USER",
    "recording_from_records",
]
