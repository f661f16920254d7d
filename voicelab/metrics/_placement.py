"""Placing both channels on one listener timeline, from the recorded voice events.

The *listener timeline* is where a person on the call would hear each sound:

* Real monotonic offsets, plus every ``timeline.virtual_advance`` recorded before the event. With
  ``pace_audio: false`` the runner does not sleep; it records the time it would have waited
  (a user turn's speaking time, the product's remaining playback, the wait before a barge-in) as
  a virtual advance instead. With pacing on, advances are (nearly) zero and the timeline is real.
* A user turn plays contiguously from the moment its first chunk was sent.
* Product audio plays in arrival order and never faster than real time: a chunk starts at
  ``max(arrival, end of the previous chunk)``; a later arrival than needed is a playback stall.
* A barge-in flushes the listener's buffer: the interrupted response's audio that arrived before
  the cancel stops at the barge-in point; audio arriving after the cancel still plays, over the
  user, so a product that ignores a cancel is audible in mixed.wav.

Everything here is a pure function of the event records and the audio chunks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._steps import Steps, run_steps
from ..audio import PCM16_MAX, PCM16_MIN, PcmAudio

USER_CHUNK = "user.audio_chunk"
PRODUCT_CHUNK = "product.audio_chunk"
BARGE_IN = "user.barge_in"
VIRTUAL_ADVANCE = "timeline.virtual_advance"


def virtual_offsets(records: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """Listener-timeline offset (ns) of every event, keyed by sequence."""
    advance = 0
    result: dict[int, int] = {}
    for record in records:
        result[record["sequence"]] = record["monotonic_offset_ns"] + advance
        if record["event_type"] == VIRTUAL_ADVANCE:
            advance += int(record["attributes"].get("advance_ns", 0))
    return result


@dataclass(slots=True)
class PlacedChunk:
    """A product chunk on the listener timeline; positions are whole samples at 24 kHz.

    ``pcm`` is the chunk as received (little-endian int16); ``heard`` is how many of its samples
    the listener heard (fewer when a barge-in cut it short).
    """

    sequence: int
    turn_id: str | None
    arrival_ns: int
    start_sample: int
    pcm: bytes
    heard: int
    after_cancel: bool = False

    @property
    def samples(self) -> np.ndarray:
        return np.frombuffer(self.pcm, dtype="<i2", count=self.heard).astype(np.int16, copy=False)

    @property
    def end_sample(self) -> int:
        return self.start_sample + self.heard

    @property
    def start_ns(self) -> int:
        return _samples_to_ns(self.start_sample)

    @property
    def end_ns(self) -> int:
        return _samples_to_ns(self.end_sample)


@dataclass
class ResponsePlayback:
    """How one product response sounded to the listener."""

    turn_id: str
    chunks: list[PlacedChunk] = field(default_factory=list)
    barge_in_ns: int | None = None
    stall_samples: int = 0

    @property
    def stall_ns(self) -> int:
        return _samples_to_ns(self.stall_samples)

    @property
    def start_ns(self) -> int | None:
        return self.chunks[0].start_ns if self.chunks else None

    @property
    def end_ns(self) -> int | None:
        end = max((c.start_sample + c.heard for c in self.chunks
                   if c.heard and not c.after_cancel), default=None)
        return None if end is None else _samples_to_ns(end)


@dataclass
class Placement:
    technician: PcmAudio
    product: PcmAudio
    mixed: PcmAudio
    responses: dict[str, ResponsePlayback]
    user_turn_start_ns: dict[str, int]
    virtual: dict[int, int]
    sample_rate_hz: int = 24_000


_RATE = 24_000
#: Stepwise functions yield after this many records.
STEP_RECORDS = 128


def _samples_to_ns(count: int) -> int:
    return count * 1_000_000_000 // _RATE


def _ns_to_samples(ns: int) -> int:
    return int(ns * _RATE // 1_000_000_000)


def _as_pcm(chunk: bytes | np.ndarray | None) -> bytes:
    """Whole little-endian int16 samples (a trailing odd byte is dropped)."""
    if chunk is None:
        return b""
    if isinstance(chunk, np.ndarray):
        return chunk.astype("<i2", copy=False).tobytes()
    return chunk if len(chunk) % 2 == 0 else chunk[:-1]


# A piece is (start sample, pcm bytes, sample count); the sample count may be shorter than the
# bytes (a chunk cut by a barge-in).
Piece = tuple[int, bytes, int]


def _overlaps(pieces: list[Piece]) -> bool:
    end = -1
    for start, _, count in pieces:  # sorted by start
        if count and start < end:
            return True
        end = max(end, start + count)
    return False


def _render(pieces: list[Piece], total: int) -> np.ndarray:
    """One int16 channel from ``pieces``. Contiguous pieces are joined and copied once; pieces
    that overlap are summed in 32 bits and clipped."""
    ordered = sorted(pieces, key=lambda piece: piece[0])
    if not _overlaps(ordered):
        out = np.zeros(total, dtype=np.int16)
        run: list[bytes] = []
        run_start = run_end = 0
        for start, pcm, count in ordered:
            if not count:
                continue
            if run and start == run_end:
                run.append(pcm if len(pcm) == 2 * count else pcm[:2 * count])
                run_end += count
                continue
            if run:
                out[run_start:run_end] = np.frombuffer(b"".join(run), dtype="<i2")
            run, run_start, run_end = [pcm if len(pcm) == 2 * count else pcm[:2 * count]], \
                start, start + count
        if run:
            out[run_start:run_end] = np.frombuffer(b"".join(run), dtype="<i2")
        return out
    wide = np.zeros(total, dtype=np.int32)
    for start, pcm, count in ordered:
        if count:
            wide[start:start + count] += np.frombuffer(pcm, dtype="<i2", count=count)
    return np.clip(wide, PCM16_MIN, PCM16_MAX).astype(np.int16)


def place_channels(records: Sequence[Mapping[str, Any]], *,
                   user_chunks: Mapping[int, bytes | np.ndarray],
                   product_chunks: Mapping[int, bytes | np.ndarray]) -> Placement:
    """Build technician/product/mixed channels on the listener timeline.

    ``user_chunks`` and ``product_chunks`` map the sequence number of each ``user.audio_chunk``
    / ``product.audio_chunk`` event to its PCM (bytes or int16 samples). Positions are whole
    samples, so contiguous chunks stay exactly contiguous.
    """
    return run_steps(place_channels_steps(records, user_chunks=user_chunks,
                                          product_chunks=product_chunks))


def place_channels_steps(records: Sequence[Mapping[str, Any]], *,
                         user_chunks: Mapping[int, bytes | np.ndarray],
                         product_chunks: Mapping[int, bytes | np.ndarray]) -> Steps[Placement]:
    """:func:`place_channels` in steps (see :mod:`voicelab._steps`)."""
    virtual = virtual_offsets(records)
    user_pieces: list[Piece] = []
    user_turn_start: dict[str, int] = {}
    user_cursor: dict[str, int] = {}
    responses: dict[str, ResponsePlayback] = {}
    product_cursor = 0
    cancelled: set[str] = set()

    for position, record in enumerate(records):
        if position % STEP_RECORDS == STEP_RECORDS - 1:
            yield
        kind = record["event_type"]
        if kind == PRODUCT_CHUNK:
            sequence = record["sequence"]
            pcm = _as_pcm(product_chunks.get(sequence))
            count = len(pcm) // 2
            turn = record.get("turn_id") or "turn-?"
            playback = responses.get(turn)
            if playback is None:
                playback = responses[turn] = ResponsePlayback(turn)
            arrival = virtual[sequence]
            start = max(_ns_to_samples(arrival), product_cursor)
            after_cancel = turn in cancelled
            if playback.chunks and not after_cancel and playback.barge_in_ns is None:
                previous_end = playback.chunks[-1].end_sample
                if start > previous_end:
                    playback.stall_samples += start - previous_end
            playback.chunks.append(PlacedChunk(sequence, turn, arrival, start, pcm, count,
                                               after_cancel))
            product_cursor = start + count
        elif kind == USER_CHUNK:
            sequence = record["sequence"]
            pcm = _as_pcm(user_chunks.get(sequence))
            turn = record.get("turn_id") or "turn-?"
            if turn not in user_cursor:
                user_turn_start[turn] = virtual[sequence]
                user_cursor[turn] = _ns_to_samples(virtual[sequence])
            user_pieces.append((user_cursor[turn], pcm, len(pcm) // 2))
            user_cursor[turn] += len(pcm) // 2
        elif kind == BARGE_IN:
            at_ns = virtual[record["sequence"]]
            at = _ns_to_samples(at_ns)
            target = record["attributes"].get("response_turn_id")
            playback = responses.get(target) if target else None
            if playback is not None:
                playback.barge_in_ns = at_ns
                for chunk in playback.chunks:
                    if chunk.start_sample >= at:
                        chunk.heard = 0
                    elif chunk.end_sample > at:
                        chunk.heard = at - chunk.start_sample
                cancelled.add(target)
            product_cursor = min(product_cursor, at)

    product_pieces = [(c.start_sample, c.pcm, c.heard) for p in responses.values()
                      for c in p.chunks]
    ends = [start + count for start, _, count in user_pieces + product_pieces]
    total = max(ends) + 1 if ends else 0
    yield
    technician = _render(user_pieces, total)
    yield
    product = _render(product_pieces, total)
    yield
    if _overlaps(sorted(user_pieces + product_pieces, key=lambda piece: piece[0])):
        mixed = np.clip(technician.astype(np.int32) + product, PCM16_MIN, PCM16_MAX) \
            .astype(np.int16)
    else:  # at most one channel sounds at any sample: the sum cannot overflow
        mixed = technician + product
    return Placement(PcmAudio(technician), PcmAudio(product), PcmAudio(mixed), responses,
                     user_turn_start, virtual)


def silent_runs_ns(samples: np.ndarray, *, start_ns: int, end_ns: int, min_run_ms: float = 300.0,
                   frame_ms: float = 10.0, threshold: int = 256) -> int:
    """Total length of silent stretches of at least ``min_run_ms`` inside [start_ns, end_ns).

    A 10 ms frame is silent when its peak magnitude is at or below ``threshold`` (the seed's
    silence threshold); stalls are zeros on the listener timeline, so they count too.
    """
    start = max(0, _ns_to_samples(start_ns))
    end = min(samples.shape[0], _ns_to_samples(end_ns))
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
