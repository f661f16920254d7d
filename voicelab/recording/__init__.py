"""The recording of one trial: typed events on one clock, both directions' audio, the listener.

Everything written after a call derives from the recording; a bundle keeps enough to rebuild it
(see :mod:`voicelab.artifacts` ``read_recording`` and ``voicelab.rescore``).
"""

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
    CONVERSION_DELAY_ATTRIBUTE,
    HeardChunk,
    Listener,
    ResponsePlayback,
    ns_to_samples,
    samples_to_ns,
)
from ._recording import USER_CLEAN, USER_HEARD, Recording, conversion_delay_ns
from ._store import PcmStream

__all__ = [
    "MAX_TIMELINE_SECONDS",
    "AUDIO_STREAMS",
    "CONTRACT_VERSION",
    "CONVERSION_DELAY_ATTRIBUTE",
    "ENDPOINT_EVENT_TYPES",
    "ENDPOINT_KINDS",
    "PRODUCT",
    "RECORD_FIELDS",
    "USER",
    "USER_CLEAN",
    "USER_HEARD",
    "Event",
    "EventType",
    "HeardChunk",
    "Listener",
    "PcmStream",
    "Recording",
    "RecordingError",
    "ResponsePlayback",
    "conversion_delay_ns",
    "encode_voice_events",
    "ns_to_samples",
    "pcm_metadata",
    "recording_from_records",
    "samples_to_ns",
    "to_records",
    "voice_events_jsonl",
]
