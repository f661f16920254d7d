"""The listener's playback as adapters see it (:class:`voicelab.endpoints.Playback`)."""

from __future__ import annotations

import asyncio

from ..recording import Recording, samples_to_ns

#: How often a wait for playback looks again while the audio has not arrived.
POLL_SECONDS = 0.01


class PlaybackClock:
    """``until_played`` on a trial's recording: the listener places every product chunk as it
    is recorded, so the moment sample N of the product's audio plays is known once it arrived."""

    def __init__(self, recording: Recording):
        self.recording: Recording | None = recording

    def release(self) -> None:
        """The call is over: forget the recording. An adapter keeps its context (and so this
        object) as long as it lives, and an adapter in a reference cycle lives until the
        garbage collector's next full pass: the trial's audio must not wait for it."""
        self.recording = None

    def played_at_ns(self, samples: int) -> int | None:
        """Listener time at which the first ``samples`` product samples have played (None: not all
        of them have arrived yet, or the call is over)."""
        if samples <= 0:
            return 0
        if self.recording is None:
            return None
        last = samples - 1
        for chunk in reversed(self.recording.timeline.heard):
            begin = chunk.event.audio_start
            if begin <= last < begin + chunk.event.audio_samples:
                # audio a flush cut off never plays: it is "played" when it was dropped
                return samples_to_ns(chunk.start + min(last - begin + 1, chunk.heard))
            if begin + chunk.event.audio_samples <= last:
                return None
        return None

    async def until_played(self, samples: int) -> None:
        while self.recording is not None:
            at = self.played_at_ns(samples)
            now = self.recording.listener_now_ns()
            if at is not None and now >= at:
                return
            await asyncio.sleep(POLL_SECONDS if at is None else max(0.0, (at - now) / 1e9))
