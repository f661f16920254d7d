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

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "ChannelMap",
    "IngestOptions",
    "IngestOutcome",
    "aingest",
    "call_sources",
    "ingest",
    "mono_pair",
    "write_stereo_call",
]
