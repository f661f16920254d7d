"""After a key barge-in: when the prompt the keys went into is over, and from where the reply
to the keys is listened for (docs/ivr.md).

Keys say nothing on the line, so the listener cannot tell the prompt's tail from the next
prompt by who spoke last, as it does after a spoken barge-in. The product's output stays the
prompt's until the prompt is over (:meth:`PromptWatch.stopped`); the reply to the keys is the
speech after what the listener still had of it (:meth:`PromptWatch.reply_from`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..recording import EventType, Recording
from ._heard_speech import HeardSpeech
from ._intake import Intake

#: How often the watch looks again while nothing else wakes it (as the listener does).
WATCH_TICK_SECONDS = 0.02


@dataclass(frozen=True)
class PromptWatch:
    """What the listener heard and received, and ``check``: raises when the call has ended."""

    recording: Recording
    intake: Intake
    heard_speech: HeardSpeech
    check: Callable[[], None]

    async def stopped(self, response_turn: str, *, pressed_ns: int, deadline_ns: int) -> None:
        """Wait until the prompt ``response_turn`` the keys barged into is over: the wire
        says the product stopped it (an interruption, e.g. Twilio's ``clear``), or the
        listener hears no speech (none since the reply-end hangover: a prompt that ended just
        before the keys is over at once); at most until ``deadline_ns`` (listener ns)."""
        while True:
            self.check()
            now = self.recording.listener_now_ns()
            self.heard_speech.listen_until(now)
            response = self.intake.response_for(response_turn)
            if response is not None and any(
                    event.type == EventType.PRODUCT_INTERRUPTION
                    and event.listener_ns >= pressed_ns for event in response.events):
                return
            if not self.heard_speech.vad.in_speech or now >= deadline_ns:
                return
            await self.intake.wait_signal(WATCH_TICK_SECONDS)

    async def reply_from(self, turn_id: str, *, deadline_ns: int) -> int:
        """Where the reply to the keys (turn ``turn_id``) is listened for from: once the
        listener's voice activity has closed the prompt's speech, the end of what it had of
        the prompt; when the product's answer arrives first (within the hangover), the
        answer's start."""
        while True:
            self.check()
            now = self.recording.listener_now_ns()
            self.heard_speech.listen_until(now)
            if not self.heard_speech.vad.in_speech or now >= deadline_ns:
                return max(now, self.recording.timeline.cursor_ns)
            response = self.intake.response_for(turn_id)
            playback = self.intake.playback(response) if response is not None else None
            if playback is not None and playback.start_ns is not None:
                return playback.start_ns
            await self.intake.wait_signal(WATCH_TICK_SECONDS)
