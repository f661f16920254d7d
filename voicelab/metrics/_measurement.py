"""Measurement quality: can a trial's timings be trusted, given its evaluator's own loop lag?

Every arrival is stamped when the event loop gets round to the socket's data. A loop busy with
other trials (or blocked by a synchronous plug-in) reaches it late, and the stamp is late by as
much: a product that never stalls then reads a stall, dead air grows or shrinks, latencies
shift. A trial therefore watches its loop while the conversation runs (a ticker that sleeps a
fixed interval and notes how late it wakes, :mod:`voicelab.runner._loop_lag`), keeps the
lateness statistics in its recording (the ``trial.ended`` event's ``loop_lag``) and judges them
here, against the run config's ``measurement`` tolerances. Pure functions: ``rescore`` judges a
bundle again the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..artifacts import LoopLag, MeasurementQuality, MeasurementTolerances
from ..config import MeasurementConfig
from ..recording import EventType, Recording

#: The ``trial.ended`` attribute holding the loop-lag statistics (the runner records it).
LOOP_LAG_ATTRIBUTE = "loop_lag"


def loop_lag_statistics(lateness_ns: Sequence[int] | np.ndarray, *, interval_ms: float
                        ) -> LoopLag:
    """p50, p99 and max of the ticker's lateness (ns in, ms out, to the microsecond)."""
    values = np.asarray(lateness_ns, dtype=np.float64) / 1e6
    if values.size == 0:
        return LoopLag(ticks=0, interval_ms=interval_ms)
    p50, p99 = np.percentile(values, [50, 99])
    return LoopLag(p50=round(float(p50), 3), p99=round(float(p99), 3),
                   max=round(float(values.max()), 3), ticks=int(values.size),
                   interval_ms=interval_ms)


def tolerances_of(config: MeasurementConfig) -> MeasurementTolerances:
    return MeasurementTolerances(max_loop_lag_p99_ms=config.max_loop_lag_p99_ms,
                                 max_loop_lag_max_ms=config.max_loop_lag_max_ms)


def judge_measurement(lag: LoopLag | None, config: MeasurementConfig) -> MeasurementQuality:
    """``degraded`` when the lag's p99 or max exceeds its tolerance (each reason says which)."""
    tolerances = tolerances_of(config)
    reasons: list[str] = []
    if lag is not None and lag.p99 is not None and lag.p99 > tolerances.max_loop_lag_p99_ms:
        reasons.append(f"loop lag p99 {lag.p99:.1f} ms > {tolerances.max_loop_lag_p99_ms:g} ms")
    if lag is not None and lag.max is not None and lag.max > tolerances.max_loop_lag_max_ms:
        reasons.append(f"loop lag max {lag.max:.1f} ms > {tolerances.max_loop_lag_max_ms:g} ms")
    return MeasurementQuality(loop_lag_ms=lag, tolerances=tolerances, degraded=bool(reasons),
                              reasons=reasons)


def loop_lag_of(recording: Recording) -> LoopLag | None:
    """The loop lag the trial recorded (``None``: a bundle written before it was measured)."""
    ended = list(recording.of_type(EventType.TRIAL_ENDED))
    recorded: Any = ended[-1].attributes.get(LOOP_LAG_ATTRIBUTE) if ended else None
    if not isinstance(recorded, Mapping):
        return None
    return LoopLag.model_validate(dict(recorded))


def measurement_quality(recording: Recording, config: MeasurementConfig) -> MeasurementQuality:
    return judge_measurement(loop_lag_of(recording), config)


def degraded_note(quality: MeasurementQuality | None) -> str | None:
    """Why the trial's timings cannot be trusted (``None``: they can)."""
    if quality is None or not quality.degraded:
        return None
    return "; ".join(quality.reasons)
