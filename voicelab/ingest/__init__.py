"""Recorded real calls as bundles: the same evidence, metrics and verdicts as a simulated run.

    outcome = voicelab.ingest.ingest(["calls/0001.wav"], artifacts_dir="production")
    outcome.report.source            # "production"

A call is a stereo recording (the caller and the agent on their own channels, mapped by
:class:`ChannelMap`) or two mono files; its transcript with timestamps is optional
(:class:`CallTranscript`). See docs/ingest.md.
"""

from ._ingest import (
    PRODUCTION,
    PRODUCTION_CALLER,
    IngestOptions,
    IngestOutcome,
    aingest,
    call_sources,
    ingest,
    ingest_run,
)
from ._recording import CALL_ENDED, CHUNK_MS, REPLAY_TAIL_MS, call_recording
from ._sources import (
    DEFAULT_CHANNELS,
    TRANSCRIPT_SUFFIX,
    CallAudio,
    CallSource,
    CallTranscript,
    ChannelMap,
    Manifest,
    TranscriptSegment,
    mono_pair,
    read_call,
    read_manifest,
    stereo_call,
)
from ._stereo import write_stereo_call
from ._turns import DEFAULT_TURN_GAP_MS, CallTurns, Response, UserTurn, segment_call

__all__ = [
    "CALL_ENDED",
    "CHUNK_MS",
    "DEFAULT_CHANNELS",
    "DEFAULT_TURN_GAP_MS",
    "PRODUCTION",
    "PRODUCTION_CALLER",
    "REPLAY_TAIL_MS",
    "TRANSCRIPT_SUFFIX",
    "CallAudio",
    "CallSource",
    "CallTranscript",
    "CallTurns",
    "ChannelMap",
    "IngestOptions",
    "IngestOutcome",
    "Manifest",
    "Response",
    "TranscriptSegment",
    "UserTurn",
    "aingest",
    "call_recording",
    "call_sources",
    "ingest",
    "ingest_run",
    "mono_pair",
    "read_call",
    "read_manifest",
    "segment_call",
    "stereo_call",
    "write_stereo_call",
]
