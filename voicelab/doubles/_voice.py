"""How a bot double speaks: tone speech (instant, no words) or piper (real words a recognizer
can read back; ``voicelab[speech]``).

Piper takes a good part of a second a sentence on a busy machine, so a piper bot synthesizes
the lines it will say before it serves (:meth:`DoubleVoice.prepare`): a reply then starts as
fast as a tone one, and its timings stay the bot's own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np

from ..audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio, StreamingResampler, tone_speech

#: A bot's ``voice`` setting.
VoiceKind = Literal["tone", "piper"]


class DoubleVoice:
    """``text`` as PCM at ``sample_rate_hz`` in the bot's voice; piper renderings are kept."""

    def __init__(self, kind: str, *, seed: int, sample_rate_hz: int):
        self.kind, self.seed, self.sample_rate_hz = kind, seed, sample_rate_hz
        self._spoken: dict[str, PcmAudio] = {}
        self._lock = threading.Lock()
        self._piper = None
        if kind == "piper":
            from ..speech._piper import PiperSpeechProvider
            from ..speech._protocol import SpeechContext

            self._piper = PiperSpeechProvider({}, SpeechContext(base_dir=Path.cwd()))

    def prepare(self, texts: Iterable[str]) -> None:
        """Synthesize ``texts`` now (piper), so saying them later costs nothing."""
        for text in texts:
            if text:
                self.speak(text)

    def speak(self, text: str) -> PcmAudio:
        if self._piper is None:
            return tone_speech(text, seed=self.seed, sample_rate_hz=self.sample_rate_hz)
        with self._lock:
            spoken = self._spoken.get(text)
        if spoken is None:
            spoken = self._at_rate(self._piper.synthesize_sync(text))
            with self._lock:
                self._spoken[text] = spoken
        return spoken

    def _at_rate(self, audio: PcmAudio) -> PcmAudio:
        if self.sample_rate_hz == CANONICAL_SAMPLE_RATE_HZ:
            return audio
        resampler = StreamingResampler(CANONICAL_SAMPLE_RATE_HZ, self.sample_rate_hz)
        parts = [resampler.process(audio).samples, resampler.flush().samples]
        return PcmAudio(np.concatenate(parts), self.sample_rate_hz)
