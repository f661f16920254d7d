"""Metrics: per-turn timing and signal metrics of a recording (pure functions)."""

from ._entities import NO_ENTITIES, EntityPlan, entity_metrics
from ._entity_text import entity_value, numbers_in, occurs
from ._measurement import (
    LATE_TICK_FLOOR_MS,
    LATE_TICKS_ATTRIBUTE,
    LateTicks,
    StampBound,
    degraded_note,
    judge_measurement,
    judge_turns,
    late_ticks_of,
    late_ticks_record,
    loop_lag_of,
    loop_lag_statistics,
    measurement_quality,
    stamp_error_bounds,
    timed_arrivals,
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
from ._talk import add_words_per_minute, talk_metrics
from ._voice import (
    PERCENTILES,
    TIMING_METRICS,
    compute_voice_metrics,
    compute_voice_metrics_steps,
    summarize,
)

__all__ = [
    "LATE_TICK_FLOOR_MS",
    "LATE_TICKS_ATTRIBUTE",
    "PERCENTILES",
    "TIMING_METRICS",
    "NO_ENTITIES",
    "EntityPlan",
    "LateTicks",
    "Placement",
    "StampBound",
    "add_speech_metrics",
    "add_words_per_minute",
    "compute_voice_metrics",
    "compute_voice_metrics_steps",
    "degraded_note",
    "dnsmos",
    "entity_metrics",
    "entity_value",
    "input_wer",
    "intelligibility",
    "judge_measurement",
    "judge_turns",
    "late_ticks_of",
    "late_ticks_record",
    "loop_lag_of",
    "loop_lag_statistics",
    "measurement_quality",
    "normalize_text",
    "numbers_in",
    "occurs",
    "place_channels",
    "place_channels_steps",
    "silent_runs_ns",
    "stamp_error_bounds",
    "speech_metrics_for_turn",
    "summarize",
    "talk_metrics",
    "timed_arrivals",
    "transcript_completeness",
]
