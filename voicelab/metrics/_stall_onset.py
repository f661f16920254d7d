"""A reply's speech onset when the product stalled right after its first sound.

The onset ``response_latency_ms`` ends at is voice activity on the placed product channel
(:func:`~._voice.speech_segments_ns`): a segment starts at a run of voiced frames that sounds at
least 30 ms. A product that sends its first packet (20 ms: the first syllable's start) and then
stalls (no packets; the listener's buffer runs dry and plays silence) gives a blip too short to
start a segment, then silence, then the rest of the reply. Voice activity then starts the reply
*after* the stall: the latency would hide the product's stall inside itself (25-130 ms measured
on a loaded machine) while the user heard the first syllable before it.

The user hears the reply begin at its first audible sample; the gap is the product's, and is
counted where gaps are (``playback_stall_ms``: what the listener's jitter buffer could not
absorb of it; ``dead_air_ms``: silences from 300 ms). So the onset moves back across such a
stall to the first audible sample before it, when all of these hold:

* the stall is a gap of at least :data:`MIN_STALL_MS` between two consecutive chunks of the
  reply on the listener timeline (a packet that arrived after everything before it had played),
  before any barge-in, and the channel is silent across it;
* the speech voice activity found starts right after it, and the sound before it runs right up
  to it: the quiet on both sides of the stall, the stall itself left out, is shorter than
  ``AUDIBLE_BRIDGE_SECONDS`` (the gap :func:`~voicelab.audio.audible_edges` bridges inside a
  sound): the stall cut a sound short, it did not fall in a pause;
* that sound is not the end of the speech before it (a previous segment, the user's speech, an
  earlier reply): it starts after them.

Repeated for a second stall before the first (packet, stall, packet, stall, speech). A reply
without such a stall keeps its onset to the nanosecond, so bundles recorded before re-score to
the same bytes.
"""

from __future__ import annotations

import numpy as np

from ..audio import (
    AUDIBLE_BRIDGE_SECONDS,
    CANONICAL_SAMPLE_RATE_HZ,
    SILENCE_THRESHOLD,
    audible_edges,
)
from ..recording import HeardResponse, ns_to_samples, samples_to_ns

#: A gap between a reply's chunks shorter than this is the arrival jitter the listener's
#: playback absorbs sample by sample, not a stall the onset moves across.
MIN_STALL_MS = 10.0
_BRIDGE = int(round(AUDIBLE_BRIDGE_SECONDS * CANONICAL_SAMPLE_RATE_HZ))
_MIN_STALL = int(MIN_STALL_MS * CANONICAL_SAMPLE_RATE_HZ / 1000)

Stall = tuple[int, int]  # [start, end) in samples on the listener timeline


def reply_stalls(playback: HeardResponse | None) -> list[Stall]:
    """The stalls of one reply's playback, in order: gaps of at least :data:`MIN_STALL_MS`
    between consecutive chunks heard whole, before any barge-in (after one, a gap is the
    product stopping, not a stall)."""
    if playback is None:
        return []
    barge = ns_to_samples(playback.barge_in_ns) if playback.barge_in_ns is not None else None
    stalls: list[Stall] = []
    previous = None
    for chunk in playback.chunks:
        if chunk.after_cancel or not chunk.heard or (barge is not None and chunk.start >= barge):
            break
        if previous is not None and chunk.start - previous >= _MIN_STALL:
            stalls.append((previous, chunk.start))
        previous = chunk.end
    return stalls


def onset_across_stalls(samples: np.ndarray, onset_ns: int, stalls: list[Stall], *,
                        after_ns: int, from_ns: int) -> int:
    """``onset_ns`` (a speech segment's start on the placed product channel ``samples``) moved
    back across the ``stalls`` it follows to the first audible sample before them (see the
    module docstring); ``onset_ns`` itself when none applies. ``after_ns``: where the speech
    before it ends (a sound that begins within a bridge of it is that speech's tail);
    ``from_ns``: where the reply begins (the onset never moves before it)."""
    after = _sample_at(after_ns) if after_ns > 0 else None
    low = max(0, _sample_at(from_ns), after or 0)
    onset = _sample_at(onset_ns)
    moved = None
    for start, end in reversed(stalls):
        if end > onset:
            continue
        quiet_after = onset - end
        if quiet_after > _BRIDGE or start <= low:
            break
        before = _sound_before(samples, start, budget=_BRIDGE - quiet_after, low=low)
        if before is None or np.any(np.abs(samples[start:end].astype(np.int32))
                                    > SILENCE_THRESHOLD):
            break
        first, _ = audible_edges(samples, before, before + 1, low=low)
        if after is not None and first - after <= _BRIDGE:  # the tail of the speech before
            break
        onset = moved = first
    return onset_ns if moved is None else samples_to_ns(moved)


def _sample_at(ns: int) -> int:
    """The sample a listener-timeline moment names (the inverse of ``samples_to_ns``, which
    rounds down: ``ns_to_samples`` of its result is the sample before)."""
    return -(-ns * CANONICAL_SAMPLE_RATE_HZ // 1_000_000_000)


def _sound_before(samples: np.ndarray, stall_start: int, *, budget: int, low: int) -> int | None:
    """The last audible sample at most ``budget`` samples before ``stall_start`` (None: the
    sound before the stall ended earlier than that, or there is none)."""
    begin = max(low, stall_start - budget)
    loud = np.flatnonzero(np.abs(samples[begin:stall_start].astype(np.int32))
                          > SILENCE_THRESHOLD)
    return begin + int(loud[-1]) if loud.size else None
