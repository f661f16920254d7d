"""What a call says and hears, apart from its signalling: the RTP stream, the keys, the IVR
and the agent. The call (``_call.py``) starts it once media may flow (a 183 with early media or
the 200) and tells it about keys sent by INFO; everything else arrives as RTP."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from pydantic import JsonValue

from ._agent import Agent
from ._codec import Codec, decoder, speech_start
from ._ivr import Ivr
from ._keys import KeyReader, Note
from ._media import FRAME_BYTES, MediaStream, Utterance
from ._sdp import SdpOffer
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
        self._decoder: tuple[Codec, Callable[[bytes], np.ndarray]] | None = None
        #: the caller's decoded audio, kept up to ``record_caller_seconds``
        self._heard: list[np.ndarray] = []
        self._heard_room = int(settings.record_caller_seconds * 8000)
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

    def use_codec(self, payload_type: int, codec: Codec, offer: SdpOffer) -> None:
        """The offer settled the codec (again, for a re-INVITE) and telephone-event's type."""
        changed = codec != self.media.codec
        self.media.payload_type, self.media.codec = payload_type, codec
        event = offer.telephone_event_for(codec)
        self.event_type = None if event is None else event[0]
        self.keys.event_clock_hz = 8000 if event is None else event[1]
        self.keys.frame_bytes = None if codec == "OPUS" else FRAME_BYTES
        if changed:  # what is still to be said goes out in the new codec (as long: 20 ms frames)
            for utterance in self.media.queue:
                utterance.frames = self._frames(utterance.text, codec)
                utterance.speech_at = speech_start(utterance.frames, codec)

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
        """The caller's audio, decoded in arrival order (one decoder per codec: a re-INVITE
        that changes it starts a new one); a payload that does not decode is a violation."""
        codec = self.media.codec
        if self._decoder is None or self._decoder[0] != codec:
            self._decoder = (codec, decoder(codec))
        try:
            samples = self._decoder[1](payload)
        except ValueError as error:
            self._violation(str(error))
            return
        if self._heard_room > 0:
            self._heard.append(samples[:self._heard_room].copy())
            self._heard_room -= self._heard[-1].size
        self.ivr.hear(samples)

    def caller_audio(self) -> np.ndarray:
        """What the double heard the caller say (8 kHz), as far as it was kept."""
        return np.concatenate(self._heard) if self._heard else np.zeros(0, np.int16)

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
