"""Metrics: per-turn timing and signal metrics from the recorded timeline (pure functions)."""

from ._placement import Placement, ResponsePlayback, place_channels, silent_runs_ns, virtual_offsets
from ._voice import PERCENTILES, TIMING_METRICS, compute_voice_metrics, summarize

__all__ = [
    "PERCENTILES",
    "TIMING_METRICS",
    "Placement",
    "ResponsePlayback",
    "compute_voice_metrics",
    "place_channels",
    "silent_runs_ns",
    "summarize",
    "virtual_offsets",
]
