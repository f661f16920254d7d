"""What a call says and hears, apart from its signalling: the RTP stream, the keys, the IVR
and the agent. The call (``_call.py``) starts it once media may flow (a 183 with early media or
the 200) and tells it about keys sent by INFO; everything else arrives as RTP."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic import JsonValue

from ...audio import alaw_decode, mulaw_decode
from ._agent import Agent
from ._ivr import Ivr
from ._keys import KeyReader, Note
from ._media import MediaStream, Utterance, speech_start
from ._sdp import Codec
from ._settings import SipDoubleSettings

logger = logging.getLogger(__name__)


class Conversation:
    """One call's media side; it is the :class:`~._agent.CallSide` the IVR and agent use."""

    def __init__(self, settings: SipDoubleSettings, *, host: str, note: Note,
                 violation: Callable[[str], None], hang_up: Callable[[str], None],
                 frames: Callable[[str, Codec], list[bytes]]):
        self.settings = settings
        self._note, self._violation, self._hang_up, self._frames = note, violation, hang_up, frames
        self.media = MediaStream(host=host, on_datagram=self._datagram,
                                 max_packets_per_second=settings.max_rtp_packets_per_second)
        self.keys = KeyReader(note)
        self.agent = Agent(self)
        self.ivr = Ivr(self, self.agent)
        self.event_type: int | None = None  # telephone-event's payload type in the offer
        self.started = False
        self.over = False

    def note(self, kind: str, **details: JsonValue) -> None:
        self._note(kind, **details)

    def hang_up(self, why: str) -> None:
        self._hang_up(why)

    def start(self) -> None:
        """Media may flow: the clock starts (unless ``no_media_after_answer``), and the first
        menu's prompt or the agent's greeting with it."""
        if self.started:
            return
        self.started = True
        if not self.settings.no_media_after_answer:
            self.media.start_clock()
        if self.settings.mode == "ivr":
            self.ivr.start()
        else:
            self.ivr.menu = None
            self.agent.greet()

    def key(self, key: str, method: str, first_ns: int) -> None:
        self.keys.received(key, method, first_ns)
        self.ivr.key(key)

    def _datagram(self, data: bytes, source: tuple[str, int], arrived_ns: int) -> None:
        if self.over or not self.media.accept(source, arrived_ns, self._violation):
            return
        try:
            key = self.keys.rtp(data, audio_type=self.media.payload_type,
                                event_type=self.event_type, arrived_ns=arrived_ns,
                                hear=self._hear, violation=self._violation)
            if key is not None:
                self.ivr.key(key)
        except Exception as error:  # a bug in the double: a violation line, never a traceback
            logger.debug("reading RTP failed", exc_info=True)
            self._violation(f"the double failed reading RTP: {type(error).__name__}")

    def _hear(self, payload: bytes) -> None:
        decode = mulaw_decode if self.media.codec == "PCMU" else alaw_decode
        self.ivr.hear(decode(payload).samples)

    def say(self, kind: str, label: str, text: str) -> Utterance:
        frames = self._frames(text, self.media.codec)
        utterance = Utterance(kind, label, text, frames,
                              speech_at=speech_start(frames, self.media.codec),
                              on_start=self.ivr.started, on_end=self.ivr.ended)
        self.media.say(utterance)
        return utterance

    def stop_speaking(self, why: str) -> list[Utterance]:
        return self.media.stop(why)

    @property
    def speaking(self) -> Utterance | None:
        return self.media.speaking

    def end(self) -> None:
        """The call ended: what was being said ends here (its last stamps are reported)."""
        self.over = True
        self.media.stop("call_ended")
        self.ivr.close()
