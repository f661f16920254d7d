"""Metrics: per-turn timing and signal metrics of a recording (pure functions)."""

from ._measurement import (
    degraded_note,
    judge_measurement,
    loop_lag_of,
    loop_lag_statistics,
    measurement_quality,
)
from ._placement import Placement, place_channels, place_channels_steps, silent_runs_ns
from ._speech import (
    add_speech_metrics,
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
    "add_speech_metrics",
    "compute_voice_metrics",
    "compute_voice_metrics_steps",
    "degraded_note",
    "dnsmos",
    "input_wer",
    "intelligibility",
    "judge_measurement",
    "loop_lag_of",
    "loop_lag_statistics",
    "measurement_quality",
    "normalize_text",
    "place_channels",
    "place_channels_steps",
    "silent_runs_ns",
    "speech_metrics_for_turn",
    "summarize",
    "transcript_completeness",
]
