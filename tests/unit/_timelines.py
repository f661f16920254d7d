"""What the hand-built-timeline metric tests share (test_metrics_placement.py,
test_stall_onset.py): a tiny builder of recordings with events at given milliseconds on the
trial clock, and tones and silences of known length."""

from __future__ import annotations

import numpy as np

from voicelab.recording import ATTRIBUTES, EventType, Recording

RATE = 24_000
MS = 1_000_000  # ns


class Timeline:
    """A tiny builder of recordings: events at given milliseconds on the trial clock."""

    def __init__(self) -> None:
        self.recording = Recording(session_id="s", trace_id="0" * 32, root_span_id="r",
                                   clock_ns=lambda: 0)

    def add(self, at_ms: float, kind: str, turn: str | None = None, source: str = "evaluator",
            samples: np.ndarray | None = None, **attributes: object) -> int:
        """Record one event of ``kind`` at ``at_ms``; returns its sequence number."""
        event_type = EventType(kind)
        event = self.recording.record(
            event_type, ATTRIBUTES[event_type](**attributes) if attributes else None,
            source=source, direction="internal", at_ns=int(at_ms * MS), turn_id=turn,
            speaker_role="assistant" if source == "product" else None,
            audio=None if samples is None else samples.astype("<i2").tobytes())
        return event.sequence


def tone(ms: float, amplitude: int = 8000) -> np.ndarray:
    count = int(RATE * ms / 1000)
    return (amplitude * np.sin(np.arange(count) * 2 * np.pi * 220 / RATE)).astype(np.int16)


def silence(ms: float) -> np.ndarray:
    return np.zeros(int(RATE * ms / 1000), dtype=np.int16)
