"""The ids a trial's root span must have: the ones its recording holds and the product was sent.

An SDK :class:`IdGenerator` (imported only with the telemetry extra) that hands out a preset
trace id and span id once, then random ones. Span creation happens on one thread of the
exporter (:mod:`._export`), so the next span started is the one the ids were preset for.
"""

from __future__ import annotations

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator


class PresetIds(IdGenerator):
    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._trace_id: int | None = None
        self._span_id: int | None = None

    def preset(self, *, trace_id: int | None, span_id: int | None) -> None:
        """The next root span started gets these ids (None: a random one); preset both None
        once it started (a disabled SDK takes none)."""
        self._trace_id, self._span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        trace_id, self._trace_id = self._trace_id, None
        return trace_id if trace_id else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        span_id, self._span_id = self._span_id, None
        return span_id if span_id else self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        # a recording's trace id is a UUID4's hex: its 56 low bits are random
        return True
