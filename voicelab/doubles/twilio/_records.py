"""What the Twilio bot double keeps of each call: everything it exchanged and each reply it
said, with its own ``time.perf_counter_ns`` stamps (the truth tests check voicelab against). Its
own module because a call (:mod:`._call`) fills these records and the server (:mod:`._bot`)
holds them, and neither imports the other for them."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._json import JsonObject

FRAME_BYTES = 160  # 20 ms of 8 kHz mu-law
FRAME_SECONDS = 0.02


@dataclass
class ReplyRecord:
    """One thing the bot said: ``number`` 0 is the greeting, N the answer to utterance N.
    Stamps are ``time.perf_counter_ns`` when the bot sent (or received) the message."""

    number: int
    text: str
    mark: str
    frames: int
    frames_sent: int = 0
    first_frame_ns: int | None = None
    speech_start_ns: int | None = None  # when the first speech sample was sent
    #: when the sample after its last audible one (magnitude above the silence threshold) was
    #: due: the end of what a listener can hear of it
    audible_until_ns: int | None = None
    last_frame_ns: int | None = None
    mark_sent_ns: int | None = None
    mark_echoed_ns: int | None = None
    cleared_ns: int | None = None
    #: how far behind its pace the bot sent a frame at worst (ms): on a busy machine the bot
    #: itself stalls, and the caller really hears that silence
    most_late_ms: float = 0.0
    #: when (the bot's loop clock) its next frame is due: a frame sent before the one before
    #: it has played waits in the caller's playback, and the caller hears it that much later
    next_due: float = 0.0

    @property
    def duration_ms(self) -> float:
        return self.frames * FRAME_SECONDS * 1000


@dataclass
class CallRecord:
    """Everything one call exchanged: ``exchange`` holds ``(side, ns, message)`` in order,
    side ``caller`` (what Twilio, here voicelab, sent) or ``bot``."""

    index: int
    exchange: list[tuple[str, int, JsonObject]] = field(default_factory=list)
    start: JsonObject | None = None
    caller_audio: bytearray = field(default_factory=bytearray)  # every inbound payload, mu-law
    #: when each inbound ``media`` frame arrived (its first sample's moment on the line)
    caller_frame_ns: list[int] = field(default_factory=list)
    dtmf: str = ""
    replies: list[ReplyRecord] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    stopped: bool = False  # the user hung up (``stop``)
    log: list[JsonObject] = field(default_factory=list)

    def side(self, side: str) -> list[JsonObject]:
        return [message for who, _, message in self.exchange if who == side]

    @property
    def custom_parameters(self) -> JsonObject:
        parameters = (self.start or {}).get("customParameters")
        return parameters if isinstance(parameters, dict) else {}
