"""Measurement quality: can a trial's timings be trusted, given its evaluator's own loop lag?

Every arrival is stamped when the event loop gets round to the socket's data. A loop busy with
other trials (or blocked by a synchronous plug-in) reaches it late, and the stamp is late by as
much: a product that never stalls then reads a stall, dead air grows or shrinks, latencies
shift. A trial therefore watches its loop while the conversation runs (a ticker that sleeps a
fixed interval and notes how late it wakes, :mod:`voicelab.runner._loop_lag`), keeps the
lateness statistics in its recording (the ``trial.ended`` event's ``loop_lag``) and judges them
here, against the run config's ``measurement`` tolerances. Pure functions: ``rescore`` judges a
bundle again the same way.

Where the loop lagged matters, not only how much: a tick that woke ``L`` ms late at ``t`` means
the loop was blocked over ``[t - L, t]``, and an arrival stamped in that stretch (or just after,
while the loop catches up) may be late by up to ``L``. An arrival stamped while the loop ran
freely is not. The recording therefore also keeps every tick later than
``LATE_TICK_FLOOR_MS`` with its moment (the ``trial.ended`` event's ``late_ticks``), each
response's timing stamps get a bound on their error from the ticks around them
(:func:`stamp_error_bounds`, :mod:`._stamp_bounds`), each of its timing figures a bound from the
range it can take over the arrivals inside those (:mod:`._figure_bounds`), and only a response
with a figure that may be off beyond the tolerance is ``timing_degraded``. Late ticks recorded
before that (without ``since``) are judged per stamp, and a bundle recorded before the ticks were
kept on its whole-trial statistics, as each was then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..artifacts import LoopLag, MeasurementQuality, MeasurementTolerances, TurnMetrics
from ..config import MeasurementConfig
from ..recording import Connected, Event, EventType, Recording, TrialEnded
from ._figure_bounds import figure_bounds_of
from ._stamp_bounds import (
    LateTicks,
    StampBound,
    stamp_bounds_by_offset,
    stamp_error_bounds,
)
from ._voice import percentile

logger = logging.getLogger(__name__)

#: The ``trial.ended`` attribute holding the loop-lag statistics (the runner records it).
LOOP_LAG_ATTRIBUTE = "loop_lag"
#: The ``trial.ended`` attribute holding the late ticks: ``{"floor_ms": f, "ticks": [[wake
#: offset us, lateness us], ...], "since": "previous_wake"}``, every tick later than
#: ``floor_ms``, the offset on the recording's clock. ``since`` says that a busy stretch is
#: bounded from the tick before's wake-up (:func:`stamp_error_bounds`); recordings without it
#: are judged as they were when recorded, from the late tick's due time.
LATE_TICKS_ATTRIBUTE = "late_ticks"
#: ``since`` of the late ticks recorded now: the ticker re-arms from each wake-up's own reading
SINCE_PREVIOUS_WAKE = "previous_wake"
#: Ticks later than this (ms) are kept with their moment: a quiet loop's selector rounds its
#: timeout to the millisecond (a free loop reads 0-1 ms), so later than that means busy.
LATE_TICK_FLOOR_MS = 1.0
#: ``session.connected``'s ``arrival_stamps``: ``kernel``, the product's audio carries the
#: kernel's receive stamps (SIP's RTP); ``kernel_stream``, every product arrival does but those
#: the ``product.closed`` event lists, each as [ns before its own stamp, how late it may be at
#: most in ns or -1] (a WebSocket read from its TCP socket; WebRTC, whose loop-stamped packets
#: and data-channel messages are listed)
KERNEL_STAMPS = "kernel"
KERNEL_STREAM_STAMPS = "kernel_stream"
LOOP_STAMPED_ATTRIBUTE = "loop_stamped_before_close_ns"
#: The arrivals a response's timing metrics rest on: its audio chunks (first audio, speech
#: onset and end as heard, playback stall, dead air, stop latency) and its ``response.done``
#: (response duration). The references they are measured from are sends (a commit, the user's
#: speech end on the line, a barge-in): stamped when they really left, a blocked loop delays
#: them and their stamp alike.
TIMED_ARRIVALS = (EventType.PRODUCT_AUDIO, EventType.PRODUCT_RESPONSE_DONE)
#: The loosest accuracy documented for a timing figure (benchmarks/README.md: playback stall,
#: dead air and barge-in stop latency within 40 ms at p99; the tolerances, 25 ms, keep that
#: with slack). A response whose stamps may be late by more has no timing figure within any
#: documented accuracy: the run warns. Beyond a tolerance but within this, the response is
#: ``timing_degraded`` and counted, and only a verdict or gate its error could change warns.
DOCUMENTED_ACCURACY_MS = 40.0


def loop_lag_statistics(lateness_ns: Sequence[int] | np.ndarray, *, interval_ms: float
                        ) -> LoopLag:
    """p50, p99 and max of the ticker's lateness (ns in, ms out, to the microsecond), with
    ``numpy.percentile``'s interpolation. It runs on the loop at every trial's end: a few dozen
    ticks are sorted in Python (numpy's per-call overhead outweighs them), a paced trial's
    thousands in numpy, the same numbers either way (each lateness an exact integer divided
    once by 1e6)."""
    count = len(lateness_ns)
    if count == 0:
        return LoopLag(ticks=0, interval_ms=interval_ms)
    if count < _SORT_IN_NUMPY_FROM:
        values: Sequence[float] | np.ndarray = sorted(int(late) / 1e6 for late in lateness_ns)
    else:
        values = np.sort(np.asarray(lateness_ns, dtype=np.int64)) / 1e6
    return LoopLag(p50=round(float(percentile(values, 50)), 3),
                   p99=round(float(percentile(values, 99)), 3),
                   max=round(float(values[-1]), 3), ticks=count, interval_ms=interval_ms)


#: From this many ticks :func:`loop_lag_statistics` sorts in numpy.
_SORT_IN_NUMPY_FROM = 200


def tolerances_of(config: MeasurementConfig) -> MeasurementTolerances:
    return MeasurementTolerances(max_loop_lag_p99_ms=config.max_loop_lag_p99_ms,
                                 max_loop_lag_max_ms=config.max_loop_lag_max_ms,
                                 max_first_audio_error_ms=config.max_first_audio_error_ms)


def late_ticks_record(pairs: Sequence[Sequence[int]] | np.ndarray, *,
                      floor_ms: float = LATE_TICK_FLOOR_MS) -> dict[str, Any]:
    """The ``late_ticks`` attribute of ``trial.ended`` (see ``LATE_TICKS_ATTRIBUTE``)."""
    ticks = pairs.tolist() if isinstance(pairs, np.ndarray) \
        else [[int(offset), int(late)] for offset, late in pairs]
    return {"floor_ms": floor_ms, "ticks": ticks, "since": SINCE_PREVIOUS_WAKE}


def _trial_ended(recording: Recording) -> TrialEnded | None:
    """The trial's last ``trial.ended`` (it comes at the end: looked for from there)."""
    event = _trial_ended_event(recording)
    return TrialEnded.of(event) if event is not None else None


def _trial_ended_event(recording: Recording) -> Event | None:
    return next((e for e in reversed(recording.events) if e.type is EventType.TRIAL_ENDED),
                None)


def late_ticks_of(recording: Recording) -> LateTicks | None:
    """The late ticks the trial recorded (``None``: a bundle written before they were kept)."""
    ended = _trial_ended(recording)
    recorded: Any = ended.late_ticks if ended else None
    if not isinstance(recorded, Mapping):
        return None
    try:
        pairs = np.asarray(recorded.get("ticks") or [], dtype=np.int64).reshape(-1, 2)
        floor_ms = float(recorded.get("floor_ms", LATE_TICK_FLOOR_MS))
    except (TypeError, ValueError):  # not pairs of integers: judged on the whole trial
        logger.warning("trial.ended: unreadable %s, judging the whole trial's loop lag",
                       LATE_TICKS_ATTRIBUTE)
        return None
    pairs = pairs[np.argsort(pairs[:, 0], kind="stable")]  # in the order they woke
    return LateTicks(floor_ms, pairs[:, 0] * 1000, pairs[:, 1] * 1000,
                     since_previous_wake=recorded.get("since") == SINCE_PREVIOUS_WAKE)


def _arrival_stamps(recording: Recording) -> str | None:
    connected = next(recording.of_type(EventType.CONNECTED), None)
    return Connected.of(connected).arrival_stamps if connected is not None else None


def kernel_stamped_audio(recording: Recording) -> bool:
    """Whether the product's audio carries the kernel's receive stamps (``session.connected``
    says ``arrival_stamps: kernel``): the loop's lag does not make those stamps late."""
    return _arrival_stamps(recording) == KERNEL_STAMPS


def loop_stamped_offsets(recording: Recording) -> dict[int, int] | None:
    """On a kernel-stamped stream (``arrival_stamps: kernel_stream``), the offsets of the
    product's arrivals the loop stamped, each with how late the connection says it may be at
    most (ns; -1: not known): the ``product.closed`` event lists them, each as [ns before its
    own stamp, that bound]. ``None``: every arrival is charged the loop's lag (another
    connection, or no readable list: a call whose closing was not recorded)."""
    if _arrival_stamps(recording) != KERNEL_STREAM_STAMPS:
        return None
    closed = next((e for e in reversed(recording.events)
                   if e.type is EventType.PRODUCT_CLOSED), None)
    listed = closed.attributes.get(LOOP_STAMPED_ATTRIBUTE) if closed is not None else None
    if closed is None or not isinstance(listed, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and
            all(isinstance(value, int) for value in pair) for pair in listed):
        return None
    offsets: dict[int, int] = {}
    for before, late in listed:
        offset = closed.offset_ns - before
        known = offsets.get(offset, late)
        offsets[offset] = -1 if min(known, late) < 0 else max(known, late)
    return offsets


def _charged(recording: Recording, kinds: set[EventType]
             ) -> tuple[Callable[[Event], bool], dict[int, int]]:
    """Which of the product's arrivals of ``kinds`` the loop's lag is charged to (all of them,
    but the audio of a kernel-stamped line and what a kernel-stamped stream did not list), and
    the bounds a kernel-stamped stream gave its listed ones (offset -> ns; -1: none)."""
    if kernel_stamped_audio(recording):
        kinds = kinds - {EventType.PRODUCT_AUDIO}
    loop_stamped = loop_stamped_offsets(recording)
    if loop_stamped is not None:
        return (lambda event: event.type in kinds and event.offset_ns in loop_stamped,
                loop_stamped)
    return lambda event: event.type in kinds, {}


def first_audio_arrivals(recording: Recording) -> dict[str, list[int]]:
    """Each response's first audio packet's stamp, when the loop stamped it:
    ``first_audio_latency_ms`` rests on it (none when the kernel stamped it: no loop lag is
    charged to it)."""
    stamps: dict[str, list[int]] = {}
    charged, _ = _charged(recording, {EventType.PRODUCT_AUDIO})
    seen: set[str] = set()
    for event in recording.events:
        if event.type is EventType.PRODUCT_AUDIO and event.source == "product" \
                and event.turn_id and event.turn_id not in seen:
            seen.add(event.turn_id)
            if charged(event):
                stamps[event.turn_id] = [event.offset_ns]
    return stamps


def timed_arrivals(recording: Recording) -> dict[str, list[int]]:
    """Each response's timing stamps (``TIMED_ARRIVALS`` from the product; ns offsets) that
    the loop stamped (see :func:`_charged`)."""
    return _timed_arrivals(recording)[0]


def _timed_arrivals(recording: Recording) -> tuple[dict[str, list[int]], dict[str, int]]:
    """:func:`timed_arrivals`, and how many of each response's timing stamps the kernel took
    (not charged the loop's lag: their error is 0, which a response's p99 counts)."""
    kinds = set(TIMED_ARRIVALS)
    charged, _ = _charged(recording, kinds)
    stamps: dict[str, list[int]] = {}
    exact: dict[str, int] = {}
    for event in recording.events:
        if event.type in kinds and event.source == "product" and event.turn_id:
            if charged(event):
                stamps.setdefault(event.turn_id, []).append(event.offset_ns)
            else:
                exact[event.turn_id] = exact.get(event.turn_id, 0) + 1
    return stamps, exact


def judge_turns(turns: Sequence[TurnMetrics], bounds: Mapping[str, StampBound],
                config: MeasurementConfig,
                first_audio: Mapping[str, StampBound] | None = None,
                figures: Mapping[str, Mapping[str, float]] | None = None) -> list[str]:
    """Mark each turn's ``stamp_error_bound_ms`` and ``timing_degraded``, and (given the first
    audio stamps' bounds) its ``first_audio_error_bound_ms`` and ``first_audio_degraded`` (in
    place); the reasons of the degraded ones, each starting with its turn id. Given each
    turn's ``figures`` (its timing figures' own bounds, :mod:`._figure_bounds`), a turn is
    ``timing_degraded`` only when a figure's bound exceeds ``max_loop_lag_max_ms``; without
    them (late ticks recorded before per-figure bounds), when its stamps' largest bound or their
    99th percentile exceeds its tolerance, as such a recording was judged then."""
    reasons: list[str] = []
    for turn in turns:
        first_why = _judge_first_audio(turn, first_audio, config)
        bound = bounds.get(turn.turn_id, StampBound(0.0, 0.0, 0))
        turn.stamp_error_bound_ms = bound.max_ms
        if figures is not None:
            own = dict(figures.get(turn.turn_id, {}))
            turn.figure_error_bounds_ms = own
            over = [name for name, error in own.items() if error > config.max_loop_lag_max_ms]
            turn.degraded_figures = over or None  # none is absent, as a bundle reads it back
            why = [f"{name} by {own[name]:.1f} ms" for name in over]
            what = (f"the loop lagged around its arrivals, so {', '.join(why)} "
                    f"(> {config.max_loop_lag_max_ms:g} ms) may be off") if why else ""
        else:
            why = _stamp_reasons(bound, config)
            what = (f"the loop lagged around its arrivals, its {bound.stamps} timing stamp(s) "
                    f"may be late by {' and '.join(why)}") if why else ""
        turn.timing_degraded = bool(why)
        if why:
            reasons.append(f"{turn.turn_id}: {what}"
                           + (f"; its first audio's stamp by {first_why}" if first_why else ""))
        elif first_why:
            reasons.append(f"{turn.turn_id}: the loop lagged around its first audio, whose "
                           f"stamp may be late by {first_why}")
    return reasons


def _judge_first_audio(turn: TurnMetrics, first_audio: Mapping[str, StampBound] | None,
                       config: MeasurementConfig) -> str:
    """Mark the turn's first-audio bound and flag; why it is flagged ("": it is not)."""
    if first_audio is None or turn.first_audio_latency_ms is None:
        return ""
    first = first_audio.get(turn.turn_id, StampBound(0.0, 0.0, 0)).max_ms
    turn.first_audio_error_bound_ms = first
    turn.first_audio_degraded = first > config.max_first_audio_error_ms
    return f"{first:.1f} ms > {config.max_first_audio_error_ms:g} ms" \
        if turn.first_audio_degraded else ""


def _stamp_reasons(bound: StampBound, config: MeasurementConfig) -> list[str]:
    tolerances = tolerances_of(config)
    why = []
    if bound.p99_ms > tolerances.max_loop_lag_p99_ms:
        why.append(f"p99 {bound.p99_ms:.1f} ms > {tolerances.max_loop_lag_p99_ms:g} ms")
    if bound.max_ms > tolerances.max_loop_lag_max_ms:
        why.append(f"max {bound.max_ms:.1f} ms > {tolerances.max_loop_lag_max_ms:g} ms")
    return why


def judge_measurement(lag: LoopLag | None, config: MeasurementConfig) -> MeasurementQuality:
    """The whole-trial judgement (a bundle without late ticks): ``degraded`` when the lag's p99
    or max exceeds its tolerance (each reason says which)."""
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
    # only its loop lag is read: the whole attributes' validation (the late ticks, a pair per
    # tick of a saturated loop) would cost the loop as much again at each trial's end
    ended = _trial_ended_event(recording)
    recorded: Any = ended.attributes.get("loop_lag") if ended is not None else None
    if not isinstance(recorded, Mapping):
        return None
    return LoopLag.model_validate(dict(recorded))


def measurement_quality(recording: Recording, config: MeasurementConfig,
                        turns: Sequence[TurnMetrics] = ()) -> MeasurementQuality:
    """Judge the trial's loop lag where it matters: per turn (``turns`` get their
    ``stamp_error_bound_ms``, ``figure_error_bounds_ms`` and ``timing_degraded``, in place) when
    the recording kept its late ticks, else on the whole trial's statistics."""
    lag = loop_lag_of(recording)
    ticks = late_ticks_of(recording) if lag is not None else None
    if lag is None or ticks is None:
        return judge_measurement(lag, config)
    charged, exact = _timed_arrivals(recording)
    caps = loop_stamped_offsets(recording)
    bounds = stamp_error_bounds(charged, ticks, interval_ms=lag.interval_ms, exact=exact,
                                caps=caps)
    first = stamp_error_bounds(first_audio_arrivals(recording), ticks,
                               interval_ms=lag.interval_ms, caps=caps)
    figures = None
    if ticks.since_previous_wake:  # recorded since per-figure bounds: judged by them
        own = stamp_bounds_by_offset([s for turn in charged.values() for s in turn], ticks,
                                     interval_ms=lag.interval_ms, caps=caps)
        figures = figure_bounds_of(recording, turns, lambda offset: own.get(offset, 0),
                                   {turn: bound.max_ms for turn, bound in bounds.items()})
    reasons = judge_turns(turns, bounds, config, first, figures)
    return MeasurementQuality(
        loop_lag_ms=lag, tolerances=tolerances_of(config), degraded=bool(reasons),
        reasons=reasons, scope="turn",
        degraded_turns=[turn.turn_id for turn in turns
                        if turn.timing_degraded or turn.first_audio_degraded])


def degraded_note(quality: MeasurementQuality | None) -> str | None:
    """Why the trial's timings cannot be trusted (``None``: they can)."""
    if quality is None or not quality.degraded:
        return None
    return "; ".join(quality.reasons)
