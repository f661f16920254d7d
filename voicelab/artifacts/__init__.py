"""Versioned artifact models, bundle writing and reading, run reports."""

from ._bundle import TRIAL_FILES, write_json, write_jsonl
from ._junit import junit_xml
from ._models import (
    SCHEMA_VERSION,
    ExecutionFailure,
    JudgeResult,
    MatrixCell,
    MatrixReport,
    RawEndpointEvent,
    RawEndpointEvents,
    RunReport,
    ToolCallRecord,
    ToolCalls,
    Transcript,
    TranscriptTurn,
    TrialReport,
    TrialSummary,
    Verdict,
    VoiceEvent,
    VoiceMetrics,
)
from ._reader import (
    ArtifactVersionError,
    check_version,
    find_trial_dirs,
    read_json,
    read_trial,
    read_voice_events,
)
from ._schemas import SCHEMA_DIR, export_schemas

__all__ = [
    "SCHEMA_DIR",
    "SCHEMA_VERSION",
    "TRIAL_FILES",
    "ArtifactVersionError",
    "ExecutionFailure",
    "JudgeResult",
    "MatrixCell",
    "MatrixReport",
    "RawEndpointEvent",
    "RawEndpointEvents",
    "RunReport",
    "ToolCallRecord",
    "ToolCalls",
    "Transcript",
    "TranscriptTurn",
    "TrialReport",
    "TrialSummary",
    "Verdict",
    "VoiceEvent",
    "VoiceMetrics",
    "check_version",
    "export_schemas",
    "find_trial_dirs",
    "read_json",
    "read_trial",
    "read_voice_events",
    "write_json",
    "write_jsonl",
    "junit_xml",
]
