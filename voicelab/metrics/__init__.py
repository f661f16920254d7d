"""Metrics: per-turn timing and signal metrics from the recorded timeline (pure functions)."""

from ._placement import (
    Placement,
    ResponsePlayback,
    place_channels,
    place_channels_steps,
    silent_runs_ns,
    virtual_offsets,
)
from ._speech import (
    dnsmos,
    input_wer,
    intelligibility,
    normalize_text,
    speech_metrics_for_turn,
    transcript_completeness,
)
from ._voice import (
    PERCENTILES,
    TIMING_METRICS,
    compute_voice_metrics,
    compute_voice_metrics_steps,
    summarize,
)

__all__ = [
    "PERCENTILES",
    "TIMING_METRICS",
    "Placement",
    "ResponsePlayback",
    "compute_voice_metrics",
    "compute_voice_metrics_steps",
    "dnsmos",
    "input_wer",
    "intelligibility",
    "normalize_text",
    "place_channels",
    "place_channels_steps",
    "silent_runs_ns",
    "speech_metrics_for_turn",
    "summarize",
    "transcript_completeness",
    "virtual_offsets",
]
