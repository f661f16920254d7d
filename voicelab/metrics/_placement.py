"""Both channels on the listener timeline, rendered from a recording.

Where each product chunk plays is the recording's listener clock (:mod:`voicelab.recording`,
computed once, as the audio arrived); a user turn plays contiguously from the moment its first
chunk was sent, and a live line (``server_vad``) is one contiguous stream from its first frame. This module only renders: ``user.wav``, ``product.wav`` and ``mixed.wav``
of the bundle, and the silent runs the dead-air metric counts. Everything here is a pure
function of the recording.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._steps import Steps, run_steps
from ..audio import CANONICAL_SAMPLE_RATE_HZ, PCM16_MAX, PCM16_MIN, SILENCE_THRESHOLD, PcmAudio
from ..recording import (
    PRODUCT,
    USER,
    EventType,
    HeardResponse,
    Recording,
    UserAudio,
    ns_to_samples,
    samples_to_ns,
)

_RATE = CANONICAL_SAMPLE_RATE_HZ
#: Stepwise functions yield after this many events.
STEP_EVENTS = 128
#: Dead air: silent runs at least this long, counted in whole frames of this length.
DEAD_AIR_MIN_RUN_MS = 300.0
DEAD_AIR_FRAME_MS = 10.0


@dataclass
class Placement:
    user: PcmAudio
    product: PcmAudio
    mixed: PcmAudio
    responses: dict[str, HeardResponse]
    user_turn_start_ns: dict[str, int]
    sample_rate_hz: int = _RATE


# A piece is (start sample on the listener timeline, samples).
Piece = tuple[int, np.ndarray]


def _overlapping(pieces: list[Piece]) -> bool:
    end = -1
    for start, samples in sorted(pieces, key=lambda piece: piece[0]):
        if samples.size and start < end:
            return True
        end = max(end, start + samples.size)
    return False


def _render(pieces: list[Piece], total: int) -> np.ndarray:
    """One int16 channel from ``pieces``; overlapping pieces are summed in 32 bits and clipped."""
    if not _overlapping(pieces):
        out = np.zeros(total, dtype=np.int16)
        for start, samples in pieces:
            out[start:start + samples.size] = samples
        return out
    wide = np.zeros(total, dtype=np.int32)
    for start, samples in pieces:
        wide[start:start + samples.size] += samples
    return np.clip(wide, PCM16_MIN, PCM16_MAX).astype(np.int16)


def place_channels(recording: Recording) -> Placement:
    """Render the user, product and mixed channels of ``recording`` on the listener timeline."""
    return run_steps(place_channels_steps(recording))


def place_channels_steps(recording: Recording) -> Steps[Placement]:
    """:func:`place_channels` in steps (see :mod:`voicelab._steps`)."""
    user_stream = recording.streams[USER].samples()
    product_stream = recording.streams[PRODUCT].samples()
    user_pieces: list[Piece] = []
    turn_start: dict[str, int] = {}
    cursor: dict[str, int] = {}
    for position, event in enumerate(recording.events):
        if position % STEP_EVENTS == STEP_EVENTS - 1:
            yield
        if event.type is not EventType.USER_AUDIO:
            continue
        turn = event.turn_id or "turn-?"
        burst = "line" if UserAudio.of(event).line else turn  # what plays contiguously
        if burst not in cursor:
            cursor[burst] = ns_to_samples(event.listener_ns)
        if turn not in turn_start:
            turn_start[turn] = samples_to_ns(cursor[burst])
        user_pieces.append((cursor[burst], user_stream[event.audio_start:event.audio_end]))
        cursor[burst] += event.audio_samples
    responses = recording.timeline.responses
    product_pieces: list[Piece] = [
        (chunk.start, product_stream[chunk.event.audio_start:
                                     chunk.event.audio_start + chunk.heard])
        for playback in responses.values() for chunk in playback.chunks if chunk.heard]
    ends = [start + samples.size for start, samples in user_pieces + product_pieces]
    total = max(ends) + 1 if ends else 0
    yield
    user = _render(user_pieces, total)
    yield
    product = _render(product_pieces, total)
    yield
    if _overlapping(user_pieces + product_pieces):
        mixed = np.clip(user.astype(np.int32) + product, PCM16_MIN, PCM16_MAX) \
            .astype(np.int16)
    else:  # at most one channel sounds at any sample: the sum cannot overflow
        mixed = user + product
    return Placement(PcmAudio(user), PcmAudio(product), PcmAudio(mixed), responses,
                     turn_start)


def audible_extent_ns(samples: np.ndarray, *, start_ns: int, end_ns: int,
                      threshold: int = SILENCE_THRESHOLD) -> tuple[int, int] | None:
    """The first audible sample in [start_ns, end_ns) and the end of the last (ns on the
    channel's timeline): a sample is audible when its magnitude is above ``threshold`` (the
    seed's silence threshold, -42 dBFS: the same line ``silence_ratio`` draws). None: silence."""
    start = max(0, ns_to_samples(start_ns))
    end = min(samples.shape[0], ns_to_samples(end_ns))
    if end <= start:
        return None
    loud = np.flatnonzero(np.abs(samples[start:end].astype(np.int32)) > threshold)
    if not loud.size:
        return None
    return samples_to_ns(start + int(loud[0])), samples_to_ns(start + int(loud[-1]) + 1)


def audible_ns(samples: np.ndarray, *, start_ns: int, end_ns: int, bridge_ms: float = 10.0,
               threshold: int = SILENCE_THRESHOLD) -> int:
    """How much of [start_ns, end_ns) is audible, to the sample: the stretches from an audible
    sample (above ``threshold``) to the last one before a gap longer than ``bridge_ms`` (the
    quiet samples around a waveform's zero crossings are part of a sound)."""
    start = max(0, ns_to_samples(start_ns))
    end = min(samples.shape[0], ns_to_samples(end_ns))
    if end <= start:
        return 0
    loud = np.flatnonzero(np.abs(samples[start:end].astype(np.int32)) > threshold)
    if not loud.size:
        return 0
    breaks = np.flatnonzero(np.diff(loud) > int(_RATE * bridge_ms / 1000))
    firsts = np.concatenate([loud[:1], loud[breaks + 1]])
    lasts = np.concatenate([loud[breaks], loud[-1:]])
    return samples_to_ns(int((lasts - firsts + 1).sum()))


def silent_runs_ns(samples: np.ndarray, *, start_ns: int, end_ns: int,
                   min_run_ms: float = DEAD_AIR_MIN_RUN_MS, frame_ms: float = DEAD_AIR_FRAME_MS,
                   threshold: int = SILENCE_THRESHOLD) -> int:
    """Total length of silent stretches of at least ``min_run_ms`` inside [start_ns, end_ns).

    A 10 ms frame is silent when its peak magnitude is at or below ``threshold`` (the seed's
    silence threshold); stalls are zeros on the listener timeline, so they count too.
    """
    start = max(0, ns_to_samples(start_ns))
    end = min(samples.shape[0], ns_to_samples(end_ns))
    if end <= start:
        return 0
    frame = max(1, int(_RATE * frame_ms / 1000))
    window = np.abs(samples[start:end].astype(np.int32))
    count = window.shape[0] // frame
    if count == 0:
        return 0
    peaks = window[: count * frame].reshape(count, frame).max(axis=1)
    silent = np.concatenate([[0], (peaks <= threshold).astype(np.int8), [0]])
    edges = np.diff(silent)
    run_starts = np.flatnonzero(edges == 1)
    run_ends = np.flatnonzero(edges == -1)
    lengths = run_ends - run_starts
    min_frames = int(np.ceil(min_run_ms / frame_ms))
    total_frames = int(lengths[lengths >= min_frames].sum())
    return total_frames * frame * 1_000_000_000 // _RATE
