"""The deterministic tone speech provider (no model, no network)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..audio import PcmAudio, tone_speech
from ._protocol import SpeechContext


class ToneSpeechProvider:
    """Tone bursts shaped by the text and the seed; the voice name is ignored."""

    name = "tone"
    #: a turn costs less CPU than a scheduling decision: synthesized when spoken, not ahead of
    #: the call (ahead, every trial would pay for its repeat request, which a trial that goes to
    #: plan never says)
    synthesize_ahead = False

    def __init__(self, settings: Mapping[str, Any] | None = None,
                 context: SpeechContext | None = None):
        unknown = set(settings or {})
        if unknown:
            raise ValueError(f"the tone provider takes no settings (got {', '.join(sorted(unknown))})")

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any], context: SpeechContext) -> None:
        cls(settings, context)

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> PcmAudio:
        return tone_speech(text, seed=seed)

    async def aclose(self) -> None:
        return None
