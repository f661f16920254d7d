"""How a local product listens in ``server_vad`` mode: voice activity on the user's line.

The line carries speech and, between utterances, silence or room noise. An utterance ends after
``silence_ms`` without speech (the product's end-of-turn detection); while the product is
replying, an utterance with ``interrupt_after_ms`` of speech (onset to its latest voiced frame)
is a barge-in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...audio import StreamingVad

BYTES_PER_SAMPLE = 2


@dataclass(frozen=True)
class TurnDecision:
    """A decision of the ear: ``started`` (speech began), ``interrupted`` (speech long enough to
    stop a reply) or ``ended`` (an utterance is over; ``audio`` is its PCM)."""

    kind: str
    audio: bytes = b""


class TurnDetector:
    """Voice activity on the incoming line, one utterance at a time."""

    def __init__(self, *, silence_ms: float, interrupt_after_ms: float | None):
        self._vad = StreamingVad(hangover_ms=silence_ms)
        self._interrupt_samples = None if interrupt_after_ms is None else \
            int(interrupt_after_ms * 24)  # 24 samples a millisecond at 24 kHz
        self._line = bytearray()
        self._first = 0  # stream sample of self._line[0]
        self._onset: int | None = None
        self._interrupted = False

    def hear(self, pcm: bytes) -> list[TurnDecision]:
        self._line += pcm
        decisions: list[TurnDecision] = []
        for transition in self._vad.push(np.frombuffer(pcm, dtype="<i2")):
            if transition.kind == "onset":
                self._onset = transition.sample
                self._interrupted = False
                decisions.append(TurnDecision("started"))
            elif self._onset is not None:
                start = (self._onset - self._first) * BYTES_PER_SAMPLE
                end = (transition.sample - self._first) * BYTES_PER_SAMPLE
                decisions.append(TurnDecision("ended", bytes(self._line[start:end])))
                self._onset = None
        # the speech heard so far (to its last voiced frame: the pauses the detector bridges
        # inside an utterance count, the silence after its end does not)
        if self._onset is not None and not self._interrupted and \
                self._interrupt_samples is not None and \
                max(self._vad.voiced_until_sample, self._onset) - self._onset \
                >= self._interrupt_samples:
            self._interrupted = True
            decisions.append(TurnDecision("interrupted"))
        if self._onset is None:  # keep only what an utterance may still need
            keep = len(self._line) - min(len(self._line), 48_000 * 2)
            del self._line[:keep]
            self._first += keep // BYTES_PER_SAMPLE
        return decisions
