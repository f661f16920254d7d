"""The deterministic tone speech provider (no model, no network)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from ..audio import TONE_EDGE_SECONDS, PcmAudio, tone_speech, tone_speech_seconds
from ._protocol import SpeechContext
from ._voices import prosody_configured, turn_prosody


class ToneSpeechProvider:
    """Tone bursts shaped by the text and the seed, at the persona's rate and pitch; the voice
    name is ignored (tones speak no language, so any language is accepted)."""

    name = "tone"
    #: a turn costs less CPU than a scheduling decision: synthesized when spoken, not ahead of
    #: the call (ahead, every trial would pay for its repeat request, which a trial that goes to
    #: plan never says)
    synthesize_ahead = False

    def __init__(self, settings: Mapping[str, object] | None = None,
                 context: SpeechContext | None = None):
        unknown = set(settings or {})
        if unknown:
            raise ValueError(f"the tone provider takes no settings (got {', '.join(sorted(unknown))})")
        self.persona_speech = context.persona_speech if context is not None else None

    @classmethod
    def check_settings(cls, settings: Mapping[str, object], context: SpeechContext) -> None:
        cls(settings, context)

    @classmethod
    def shortest_speech_seconds(cls, text: str, context: SpeechContext) -> float:
        """How long ``text``'s sound lasts at least, in any trial: its tone bursts from the
        first word's start to the last word's end, rendered at the fastest rate the persona's
        prosody reaches (its rate plus the whole jitter), less the soft edges."""
        speech = context.persona_speech
        rate = 1.0 if speech is None else speech.rate * (1.0 + speech.rate_jitter) + 1e-4
        _, sound_seconds = tone_speech_seconds(text, rate=rate)
        return max(0.0, sound_seconds - 2 * TONE_EDGE_SECONDS)

    def rendering(self, text: str, *, seed: int) -> dict[str, JsonValue]:
        if not prosody_configured(self.persona_speech):
            return {}
        prosody = turn_prosody(self.persona_speech, seed=seed, text=text)
        return {"rate": prosody.rate, "pitch": prosody.pitch}

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> PcmAudio:
        prosody = turn_prosody(self.persona_speech, seed=seed, text=text)
        return tone_speech(text, seed=seed, rate=prosody.rate, pitch=prosody.pitch)

    async def aclose(self) -> None:
        return None
