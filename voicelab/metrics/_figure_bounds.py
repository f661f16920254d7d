"""How far each timing figure of a response can be off, given how late its stamps may be.

A stamp ``s_k`` whose bound is ``b_k`` says the arrival was somewhere in ``[s_k - b_k, s_k]``
(:func:`voicelab.metrics._stamp_bounds.stamp_error_bounds`). A response's stamps being late does
not make each of its figures late by as much: a chunk that queued up while the listener was
still playing the ones before it changes neither the stall nor the dead air. So each figure
gets its own bound, from the range the figure can take over every arrival inside the stamps'
bounds; a response is flagged only when a figure's own bound exceeds the tolerance.

* ``playback_stall_ms``: the jitter-buffer recursion of
  :func:`voicelab.metrics._turn_metrics.jitter_buffer_stall_ns` totals
  ``max(0, max_{k>=1}(a_k - a_0 - D_k))`` with ``D_k = depth + sum_{j<k} d_j`` (the stall
  accumulated before chunk ``k`` is how far the playback point ran behind ``a_0 + D_k``). It
  increases in every ``a_k`` (``k >= 1``) and decreases in ``a_0``, so its range is exact: the
  least with the later chunks at their earliest and the first at its stamp, the most the other
  way round. A barge-in ends the chunks it counts at a fixed moment: a chunk stamped after it
  that may have arrived before it counts toward the most (it comes last, so it changes no
  other term).
* ``dead_air_ms``: placement (:class:`voicelab.recording.ListenerTimeline`) plays chunk ``k``
  at ``max(a_k, end of chunk k-1)``, so a response's placed audio relative to its first chunk
  is a function of the gaps ``g_k = max(0, a_k - end_{k-1})`` alone. Each gap is largest with
  ``a_k`` at its stamp and the chunks before at their earliest, least the other way round. The
  silent runs between audible samples only lengthen as any gap grows, so each run's least and
  most length bracket it: the sum of its gaps' least, or how far its two chunks can move apart
  (the later at its earliest, the earlier where it was placed), whichever is more; the sum of
  its gaps' most, or how far they can move apart the other way, whichever is less. All runs
  together can grow no more than the last audible chunk can move from the first (the budget):
  the most dead air is the runs already 300 ms long, the most runs the budget can lift to
  300 ms (no other choice of as many counts more than the longest as many), and the budget on
  top (conservative: not every corner is attainable). The figure counts whole 10 ms frames
  from the first audible sample: a run whose position moves with an uncertain gap may gain or
  lose a frame to its alignment, which the bracket allows for. A response cut by a barge-in (its
  audio stops at a fixed moment, not a function of the gaps) keeps the bound of all its
  stamps.
* ``response_latency_ms`` and ``speech_start_ms`` rest on where the speech onset plays: its
  chunk's start moves with that chunk's and the earlier chunks' arrivals, by at most their
  largest bound. ``response_duration_ms`` rests on the ``response.done`` stamp. The figures a
  barge-in cuts (stop latency, audio after the interrupt, a key's stop latency) keep the bound
  of all the response's stamps, as the response-wide rule gave them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..artifacts import TurnMetrics
from ..audio import CANONICAL_SAMPLE_RATE_HZ, SILENCE_THRESHOLD
from ..recording import (
    PRODUCT,
    EventType,
    HeardChunk,
    HeardResponse,
    Recording,
    TrialStarted,
    ns_to_samples,
    samples_to_ns,
)
from ._placement import DEAD_AIR_FRAME_MS, DEAD_AIR_MIN_RUN_MS

_RATE = CANONICAL_SAMPLE_RATE_HZ
#: The figures a barge-in cuts: bounded by every stamp of the response.
CUT_FIGURES = ("interruption_stop_latency_ms", "audio_after_interrupt_ms",
               "key_stop_latency_ms")


def stall_ns(arrivals_ns: np.ndarray, durations_ns: np.ndarray, *, depth_ns: int) -> int:
    """The jitter buffer's total stall in closed form (see the module docstring)."""
    if arrivals_ns.size < 2:
        return 0
    before = depth_ns + np.concatenate([[0], np.cumsum(durations_ns[:-1])])
    return int(max(0, int((arrivals_ns[1:] - arrivals_ns[0] - before[1:]).max())))


def stall_range_ns(stamps_ns: np.ndarray, bounds_ns: np.ndarray, durations_ns: np.ndarray, *,
                   depth_ns: int, counted: int, may_count: int) -> tuple[int, int]:
    """The least and the most stall the arrivals inside the bounds can give: ``counted`` of
    the chunks (in arrival order) are counted as recorded, ``may_count`` (at least as many)
    may have arrived before a barge-in."""
    if counted == 0:
        return 0, 0
    earliest = stamps_ns - bounds_ns
    least = np.concatenate([stamps_ns[:1], earliest[1:counted]])
    most = np.concatenate([earliest[:1], stamps_ns[1:may_count]])
    return (stall_ns(least, durations_ns[:counted], depth_ns=depth_ns),
            stall_ns(most, durations_ns[:may_count], depth_ns=depth_ns))


@dataclass(frozen=True)
class Gaps:
    """The silence placement may insert before each chunk after the first (samples): the
    least and the most over the arrivals inside the bounds; and where each chunk was placed
    and where it would start with every chunk at its earliest (the earliest it can start)."""

    least: np.ndarray
    most: np.ndarray
    start_placed: np.ndarray
    start_earliest: np.ndarray


def placement_gaps(chunks: Sequence[HeardChunk], bounds_ns: np.ndarray, *, lead_ns: int
                   ) -> Gaps:
    """Each gap's extremes (see the module docstring): the least with its chunk at its
    earliest and the chunk before ending where it was placed (an earlier arrival never ends
    it later); the most with its chunk at its stamp and every chunk before at its earliest
    (each then starts at its arrival or at the end of the one before)."""
    sizes = np.asarray([chunk.heard for chunk in chunks], dtype=np.int64)
    stamps = np.asarray([chunk.event.listener_ns for chunk in chunks], dtype=np.int64)
    at_stamp = np.asarray([ns_to_samples(int(s) - lead_ns) for s in stamps], dtype=np.int64)
    earliest = np.asarray([ns_to_samples(int(s) - lead_ns) for s in stamps - bounds_ns],
                          dtype=np.int64)
    placed_end = np.asarray([chunk.end for chunk in chunks], dtype=np.int64)
    least = np.maximum(0, earliest[1:] - placed_end[:-1])
    # ends with every chunk at its earliest: end_j = max_{i<=j}(earliest_i + sizes_i..j)
    through = np.cumsum(sizes)
    end_earliest = through + np.maximum.accumulate(earliest - (through - sizes))
    most = np.maximum(0, at_stamp[1:] - end_earliest[:-1])
    start_placed = np.asarray([chunk.start for chunk in chunks], dtype=np.int64)
    return Gaps(least=least, most=most, start_placed=start_placed,
                start_earliest=end_earliest - sizes)


def _frames_inside(offset: np.ndarray, length: np.ndarray, frame: int) -> np.ndarray:
    """Whole frames (counted from 0) inside ``[offset, offset + length)``."""
    return (offset + length) // frame - (-(-offset // frame))


@dataclass(frozen=True)
class _Runs:
    """The silent runs between a response's audible samples (samples): each one's least and
    most length, where it begins (from the first audible sample) and whether an uncertain gap
    before it may move it; and how much longer than their least lengths all of them together
    can be (the budget: every run's gaps come from how far the last chunk moved from the
    first)."""

    least: np.ndarray
    most: np.ndarray
    begins: np.ndarray
    moved: np.ndarray
    budget: int


def _silent_runs(loud: np.ndarray, chunk_sizes: Sequence[int], gaps: Gaps) -> _Runs:
    runs = loud.size - 1  # run j: between loud sample j and j + 1
    starts = np.cumsum(np.asarray(chunk_sizes, dtype=np.int64))[:-1]  # chunks 1..n-1
    run_of = np.searchsorted(loud, starts, side="left") - 1
    inside = (run_of >= 0) & (run_of < runs)
    added_least = np.bincount(run_of[inside], weights=gaps.least[inside], minlength=runs)
    added_most = np.bincount(run_of[inside], weights=gaps.most[inside], minlength=runs)
    # the gaps of one run together are the distance its two chunks moved apart, which is
    # tighter than each gap at its own extreme (those extremes are not attained together)
    offsets = np.concatenate([[0], starts])
    first = np.searchsorted(offsets, loud[:-1], side="right") - 1
    last = np.searchsorted(offsets, loud[1:], side="right") - 1
    between = offsets[last] - offsets[first]
    added_most = np.where(last > first, np.minimum(added_most, np.maximum(
        0, gaps.start_placed[last] - gaps.start_earliest[first] - between)), 0).astype(np.int64)
    added_least = np.where(last > first, np.maximum(
        added_least, gaps.start_earliest[last] - gaps.start_placed[first] - between), 0) \
        .astype(np.int64)
    base = np.diff(loud) - 1
    begins = loud[:-1] + 1 - loud[0] + np.concatenate([[0], np.cumsum(added_least)[:-1]])
    uncertain = added_least != added_most
    whole = int(gaps.start_placed[last[-1]] - gaps.start_earliest[first[0]]
                - (offsets[last[-1]] - offsets[first[0]]))
    return _Runs(least=base + added_least, most=base + added_most, begins=begins,
                 moved=np.concatenate([[False], np.cumsum(uncertain)[:-1] > 0]),
                 budget=max(0, whole - int(added_least.sum())))


def _most_within_budget(runs: _Runs, threshold: int) -> int:
    """The most counted silence (samples) the budget allows: the runs already at the
    threshold, the most runs it can lift to it (the cheapest first; no other choice of as many
    counts more than the longest as many), and the budget itself on top."""
    counted = runs.least >= threshold
    below = np.sort(runs.least[~counted])[::-1]
    lifted = int(np.searchsorted(np.cumsum(threshold - below), runs.budget, side="right"))
    return int(runs.least[counted].sum() + below[:lifted].sum()) + runs.budget


def dead_air_range_ns(content: np.ndarray, chunk_sizes: Sequence[int], gaps: Gaps, *,
                      threshold: int = SILENCE_THRESHOLD) -> tuple[int, int]:
    """The least and the most dead air (:func:`voicelab.metrics.silent_runs_ns` between the
    first and last audible sample) of ``content`` (the response's chunks, joined) played with
    the gaps before each chunk anywhere between ``gaps.least`` and ``gaps.most``."""
    loud = np.flatnonzero(np.abs(content.astype(np.int32)) > threshold)
    if loud.size < 2:
        return 0, 0
    frame = int(_RATE * DEAD_AIR_FRAME_MS / 1000)
    min_frames = int(np.ceil(DEAD_AIR_MIN_RUN_MS / DEAD_AIR_FRAME_MS))
    runs = _silent_runs(loud, chunk_sizes, gaps)
    # the figure's frames start at the first audible sample or one before it (its time
    # rounded to the nanosecond and back): both alignments are allowed for; a run an
    # uncertain gap may move may gain or lose a frame to its alignment
    fixed_least = np.minimum(_frames_inside(runs.begins, runs.least, frame),
                             _frames_inside(runs.begins + 1, runs.least, frame))
    fixed_most = np.maximum(_frames_inside(runs.begins, runs.most, frame),
                            _frames_inside(runs.begins + 1, runs.most, frame))
    frames_least = np.where(runs.moved, np.maximum(0, runs.least // frame - 1), fixed_least)
    frames_most = np.where(runs.moved, runs.most // frame, fixed_most)
    low = int(frames_least[frames_least >= min_frames].sum())
    high = min(int(frames_most[frames_most >= min_frames].sum()),
               _most_within_budget(runs, min_frames * frame) // frame)
    return (low * frame * 1_000_000_000 // _RATE, high * frame * 1_000_000_000 // _RATE)


def _error_ms(low_ns: int, high_ns: int, reported_ms: float) -> float:
    """How far a figure reported as ``reported_ms`` may be from a truth in [low, high]."""
    return round(max(0.0, high_ns / 1e6 - reported_ms, reported_ms - low_ns / 1e6), 3)


@dataclass(frozen=True)
class ResponseTiming:
    """What a response's figures rest on: its placement, the joined samples of its chunks
    (the product stream), the first ``response.done``'s stamp, the listener's buffer and the
    adapter's lead, and each stamp's bound (ns by the stamp's offset; 0: exact)."""

    playback: HeardResponse | None
    product_stream: np.ndarray
    done_offset_ns: int | None
    depth_ns: int
    lead_ns: int
    bound_of: Callable[[int], int]


def _chunk_bounds(chunks: Sequence[HeardChunk], bound_of: Callable[[int], int]) -> np.ndarray:
    return np.asarray([bound_of(chunk.event.offset_ns) for chunk in chunks], dtype=np.int64)


def _stall_error_ms(timing: ResponseTiming, reported_ms: float) -> float:
    playback = timing.playback
    assert playback is not None
    chunks = [chunk for chunk in playback.chunks if not chunk.after_cancel]
    bounds = _chunk_bounds(chunks, timing.bound_of)
    stamps = np.asarray([chunk.event.listener_ns for chunk in chunks], dtype=np.int64)
    durations = np.asarray([samples_to_ns(chunk.event.audio_samples) for chunk in chunks],
                           dtype=np.int64)
    barge = playback.barge_in_ns
    counted = may_count = len(chunks)
    if barge is not None:
        # the chunks stamped before it, and up to the last that may have arrived before it
        # (arrival order is stream order: every chunk before that one arrived before it too)
        counted = int((stamps < barge).sum())
        may_count = int(np.flatnonzero(stamps - bounds < barge)[-1]) + 1 \
            if (stamps - bounds < barge).any() else 0
    low, high = stall_range_ns(stamps, bounds, durations, depth_ns=timing.depth_ns,
                               counted=counted, may_count=max(counted, may_count))
    return _error_ms(low, high, reported_ms)


def _dead_air_error_ms(timing: ResponseTiming, reported_ms: float, every_stamp_ms: float
                       ) -> float:
    playback = timing.playback
    assert playback is not None
    chunks = playback.chunks
    if playback.barge_in_ns is not None or any(c.after_cancel or c.heard != c.event.audio_samples
                                               for c in chunks):
        return every_stamp_ms  # cut at a fixed moment: not a function of the gaps
    bounds = _chunk_bounds(chunks, timing.bound_of)
    if not bounds.any():
        return 0.0
    gaps = placement_gaps(chunks, bounds, lead_ns=timing.lead_ns)
    content = np.concatenate([timing.product_stream[c.event.audio_start:c.event.audio_end]
                              for c in chunks])
    low, high = dead_air_range_ns(content, [c.heard for c in chunks], gaps)
    return _error_ms(low, high, reported_ms)


def _onset_error_ms(timing: ResponseTiming, onset_ms: float) -> float:
    """The largest bound of the chunks up to the one the speech onset plays in."""
    playback = timing.playback
    if playback is None or not playback.chunks:
        return 0.0
    onset = ns_to_samples(int(round(onset_ms * 1e6)))
    upto = [chunk for chunk in playback.chunks if chunk.start <= onset] or playback.chunks[:1]
    return round(float(_chunk_bounds(upto, timing.bound_of).max()) / 1e6, 3)


def figure_error_bounds(figures: Mapping[str, float | None], timing: ResponseTiming, *,
                        every_stamp_ms: float) -> dict[str, float]:
    """Each timing figure's error bound, ms, by its column name (the figures ``figures`` has a
    number for); ``every_stamp_ms``: the largest bound of the response's stamps."""
    bounds: dict[str, float] = {}
    onset = figures.get("speech_start_ms")
    for name in ("response_latency_ms", "speech_start_ms"):
        if figures.get(name) is not None and onset is not None:
            bounds[name] = _onset_error_ms(timing, onset)
    if figures.get("response_duration_ms") is not None:
        bounds["response_duration_ms"] = round(timing.bound_of(timing.done_offset_ns) / 1e6, 3) \
            if timing.done_offset_ns is not None else every_stamp_ms
    stall, dead_air = figures.get("playback_stall_ms"), figures.get("dead_air_ms")
    if stall is not None and timing.playback is not None:
        bounds["playback_stall_ms"] = _stall_error_ms(timing, stall)
    if dead_air is not None and timing.playback is not None:
        bounds["dead_air_ms"] = _dead_air_error_ms(timing, dead_air, every_stamp_ms)
    for name in CUT_FIGURES:
        if figures.get(name) is not None:
            bounds[name] = every_stamp_ms
    return bounds


#: The columns whose bounds :func:`figure_error_bounds` gives (when the row has a number).
BOUNDED_FIGURES = ("response_latency_ms", "speech_start_ms", "response_duration_ms",
                   "playback_stall_ms", "dead_air_ms", *CUT_FIGURES)


def _listener_depth_ns(recording: Recording) -> int:
    started = next(recording.of_type(EventType.TRIAL_STARTED), None)
    listener = (TrialStarted.of(started).listener or {}) if started is not None else {}
    depth = listener.get("jitter_buffer_ms", 0.0)
    return int(float(depth) * 1_000_000) if isinstance(depth, int | float) else 0


def figure_bounds_of(recording: Recording, turns: Sequence[TurnMetrics],
                     bound_of: Callable[[int], int], every_stamp_ms: Mapping[str, float]
                     ) -> dict[str, dict[str, float]]:
    """Each turn's figure bounds (:func:`figure_error_bounds`), by turn id, from the
    recording's placement and each stamp's bound (``bound_of``: offset -> ns);
    ``every_stamp_ms``: each turn's largest stamp bound."""
    done: dict[str, int] = {}
    for event in recording.of_type(EventType.PRODUCT_RESPONSE_DONE):
        if event.source == "product" and event.turn_id:
            done.setdefault(event.turn_id, event.offset_ns)
    product = recording.streams[PRODUCT].samples()
    depth_ns, lead_ns = _listener_depth_ns(recording), recording.timeline.lead_ns
    figures: dict[str, dict[str, float]] = {}
    for turn in turns:
        timing = ResponseTiming(playback=recording.timeline.responses.get(turn.turn_id),
                                product_stream=product, done_offset_ns=done.get(turn.turn_id),
                                depth_ns=depth_ns, lead_ns=lead_ns, bound_of=bound_of)
        figures[turn.turn_id] = figure_error_bounds(
            {name: turn.figure(name) for name in BOUNDED_FIGURES}, timing,
            every_stamp_ms=every_stamp_ms.get(turn.turn_id, 0.0))
    return figures
