"""Metrics: per-turn timing and signal metrics of a recording (pure functions)."""

from ._entities import (
    NO_ENTITIES,
    EntityPlan,
    check_entities,
    entity_metrics,
    entity_warnings,
)
from ._entity_text import entity_value, numbers_in, occurs
from ._measurement import (
    DOCUMENTED_ACCURACY_MS,
    LATE_TICK_FLOOR_MS,
    LATE_TICKS_ATTRIBUTE,
    degraded_note,
    judge_measurement,
    judge_turns,
    late_ticks_of,
    late_ticks_record,
    loop_lag_of,
    loop_lag_statistics,
    measurement_quality,
    timed_arrivals,
)
from ._placement import STEP_EVENTS, Placement, place_channels, place_channels_steps, silent_runs_ns
from ._speech import (
    add_speech_metrics,
    dnsmos,
    input_wer,
    intelligibility,
    normalize_text,
    speech_metrics_for_turn,
    transcript_completeness,
)
from ._stamp_bounds import LateTicks, StampBound, stamp_error_bounds
from ._talk import add_words_per_minute, talk_metrics
from ._turn_metrics import (
    ResponseTurn,
    TurnMetric,
    TurnNeed,
    keep_recorded_columns,
    run_turn_metrics,
    turn_metric,
)
from ._voice import (
    PERCENTILES,
    SEGMENT_GAP_MS,
    TIMING_METRICS,
    compute_voice_metrics,
    compute_voice_metrics_steps,
    speech_segments_ns,
    summarize,
)

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "ResponseTurn",
    "turn_metric",
    "judge_measurement",
    "summarize",
]
