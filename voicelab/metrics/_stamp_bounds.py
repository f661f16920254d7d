"""How late each arrival stamp may be, from the late ticks of the loop-lag watch around it.

The recording keeps every tick of the loop-lag watch later than a floor, with its moment
(:mod:`voicelab.metrics._measurement`); a stamp taken while the loop was behind may be late by
as much as the loop was, and one taken while it ran freely is not. Pure functions of the ticks
and the stamps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LateTicks:
    """The recorded late ticks: when each woke (ns offset on the recording's clock) and how
    late (ns); ticks no later than ``floor_ms`` are not in it. ``since_previous_wake``: a busy
    stretch is bounded from the wake-up of the tick before (recorded so since; older
    recordings from the late tick's due time, as they were judged then)."""

    floor_ms: float
    woke_ns: np.ndarray
    lateness_ns: np.ndarray
    since_previous_wake: bool = True


@dataclass(frozen=True)
class StampBound:
    """How late a response's timing stamps may be: the worst and the 99th percentile over its
    stamps (ms; 0: no late tick around any of them) and how many stamps it has."""

    max_ms: float
    p99_ms: float
    stamps: int


def stamp_error_bounds(stamps: Mapping[str, Sequence[int]], ticks: LateTicks, *,
                       interval_ms: float, exact: Mapping[str, int] | None = None,
                       caps: Mapping[int, int] | None = None) -> dict[str, StampBound]:
    """Bound each stamp's error by the loop lag around it, then each response's by its stamps
    and its ``exact`` ones (how many the kernel took: error 0). ``caps``: a bound known
    otherwise for some stamps (offset -> ns, -1: none; a kernel-stamped stream's own account of
    a stamp the loop took): the smaller of the two holds.

    A tick that woke ``L`` late at ``t`` was due at ``t - L``. The ticker re-arms on each
    wake-up, so the tick before it woke one interval earlier, at most ``floor`` late (else it
    would be recorded): the loop last collected its ready sockets no later than ``t - L -
    interval - floor``. The busy stretch that made this tick late may have begun right after
    that (a block that begins just after an on-time tick delays the next one by only the block
    minus the interval), so what arrived from then on may have waited since then. When the tick
    before was late too (it woke one interval before this one was due: no on-time tick came
    between), the loop was not seen free since *its* start (on a saturated loop a tick waits
    behind a whole iteration of callbacks, and what arrived at the start of that iteration
    waited as long). The tick covers the stamps from that start to ``t + min(L, interval)``
    (what queued up meanwhile is read and stamped around the wake-up; catching up on ``L`` of
    backlog is allowed as long again, up to one interval; a loop still busy after that makes
    the next tick late, which covers the rest). A covered stamp ``s`` may be late by up to
    ``s - start``, and by ``L`` once the tick was due (the block the tick measured); the
    largest over the ticks covering it is its bound. A block that makes no tick later than the
    floor is invisible: a stamp with no late tick around it may still be late by up to one
    interval plus the floor, which the tolerances absorb (``max_first_audio_error_ms``, 3 ms:
    the 2 ms paced interval plus the 1 ms floor). Late ticks recorded before they said
    ``since`` are judged as they were then: each stretch from the late tick's due time.
    """
    turns = list(stamps)
    flat = np.asarray([s for turn in turns for s in stamps[turn]], dtype=np.int64)
    owner = np.repeat(np.arange(len(turns)), [len(stamps[turn]) for turn in turns])
    order = np.argsort(flat, kind="stable")
    flat, owner = flat[order], owner[order]
    bound = _sorted_stamp_bounds(flat, ticks, interval_ms=interval_ms, caps=caps)
    bounds: dict[str, StampBound] = {}
    exact = exact or {}
    for turn in exact:
        if turn not in stamps:
            turns.append(turn)
    for index, turn in enumerate(turns):
        own = np.concatenate([bound[owner == index] / 1e6, np.zeros(exact.get(turn, 0))])
        bounds[turn] = StampBound(
            max_ms=round(float(own.max()), 3) if own.size else 0.0,
            p99_ms=round(float(np.percentile(own, 99)), 3) if own.size else 0.0,
            stamps=int(own.size))
    return bounds


def _sorted_stamp_bounds(flat: np.ndarray, ticks: LateTicks, *, interval_ms: float,
                         caps: Mapping[int, int] | None = None) -> np.ndarray:
    """The bound (ns) of each of the sorted stamps ``flat`` (see :func:`stamp_error_bounds`)."""
    bound = np.zeros(flat.size, dtype=np.int64)
    if flat.size and ticks.woke_ns.size:
        interval_ns = int(interval_ms * 1_000_000)
        due = ticks.woke_ns - ticks.lateness_ns
        # the loop last collected its sockets then at the latest (the tick before woke one
        # interval before this one was due, at most the floor late)
        seen_free = due - interval_ns - int(ticks.floor_ms * 1_000_000) \
            if ticks.since_previous_wake else due
        # the tick before was late too and no on-time tick came between: busy since it was due
        chained = np.zeros(due.size, dtype=bool)
        chained[1:] = due[1:] - ticks.woke_ns[:-1] < interval_ns * 3 // 2
        start = np.where(chained, np.roll(seen_free, 1), seen_free)
        # older recordings: covered from the tick's due time, as judged when recorded
        low = np.searchsorted(flat, start if ticks.since_previous_wake else due, side="left")
        catch_up = np.minimum(ticks.lateness_ns, interval_ns)
        high = np.searchsorted(flat, ticks.woke_ns + catch_up, side="right")
        for tick in np.flatnonzero(high > low):
            covered = flat[low[tick]:high[tick]]
            # since the stretch began; at least the measured block once the tick was due
            late = np.where(covered >= due[tick],
                            np.maximum(covered - start[tick], ticks.lateness_ns[tick]),
                            covered - start[tick])
            np.maximum(bound[low[tick]:high[tick]], late, out=bound[low[tick]:high[tick]])
    for index, stamp in enumerate(flat.tolist()):
        cap = (caps or {}).get(stamp, -1)
        if cap >= 0 and cap < bound[index]:
            bound[index] = cap
    return bound


def stamp_bounds_by_offset(stamps: Sequence[int], ticks: LateTicks, *, interval_ms: float,
                           caps: Mapping[int, int] | None = None) -> dict[int, int]:
    """Each stamp's own bound (offset -> ns; see :func:`stamp_error_bounds`)."""
    flat = np.unique(np.asarray(stamps, dtype=np.int64))
    bound = _sorted_stamp_bounds(flat, ticks, interval_ms=interval_ms, caps=caps)
    return dict(zip(flat.tolist(), bound.tolist(), strict=True))
