"""What the Twilio bot double says, how it listens and how it misbehaves (``--settings`` JSON of
the standalone bot). Its own module because the server (:mod:`._bot`) and each call
(:mod:`._call`) both read it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ...endpoints import AdapterSettings
from .._voice import VoiceKind


class TwilioBotSettings(AdapterSettings):
    """What the bot says and how it listens (``--settings`` JSON of the standalone bot)."""

    #: said as soon as the stream starts ("" for a bot that waits for the user)
    greeting: str = "Hello! Thanks for calling. How can I help you today?"
    #: the answer to the user's first, second, ... utterance; past the list, ``reply_text``
    replies: list[str] = Field(default_factory=list)
    reply_text: str = "Thank you. That is noted."
    #: from the end of the user's utterance (as the bot detects it) to its answer's first frame
    reply_latency_ms: Annotated[float, Field(ge=0)] = 200.0
    #: stop and send ``clear`` when the user speaks over the bot
    barge_in: bool = True
    barge_in_after_ms: Annotated[float, Field(gt=0)] = 150.0
    #: silence that ends a user's utterance
    vad_silence_ms: Annotated[float, Field(gt=0)] = 500.0
    #: send each answer's frames all at once (Twilio queues them) instead of in real time
    burst: bool = False
    #: silence after each reply's speech, in the same stream (a TTS engine's trailing pause)
    tail_silence_ms: Annotated[float, Field(ge=0, le=5000)] = 0.0
    #: the last word of each reply fades out linearly over this long
    fade_out_ms: Annotated[float, Field(ge=0, le=2000)] = 0.0
    #: stopping for a barge-in, go on this long fading out before the ``clear``
    stop_fade_ms: Annotated[float, Field(ge=0, le=2000)] = 0.0
    #: hang up after this many answers have played (0: never; the user hangs up)
    hang_up_after_replies: Annotated[int, Field(ge=0)] = 0
    #: a hostile bot: ``mark_storm`` sends ``mark`` messages as fast as the socket takes them
    #: once the stream starts, and never speaks (the evaluator's limits must end the call)
    hostile: Literal["mark_storm"] | None = None
    #: an IVR menu (default ``off``: keys are only logged). ``menu``: a key stops the prompt
    #: playing (a ``clear``) and is answered with the next reply, like an utterance;
    #: ``ignores_keys``: keys change nothing; ``talks_over_keys``: a key is answered, but
    #: only after the prompt playing has finished (it never stops for a key)
    ivr: Literal["off", "menu", "ignores_keys", "talks_over_keys"] = "off"
    voice_seed: int = 11
    #: ``tone`` (no words) or ``piper`` (real words, ``voicelab[speech]``; its lines are
    #: synthesized before the bot serves)
    voice: VoiceKind = "tone"
    max_message_bytes: Annotated[int, Field(ge=1024)] = 1024 * 1024
