"""A voice bot behind Twilio Media Streams, as a WebSocket server on 127.0.0.1.

It plays the bot's side of ``<Connect><Stream>`` as Twilio's "Media Streams - WebSocket
Messages" reference defines it, written independently of the adapter's own message code so the
two check each other: it expects ``connected`` then ``start``, reads ``customParameters``, hears
the user's ``media`` (8 kHz mu-law) with voice activity detection (an utterance ends after
``vad_silence_ms`` of silence) and answers each utterance with tone speech, sent as 20 ms
``media`` messages in real time (or all at once with ``burst``), followed by a ``mark``. Like a
TTS engine it may end each reply with ``tail_silence_ms`` of silence and fade its last word out
over ``fade_out_ms``. It greets first, and while its audio plays (until the mark comes back) a
user who speaks for ``barge_in_after_ms`` makes it stop (fading out over ``stop_fade_ms``
first, when set) and send ``clear`` (unless ``barge_in`` is off). After
``hang_up_after_replies`` answers it hangs up (closes the socket) once the last one has played.
With ``ivr`` it plays a phone menu: a key stops the prompt playing and is answered like an
utterance (or, to test a caller against broken menus, keys are ignored or talked over).

A message out of protocol (anything before ``connected``/``start``, a gap in
``sequenceNumber`` or ``chunk``, a payload that is not 20 ms, another ``streamSid``, an echo of
a mark never sent) is a violation: recorded, and the socket is closed with 1008.

Each call keeps everything it received and sent (:class:`CallRecord`) and reports what it did,
with its own ``time.perf_counter_ns`` stamps (the system-wide monotonic clock the evaluator
also uses), to ``on_event``: ``python -m voicelab.doubles.twilio`` prints them as JSON lines.

The server is here; each call (the reader and the answers) is :mod:`._call`, what it keeps
:mod:`._records`, its settings :mod:`._settings`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import numpy as np
from websockets.asyncio.server import ServerConnection

from ...audio import (
    G711_SAMPLE_RATE_HZ,
    SILENCE_THRESHOLD,
    PcmAudio,
    StreamingVad,
    mulaw_decode,
    mulaw_encode,
    tone_speech,
)
from ...endpoints import parse_settings
from .._bot_server import BotServer
from .._json import JsonObject
from .._voice import DoubleVoice
from ._call import SAMPLES_PER_MS, _Call
from ._records import CallRecord
from ._settings import TwilioBotSettings

logger = logging.getLogger(__name__)


class TwilioBot(BotServer):
    """The bot as a server: ``await start()`` returns its ``ws://host:port/`` URI; ``calls``
    holds one :class:`CallRecord` per connection; ``on_event`` gets each thing it did."""

    name = "the Twilio bot"

    def __init__(self, settings: TwilioBotSettings | Mapping[str, object] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0,
                 on_event: Callable[[JsonObject], None] | None = None):
        self.settings = parse_settings(TwilioBotSettings, settings)
        super().__init__(host=host, port=port, max_message_bytes=self.settings.max_message_bytes)
        self.on_event = on_event
        self.calls: list[CallRecord] = []
        self.voice = DoubleVoice(self.settings.voice, seed=self.settings.voice_seed,
                                 sample_rate_hz=G711_SAMPLE_RATE_HZ)

    def reply_audio(self, text: str) -> PcmAudio:
        """What the bot says for ``text`` at 8 kHz: its voice, the last ``fade_out_ms`` faded
        out, then ``tail_silence_ms`` of silence."""
        audio = self.voice.speak(text)
        samples = audio.samples.astype(np.float64)
        fade = min(samples.size, int(self.settings.fade_out_ms * SAMPLES_PER_MS))
        if fade:
            loud = np.flatnonzero(np.abs(samples) > SILENCE_THRESHOLD)
            end = int(loud[-1]) + 1 if loud.size else samples.size
            begin = max(0, end - fade)
            samples[begin:end] *= np.linspace(1.0, 0.0, end - begin, endpoint=False)
            samples[end:] = 0.0
        tail = np.zeros(int(self.settings.tail_silence_ms * SAMPLES_PER_MS))
        return PcmAudio(np.concatenate([samples, tail]).astype(np.int16), G711_SAMPLE_RATE_HZ)

    def report(self, entry: JsonObject) -> None:
        if self.on_event is not None:
            self.on_event(entry)

    def _warm_up(self) -> None:
        """Run the listening and speaking code once, so no first call waits for it to load."""
        vad = StreamingVad(sample_rate_hz=G711_SAMPLE_RATE_HZ,
                           hangover_ms=self.settings.vad_silence_ms)
        vad.push(mulaw_decode(mulaw_encode(tone_speech("warm up", seed=1,
                                                       sample_rate_hz=G711_SAMPLE_RATE_HZ))).samples)
        settings = self.settings
        self.voice.prepare([settings.greeting, *settings.replies, settings.reply_text])

    async def _handle(self, ws: ServerConnection) -> None:
        record = CallRecord(index=len(self.calls) + 1)
        self.calls.append(record)
        await _Call(self, ws, record).run()
