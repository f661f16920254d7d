"""The speaking agent behind the double: it greets, listens to the caller with voice activity
detection (an utterance ends after ``vad_silence_ms`` of silence), answers each utterance after
``reply_latency_ms``, and stops when the caller talks over it for ``barge_in_after_ms``.

It speaks and reports through a :class:`CallSide` (the call it belongs to), so the same agent
serves ``mode: agent`` from the answer on and ``mode: ivr`` once a caller reaches it.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import numpy as np
from pydantic import JsonValue

from ...audio import G711_SAMPLE_RATE_HZ, StreamingVad
from ._media import Utterance
from ._settings import SipDoubleSettings

SAMPLES_PER_MS = G711_SAMPLE_RATE_HZ // 1000


class CallSide(Protocol):
    """What a call offers the agent and the IVR."""

    settings: SipDoubleSettings

    def note(self, kind: str, **details: JsonValue) -> None: ...

    def say(self, kind: str, label: str, text: str) -> Utterance: ...

    def stop_speaking(self, why: str) -> list[Utterance]: ...

    @property
    def speaking(self) -> Utterance | None: ...

    def hang_up(self, why: str) -> None: ...


class Agent:
    """One call's agent: :meth:`greet` once, then :meth:`hear` every audio packet."""

    def __init__(self, call: CallSide):
        self.call = call
        self.settings = call.settings
        self.vad = StreamingVad(sample_rate_hz=G711_SAMPLE_RATE_HZ,
                                hangover_ms=self.settings.vad_silence_ms)
        self.barge_in_samples = int(self.settings.barge_in_after_ms * SAMPLES_PER_MS)
        self.onset: int | None = None
        self.barged = False
        self.utterances = 0
        self.replies_played = 0
        self._pending: asyncio.TimerHandle | None = None

    def greet(self) -> None:
        if self.settings.greeting:
            self._say(0, self.settings.greeting)

    def hear(self, samples: np.ndarray) -> None:
        """The caller's next audio (8 kHz, decoded), in arrival order."""
        for transition in self.vad.push(samples):
            if transition.kind == "onset":
                self.onset, self.barged = transition.sample, False
                self.call.note("caller_speech_started")
            else:
                self.onset = None
                self.utterances += 1
                self.call.note("caller_speech_ended", utterance=self.utterances)
                self._answer_later(self.utterances)
        speaking = self.call.speaking
        if self.onset is not None and not self.barged and self.settings.barge_in and \
                speaking is not None and speaking.kind == "reply" and \
                self.vad.samples_seen - self.onset >= self.barge_in_samples:
            self.barged = True
            self.call.stop_speaking("barge_in")

    def _answer_later(self, number: int) -> None:
        replies = self.settings.replies
        text = replies[number - 1] if number <= len(replies) else self.settings.reply_text
        loop = asyncio.get_running_loop()
        self._pending = loop.call_later(self.settings.reply_latency_ms / 1000,
                                        self._say, number, text)

    def _say(self, number: int, text: str) -> None:
        self.call.say("reply", str(number), text)

    def replied(self, utterance: Utterance) -> None:
        """A reply ended (played out or stopped): report it, and hang up when that was the
        last one the scenario wants."""
        details: dict[str, JsonValue] = {
            "reply": int(utterance.label), "text": utterance.text, "frames": len(utterance.frames),
            "frames_sent": utterance.sent, "first_ns": utterance.first_ns,
            "last_ns": utterance.last_ns, "speech_start_ns": utterance.speech_start_ns,
            "most_late_ms": utterance.most_late_ms}
        if utterance.stopped == "barge_in":
            self.call.note("barge_in_stopped", **details)
            return
        if utterance.stopped != "finished":
            return
        self.call.note("reply_sent", **details)
        if utterance.label != "0":
            self.replies_played += 1
        limit = self.settings.hang_up_after_replies
        if limit and self.replies_played >= limit:
            self.call.hang_up("scenario_ended")

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
