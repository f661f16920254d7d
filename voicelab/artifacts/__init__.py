"""Versioned artifact models, bundle writing and reading, run reports."""

from ._models import (
    SCHEMA_VERSION,
    ExecutionFailure,
    JudgeResult,
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
)

__all__ = [
    "SCHEMA_VERSION",
    "ExecutionFailure",
    "JudgeResult",
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
]
