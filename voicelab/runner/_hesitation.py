"""A hesitation turn's clean speech: its pieces said one after another with silence between.

Each piece is synthesized on its own; the silence a synthesizer leaves after a piece's last
audible sample and before the next piece's first is taken out, so each pause is exactly its
configured length of silence between audible speech (the environment is mixed over the whole
turn afterwards, so room noise continues through the pause as it would on a phone line). The
first piece keeps its leading silence and the last its trailing silence, as a turn said in one
go does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..audio import CANONICAL_SAMPLE_RATE_HZ, SILENCE_THRESHOLD, PcmAudio

#: A pause as (first silent sample, first sample of the next piece) in the turn's clean audio.
PauseSpan = tuple[int, int]


def _audible(samples: np.ndarray) -> tuple[int, int]:
    """The first audible sample and the end of the last (the whole buffer when it is silent)."""
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SILENCE_THRESHOLD)
    if not loud.size:
        return 0, samples.shape[0]
    return int(loud[0]), int(loud[-1]) + 1


def join_with_pauses(pieces: Sequence[PcmAudio], pauses_seconds: Sequence[float], *,
                     max_samples: int | None = None
                     ) -> tuple[PcmAudio, tuple[PauseSpan, ...]]:
    """The pieces joined with ``pauses_seconds[i]`` of silence after piece ``i``, and where each
    pause lies in the result (samples). ``max_samples``: the result ends there (the trial's time
    limit): nothing past it is made, and the turn is written once into its final buffer (no
    joined copies, no wider samples)."""
    if len(pieces) != len(pauses_seconds) + 1:
        raise ValueError(f"{len(pieces)} pieces need {len(pieces) - 1} pauses, "
                         f"got {len(pauses_seconds)}")
    kept: list[np.ndarray] = []
    gaps: list[int] = []
    last = len(pieces) - 1
    for index, piece in enumerate(pieces):
        if piece.sample_rate_hz != CANONICAL_SAMPLE_RATE_HZ:
            raise ValueError(f"a piece of speech is at {piece.sample_rate_hz} Hz, not the "
                             f"canonical {CANONICAL_SAMPLE_RATE_HZ} Hz")
        samples = piece.samples
        first, end = _audible(samples)
        kept.append(samples[0 if index == 0 else first:samples.shape[0] if index == last else end])
        if index < last:
            gaps.append(int(round(pauses_seconds[index] * CANONICAL_SAMPLE_RATE_HZ)))
    total = sum(part.shape[0] for part in kept) + sum(gaps)
    length = total if max_samples is None else max(0, min(total, max_samples))
    joined = np.zeros(length, dtype=np.int16)  # the pauses are its zeros
    spans: list[PauseSpan] = []
    position = 0
    for index, part in enumerate(kept):
        if position >= length:
            break
        take = min(part.shape[0], length - position)
        joined[position:position + take] = part[:take]
        position += part.shape[0]
        if index < last and (position < length or length == total):
            spans.append((position, min(position + gaps[index], length)))
        position += gaps[index] if index < last else 0
    return PcmAudio(joined), tuple(spans)
