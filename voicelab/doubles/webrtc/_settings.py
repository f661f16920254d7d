"""What the WebRTC bot double says, how it listens and how it misbehaves (``--settings``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ...endpoints import AdapterSettings

Hostile = Literal["huge_answer", "data_flood", "big_data_message", "silent_track", "rtp_flood",
                  "bad_ice", "refuse", "renegotiate", "bad_fingerprint", "transport_lost"]


class WebRtcBotSettings(AdapterSettings):
    """What the bot says, how it listens and how it misbehaves (``--settings`` JSON)."""

    greeting: str = "Hello! Thanks for calling. How can I help you today?"
    #: from the start of the call's media to the greeting (silence meanwhile)
    greeting_delay_ms: Annotated[float, Field(ge=0)] = 0.0
    replies: list[str] = Field(default_factory=list)
    reply_text: str = "Thank you. That is noted."
    #: from the end of the user's utterance (as the bot detects it) to its answer
    reply_latency_ms: Annotated[float, Field(ge=0)] = 200.0
    #: silence put into each reply at the word gap nearest its middle (dead air; 0: none)
    reply_pause_ms: Annotated[float, Field(ge=0, le=10_000)] = 0.0
    vad_silence_ms: Annotated[float, Field(gt=0)] = 500.0
    barge_in: bool = True
    barge_in_after_ms: Annotated[float, Field(gt=0)] = 150.0
    #: send RTVI messages (transcriptions, speaking states) on the caller's data channel
    rtvi: bool = True
    #: what the bot says it heard, utterance by utterance (RTVI ``user-transcription``)
    user_transcripts: list[str] = Field(default_factory=list)
    #: WHIP's bearer token (None: no authorization asked)
    token: str | None = None
    #: fastrtc's concurrency limit (0: none)
    max_calls: Annotated[int, Field(ge=0)] = 0
    hang_up_after_replies: Annotated[int, Field(ge=0)] = 0
    ice_host_addresses: list[str] = Field(default_factory=lambda: ["127.0.0.1"])
    hostile: Hostile | None = None
    voice_seed: int = 11
