"""Selectivity probes and the speakerphone echo on the live line (``server_vad``).

A *probe* is a sound the simulated user's line carries into the product's speech on purpose:
a backchannel ("mm-hmm": the product should keep talking), an interruption (it should stop) or
a noise (a door, a phone ring: it should keep talking). The line records the exact moments its
first and last audible samples were sent (``probe.started`` / ``probe.ended``, with the probe's
kind and the reply it was aimed at); what the product did about it is measured afterwards from
the recording (:mod:`voicelab.metrics._selectivity`).

The echo (:class:`LineEcho`) leaks what the user *heard* of the product back into the line, as
a speakerphone would: the frame the line sends at time ``T`` carries the echo of what the
listener heard during ``[T - delay - frame, T - delay)`` through the seeded room impulse
response (:mod:`voicelab.audio._echo`), so every echo sample is sent at least ``delay_ms``
after it was heard (at most one frame more): causal, on the live line, in real time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..audio import CANONICAL_SAMPLE_RATE_HZ, SILENCE_THRESHOLD, EchoPath
from ..config import EchoConfig, NoiseProbe
from ..recording import EnvironmentEcho, EventType, ProbeMarked, Recording
from ._heard_speech import HeardSpeech

_RATE = CANONICAL_SAMPLE_RATE_HZ


@dataclass
class ProbeMark:
    """Where a probe's sound is inside its utterance, and what to record about it."""

    probe_id: str
    kind: str  # backchannel | noise | interruption
    response_turn_id: str
    start_sample: int  # first audible sample, in the utterance's audio
    end_sample: int  # after the last audible sample
    #: what else is recorded with its start and end (a ``ProbeMarked``'s other fields)
    details: dict[str, str | int | float] = field(default_factory=dict)
    started_ns: int | None = None
    ended_ns: int | None = None

    def mark(self, recording: Recording, turn_id: str | None, *, begin: int, end: int,
             sent_ns: int) -> None:
        """Record the probe's start and end if they fall in the frame ``[begin, end)`` of the
        utterance, sent at ``sent_ns`` (same rules as the user's speech moments)."""
        common: dict[str, Any] = {"probe_id": self.probe_id, "kind": self.kind,
                                  "response_turn_id": self.response_turn_id, **self.details}
        if self.started_ns is None and begin <= self.start_sample < end:
            lead_ns = (self.start_sample - begin) * 1_000_000_000 // _RATE
            self.started_ns = sent_ns + lead_ns
            # the frame carries its samples at once: the product can hear the probe from the
            # frame's send time, ``frame_lead_ms`` before its onset
            recording.record(EventType.PROBE_STARTED,
                             ProbeMarked(frame_lead_ms=round(lead_ns / 1e6, 3), **common),
                             source="evaluator", direction="outbound", at_ns=self.started_ns,
                             turn_id=turn_id)
        if self.ended_ns is None and begin < self.end_sample <= end:
            self.ended_ns = sent_ns + (self.end_sample - begin) * 1_000_000_000 // _RATE
            recording.record(EventType.PROBE_ENDED, ProbeMarked(**common),
                             source="evaluator", direction="outbound", at_ns=self.ended_ns,
                             turn_id=turn_id)


def audible_bounds(samples: np.ndarray) -> tuple[int, int]:
    """First audible sample and the sample after the last (above the silence threshold);
    ``(0, len)`` for a sound that never rises above it."""
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SILENCE_THRESHOLD)
    if not loud.size:
        return 0, int(samples.shape[0])
    return int(loud[0]), int(loud[-1]) + 1


def noise_probes_for(probes: list[NoiseProbe], reply_number: int) -> list[tuple[int, NoiseProbe]]:
    """The environment's noise probes aimed at the ``reply_number``-th reply (from 1)."""
    return [(index, probe) for index, probe in enumerate(probes)
            if probe.on_reply == reply_number]


def noise_sound(sound: np.ndarray, volume: float) -> np.ndarray:
    """A probe's sound at its volume, as int16."""
    return np.clip(np.rint(sound.astype(np.float64) * volume), -32768, 32767).astype(np.int16)


class LineEcho:
    """The speakerphone echo the line adds to each frame (see the module docstring)."""

    def __init__(self, config: EchoConfig, *, heard_speech: HeardSpeech, seed: int):
        self.config = config
        self.seed = config.rir.seed if config.rir.seed is not None else seed
        self.path = EchoPath.speakerphone(rt60_ms=config.rir.rt60_ms,
                                          lowpass_hz=config.rir.lowpass_hz,
                                          echo_return_loss_db=config.echo_return_loss_db,
                                          seed=self.seed)
        self.delay_samples = int(round(config.delay_ms * _RATE / 1000))
        self.heard_speech = heard_speech
        heard_speech.taps.append(self._heard)
        self._buffer = np.zeros(0)
        self._buffer_start = 0  # listener sample of _buffer[0]
        self._cursor: int | None = None  # the next heard sample to convolve
        self._line_start = 0  # listener sample of the line's first frame

    def describe(self, frame_samples: int) -> EnvironmentEcho:
        """The echo path as recorded (``environment.echo``)."""
        return EnvironmentEcho(
            delay_ms=self.config.delay_ms, echo_return_loss_db=self.config.echo_return_loss_db,
            rt60_ms=self.config.rir.rt60_ms, lowpass_hz=self.config.rir.lowpass_hz,
            rir_seed=self.seed, rir_samples=int(self.path.impulse.shape[0]),
            frame_ms=round(frame_samples * 1000 / _RATE, 3))

    def start(self, listener_now_ns: int) -> None:
        self._line_start = listener_now_ns * _RATE // 1_000_000_000

    def _heard(self, position: int, samples: np.ndarray) -> None:
        if position != self._buffer_start + self._buffer.shape[0]:
            raise RuntimeError("the echo path missed heard audio")  # HeardSpeech feeds contiguously
        self._buffer = np.concatenate([self._buffer, samples.astype(np.float64)])

    def _take(self, start: int, end: int) -> np.ndarray:
        """Heard samples ``[start, end)`` (silence before the call and where nothing is heard
        yet); forgets what comes before ``end``."""
        out = np.zeros(max(0, end - start))
        lo, hi = max(start, self._buffer_start), min(end, self._buffer_start
                                                     + self._buffer.shape[0])
        if hi > lo:
            out[lo - start:hi - start] = self._buffer[lo - self._buffer_start:
                                                      hi - self._buffer_start]
        keep = max(0, min(end, self._buffer_start + self._buffer.shape[0]) - self._buffer_start)
        self._buffer = self._buffer[keep:]
        self._buffer_start += keep
        return out

    def for_frame(self, index: int, frame_samples: int) -> np.ndarray:
        """The echo to add to line frame ``index``."""
        end = self._line_start + index * frame_samples - self.delay_samples
        start = end - frame_samples
        if end > 0:  # hear everything up to ``end`` (it is in the past: the frame is due now)
            self.heard_speech.listen_until(-(-end * 1_000_000_000 // _RATE))
        if self._cursor is None:
            self._cursor = start
        elif self._cursor < start:  # frames skipped: keep the room's state continuous
            self.path.process(self._take(self._cursor, start))
        self._cursor = end
        return self.path.process(self._take(start, end))
