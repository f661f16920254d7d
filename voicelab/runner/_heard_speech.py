"""What the simulated user hears of the product, as it plays: voice activity on the listener
timeline (listening turn-taking decides from this when a reply has ended).

An onset is where the product's sound becomes audible (the detector's onset frame followed back
to its first sample above the silence threshold: ``voicelab.audio.audible_edges``, as the
metrics find speech), so a timed barge-in is timed from what the user could hear.

The product's chunks are heard where the recording's listener placed them; a stretch with no
audio (the product sent nothing, or not yet) is silence to the listener, exactly as on a call.
The detector is only ever fed up to "now", so a barge-in that flushes buffered audio never
un-hears anything. With a ``to_user`` line (a :class:`~._channel.ToUserLine`) the detector hears
the line's output: coded, with lost packets concealed, a packet and the codec's delay behind, and
the line's constant path delay later: at listener time ``t`` the user has heard the product up
to ``t - delay``, and the speech segments are on the user's own (heard) timeline.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..audio import StreamingVad, audible_edges
from ..recording import PRODUCT, Recording, ns_to_samples, samples_to_ns
from ._channel import ToUserLine

#: How much of the latest heard audio is kept to refine onsets (1 s).
RECENT_SAMPLES = 24_000


class HeardSpeech:
    """The product's speech as the simulated user has heard it so far (see the module
    docstring)."""

    def __init__(self, recording: Recording, *, hangover_ms: float,
                 to_user_line: ToUserLine | None = None):
        self.recording = recording
        self.to_user_line = to_user_line
        self.vad = StreamingVad(hangover_ms=hangover_ms)
        self.position = 0  # listener samples fed to the detector
        self._next_chunk = 0
        #: (onset, offset or None) of every speech segment heard, in listener samples
        self.segments: list[list[int | None]] = []
        #: called with (listener sample, samples) for everything heard, in order (the echo)
        self.taps: list[Callable[[int, np.ndarray], None]] = []
        self._heard_samples = 0
        #: the latest heard audio (to follow an onset back to its first audible sample): the
        #: first ``_kept`` samples of a buffer twice as long as what is kept, moved down once
        #: it fills (one copy a second, not one a feed)
        self._buffer = np.zeros(2 * RECENT_SAMPLES, dtype=np.int16)
        self._kept = 0
        #: the arrival stamp (monotonic ns) of the oldest product packet the adapter holds but
        #: has not delivered yet (None: none waits), for an adapter that says so
        #: (``ReportsReceiveBacklog``). Nothing is heard from there on until it is recorded: its
        #: audio is placed at its arrival, and silence already heard in its place would hide it
        #: (a busy loop delivering a whole greeting late, all of it in the past, was never
        #: heard; one delivering it in bursts had its gaps heard as the reply's end)
        self.backlog: Callable[[], int | None] | None = None
        #: the listener time heard up to at the last :meth:`listen_until` (earlier than asked
        #: while a backlog waits): how long the product has been heard to say nothing
        self.heard_until_ns = 0

    def listen_until(self, listener_ns: int) -> None:
        """Feed everything heard up to ``listener_ns`` (silence where nothing plays): the
        product's sound up to the path delay before it."""
        line = self.to_user_line
        self.heard_until_ns = self._delivered_until(listener_ns)
        target = ns_to_samples(self.heard_until_ns) - (line.delay_samples if line else 0)
        heard = self.recording.timeline.heard
        stream = self.recording.streams[PRODUCT]
        while self._next_chunk < len(heard) and heard[self._next_chunk].start < target:
            chunk = heard[self._next_chunk]
            if chunk.start + chunk.heard <= self.position:  # cut by a barge-in, or already fed
                self._next_chunk += 1
                continue
            if chunk.start > self.position:
                self._feed(np.zeros(chunk.start - self.position, dtype=np.int16))
            begin = self.position - chunk.start
            end = min(chunk.heard, target - chunk.start)
            self._feed(stream.samples(chunk.event.audio_start + begin, end - begin),
                       chunk.event.turn_id)
            if chunk.start + chunk.heard > target:
                return  # the rest of this chunk plays later
            self._next_chunk += 1
        if target > self.position:
            self._feed(np.zeros(target - self.position, dtype=np.int16))

    def _delivered_until(self, listener_ns: int) -> int:
        """``listener_ns``, or earlier: where the adapter's oldest undelivered packet plays."""
        waiting = self.backlog() if self.backlog is not None else None
        if waiting is None:
            return listener_ns
        recording = self.recording
        plays_ns = recording.offset_of(waiting) + recording.shift_ns - recording.timeline.lead_ns
        return min(listener_ns, plays_ns)

    def _feed(self, samples: np.ndarray, turn_id: str | None = None) -> None:
        if not samples.shape[0]:
            return
        self.position += samples.shape[0]
        if self.to_user_line is not None:
            samples = self.to_user_line.hear(samples, turn_id=turn_id)
        for tap in self.taps:  # heard sample k is listener sample k (the line's delay in it)
            tap(self._heard_samples, samples)
        self._heard_samples += samples.shape[0]
        self._keep(samples)
        for transition in self.vad.push(samples):
            if transition.kind == "onset":
                self.segments.append([self._audible_onset(transition.sample), None])
            elif self.segments:
                self.segments[-1][1] = transition.sample

    def _keep(self, samples: np.ndarray) -> None:
        if samples.shape[0] >= RECENT_SAMPLES:  # what is kept is all in this stretch
            samples, self._kept = samples[-RECENT_SAMPLES:], 0
        if self._kept + samples.shape[0] > self._buffer.shape[0]:
            keep = RECENT_SAMPLES - samples.shape[0]
            self._buffer[:keep] = self._buffer[self._kept - keep:self._kept]
            self._kept = keep
        self._buffer[self._kept:self._kept + samples.shape[0]] = samples
        self._kept += samples.shape[0]

    def _audible_onset(self, sample: int) -> int:
        recent = self._buffer[:self._kept]
        recent_start = self._heard_samples - self._kept
        previous = self.segments[-1][1] if self.segments else None
        low = max(0, (previous or 0) - recent_start)
        if sample < recent_start:
            return sample
        start, _ = audible_edges(recent, sample - recent_start, sample - recent_start, low=low)
        return recent_start + start

    def first_onset_ns(self, listener_ns: int) -> int | None:
        """When the product was first heard speaking at or after ``listener_ns``: the onset of
        the first speech after it, or ``listener_ns`` itself when speech that began earlier was
        still going on (a product talking on over the user). None: no speech yet."""
        at = ns_to_samples(listener_ns)
        for onset, offset in self.segments:
            assert onset is not None
            if offset is None or offset > at:
                return samples_to_ns(max(onset, at))
        return None

    def spoke_after(self, listener_ns: int) -> bool:
        """Speech was heard at or after ``listener_ns``."""
        return self.first_onset_ns(listener_ns) is not None

    def reply_over(self, after_ns: int) -> bool:
        """Speech was heard after ``after_ns`` and has ended (its offset confirmed by the
        hangover)."""
        return self.spoke_after(after_ns) and not self.vad.in_speech and \
            self.segments[-1][1] is not None

    def speech_heard_ns(self, after_ns: int) -> int:
        """How much speech has been heard since ``after_ns``."""
        at = ns_to_samples(after_ns)
        total = 0
        for onset, offset in self.segments:
            assert onset is not None
            end = offset if offset is not None else self.position
            total += max(0, end - max(onset, at))
        return samples_to_ns(total)
