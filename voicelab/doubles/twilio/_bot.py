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
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, JsonValue
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ...audio import (
    G711_SAMPLE_RATE_HZ,
    SILENCE_THRESHOLD,
    PcmAudio,
    StreamingVad,
    mulaw_decode,
    mulaw_encode,
    tone_speech,
)
from ...endpoints import AdapterSettings, parse_settings
from .._bot_server import BotServer
from .._json import JsonObject, object_or_empty
from .._voice import DoubleVoice, VoiceKind

logger = logging.getLogger(__name__)

FRAME_BYTES = 160  # 20 ms of 8 kHz mu-law
FRAME_SECONDS = 0.02
MEDIA_FORMAT = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
DTMF_KEYS = frozenset("0123456789*#")
VIOLATION_CLOSE_CODE = 1008
SAMPLES_PER_MS = G711_SAMPLE_RATE_HZ // 1000
NS_PER_SAMPLE = 1_000_000_000 // G711_SAMPLE_RATE_HZ


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


class _Violation(Exception):
    pass


def _speech_start(samples: np.ndarray) -> int | None:
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SILENCE_THRESHOLD)
    return int(loud[0]) if loud.size else None


class _Call:
    """One media stream: the reader (in protocol order) and the answers, one after another."""

    def __init__(self, bot: TwilioBot, ws: ServerConnection, record: CallRecord):
        self.bot, self.ws, self.record = bot, ws, record
        self.settings = bot.settings
        self.vad = StreamingVad(sample_rate_hz=G711_SAMPLE_RATE_HZ,
                                hangover_ms=self.settings.vad_silence_ms)
        self.barge_in_samples = int(self.settings.barge_in_after_ms * SAMPLES_PER_MS)
        self.connected = False
        self.stream_sid: str | None = None
        self.sequence = 0
        self.chunks = 0
        self.onset: int | None = None  # where the user's current utterance began
        self.barged = False  # ... and whether it already stopped the bot
        self.utterances = 0
        self.speaking: ReplyRecord | None = None  # sent, and its mark not yet back
        self.sending: asyncio.Task[None] | None = None  # the answer whose frames are going out
        self.answers: asyncio.Task[None] | None = None  # the newest answer (they queue)
        self.stopping: asyncio.Task[None] | None = None  # a fade-out before a clear
        self.send_lock = asyncio.Lock()

    def note(self, kind: str, **details: JsonValue) -> None:
        entry: JsonObject = {"call": self.record.index, "event": kind, "ns": time.perf_counter_ns(),
                 **details}
        self.record.log.append(entry)
        self.bot.report(entry)

    async def send(self, message: JsonObject) -> int:
        async with self.send_lock:
            await self.ws.send(json.dumps(message))
        sent_ns = time.perf_counter_ns()
        self.record.exchange.append(("bot", sent_ns, message))
        return sent_ns

    async def run(self) -> None:
        try:
            async for message in self.ws:
                received_ns = time.perf_counter_ns()
                try:
                    if not await self.on_message(message, received_ns):
                        break
                except _Violation as violation:
                    await self.violation(str(violation))
                    break
        except ConnectionClosed:
            pass
        finally:
            tasks = [t for t in (self.sending, self.answers, self.stopping) if t is not None]
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.note("call_ended", stopped=self.record.stopped)

    async def violation(self, reason: str) -> None:
        self.record.violations.append(reason)
        self.note("violation", reason=reason)
        with contextlib.suppress(ConnectionClosed):
            await self.ws.close(VIOLATION_CLOSE_CODE, reason[:120])

    # --- what the user's side sends ---------------------------------------------------------

    async def on_message(self, message: str | bytes, received_ns: int) -> bool:
        """Handle one message; False once the call is over."""
        if isinstance(message, bytes):
            raise _Violation("binary frame: Twilio sends JSON text")
        try:
            parsed: JsonValue = json.loads(message)
        except ValueError:
            raise _Violation("malformed JSON") from None
        if not isinstance(parsed, dict):
            raise _Violation("a message that is not a JSON object")
        self.record.exchange.append(("caller", received_ns, parsed))
        event = parsed.get("event")
        if not self.connected:
            if parsed != {"event": "connected", "protocol": "Call", "version": "1.0.0"}:
                raise _Violation(f"expected connected first, got {event!r}")
            self.connected = True
            return True
        self.check_sequence(parsed)
        if self.stream_sid is None:
            if event != "start":
                raise _Violation(f"expected start after connected, got {event!r}")
            self.started(parsed)
            return True
        if parsed.get("streamSid") != self.stream_sid:
            raise _Violation(f"{event} for another stream")
        if event == "media":
            await self.hear(parsed)
        elif event == "mark":
            return await self.echoed(parsed, received_ns)
        elif event == "dtmf":
            given = parsed.get("dtmf")
            dtmf = object_or_empty(given)
            digit = dtmf.get("digit")
            if dtmf.get("track") != "inbound_track" or not isinstance(digit, str) \
                    or digit not in DTMF_KEYS:
                raise _Violation(f"malformed dtmf {given!r}")
            self.record.dtmf += digit
            self.note("dtmf", digit=digit, received_ns=received_ns)
            await self.pressed()
        elif event == "stop":
            stop = parsed.get("stop") or {}
            start = self.record.start or {}
            if stop != {"accountSid": start.get("accountSid"), "callSid": start.get("callSid")}:
                raise _Violation("stop does not name the call's account and call")
            self.record.stopped = True
            self.note("stop")
            return False
        else:
            raise _Violation(f"unknown event {event!r}")
        return True

    def check_sequence(self, message: JsonObject) -> None:
        self.sequence += 1
        if message.get("sequenceNumber") != str(self.sequence):
            raise _Violation(f"sequenceNumber {message.get('sequenceNumber')!r}, expected "
                             f"{str(self.sequence)!r}")

    def started(self, message: JsonObject) -> None:
        start = message.get("start")
        if not isinstance(start, dict) or start.get("streamSid") != message.get("streamSid"):
            raise _Violation("start without a matching start.streamSid")
        if start.get("mediaFormat") != MEDIA_FORMAT or start.get("tracks") != ["inbound"]:
            raise _Violation("start does not announce inbound 8 kHz mu-law")
        for key, prefix in (("accountSid", "AC"), ("callSid", "CA"), ("streamSid", "MZ")):
            if not str(start.get(key, "")).startswith(prefix):
                raise _Violation(f"start.{key} is not a {prefix} SID")
        parameters = start.get("customParameters")
        if not isinstance(parameters, dict) or not all(
                isinstance(v, str) for v in parameters.values()):
            raise _Violation("start.customParameters must map names to strings")
        self.stream_sid = str(message["streamSid"])
        self.record.start = start
        self.note("call_started", stream_sid=self.stream_sid, custom_parameters=parameters)
        if self.settings.hostile == "mark_storm":
            self.answers = asyncio.create_task(self.storm())
        elif self.settings.greeting:
            self.answer(0, self.settings.greeting)

    async def hear(self, message: JsonObject) -> None:
        media = object_or_empty(message.get("media"))
        self.chunks += 1
        if media.get("track") != "inbound" or media.get("chunk") != str(self.chunks) or \
                not str(media.get("timestamp", "")).isdigit():
            raise _Violation(f"media chunk {media.get('chunk')!r} (expected {self.chunks}), "
                             f"track {media.get('track')!r}, timestamp "
                             f"{media.get('timestamp')!r}")
        try:
            payload = base64.b64decode(str(media.get("payload") or ""), validate=True)
        except (binascii.Error, ValueError):
            raise _Violation("media payload is not base64") from None
        if len(payload) != FRAME_BYTES:
            raise _Violation(f"media payload of {len(payload)} bytes, not 20 ms")
        self.record.caller_audio += payload
        self.record.caller_frame_ns.append(self.record.exchange[-1][1])
        for transition in self.vad.push(mulaw_decode(payload).samples):
            if transition.kind == "onset":
                self.onset, self.barged = transition.sample, False
                self.note("caller_speech_started", first_sound_ns=self.first_sound_ns(
                    transition.sample))
            else:
                self.onset = None
                self.utterances += 1
                self.note("caller_speech_ended", utterance=self.utterances)
                self.answer(self.utterances, self.reply_text(self.utterances))
        if self.onset is not None and not self.barged and self.settings.barge_in and \
                self.speaking is not None and \
                self.vad.samples_seen - self.onset >= self.barge_in_samples:
            self.barged = True
            if self.settings.stop_fade_ms:  # the fade goes out in real time: keep listening
                self.stopping = asyncio.create_task(self.clear())
            else:
                await self.clear()

    async def pressed(self) -> None:
        """``ivr``: a key moves the menu on (stopping the prompt first, for ``menu``)."""
        mode = self.settings.ivr
        if mode in ("off", "ignores_keys"):
            return
        if mode == "menu" and self.speaking is not None:
            await self.clear()
        self.utterances += 1
        self.answer(self.utterances, self.reply_text(self.utterances))

    def first_sound_ns(self, onset: int) -> int | None:
        """When the user's first sample above the silence threshold at or after ``onset``
        (inbound 8 kHz samples) was said: its frame's arrival plus its offset in the frame."""
        samples = mulaw_decode(bytes(self.record.caller_audio[onset:])).samples
        loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SILENCE_THRESHOLD)
        if not loud.size:
            return None
        sample = onset + int(loud[0])
        frame = sample // FRAME_BYTES
        return self.record.caller_frame_ns[frame] + (sample % FRAME_BYTES) * NS_PER_SAMPLE

    async def storm(self) -> None:
        """``hostile: mark_storm``: marks until the call ends, sent straight to the socket (not
        kept in the call's record, which would fill this process instead)."""
        self.note("storm_started")
        number = 0
        while True:
            number += 1
            await self.ws.send(json.dumps({"event": "mark", "streamSid": self.stream_sid,
                                           "mark": {"name": f"storm-{number}"}}))

    async def echoed(self, message: JsonObject, received_ns: int) -> bool:
        name = object_or_empty(message.get("mark")).get("name")
        if self.settings.hostile == "mark_storm":
            return True  # the echoes of its storm
        reply = next((r for r in self.record.replies
                      if r.mark == name and r.mark_sent_ns is not None
                      and r.mark_echoed_ns is None), None)
        if reply is None:
            raise _Violation(f"echo of a mark never sent (or echoed twice): {name!r}")
        reply.mark_echoed_ns = received_ns
        if self.speaking is reply:
            self.speaking = None
        self.note("mark_echoed", reply=reply.number, mark=name, received_ns=received_ns)
        hang_up = self.settings.hang_up_after_replies
        if hang_up and reply.number >= hang_up:
            self.note("hang_up")
            await self.ws.close(1000, "goodbye")
            return False
        return True

    # --- what the bot says --------------------------------------------------------------------

    def reply_text(self, number: int) -> str:
        replies = self.settings.replies
        return replies[number - 1] if number <= len(replies) else self.settings.reply_text

    def answer(self, number: int, text: str) -> None:
        previous = self.answers
        self.answers = asyncio.create_task(self.speak(previous, number, text))

    async def speak(self, previous: asyncio.Task[None] | None, number: int, text: str) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        if number:
            await asyncio.sleep(self.settings.reply_latency_ms / 1000)
        audio = self.bot.reply_audio(text)
        codes = mulaw_encode(audio)
        frames = [codes[i:i + FRAME_BYTES] for i in range(0, len(codes), FRAME_BYTES)]
        reply = ReplyRecord(number, text, f"reply-{number}", len(frames))
        self.record.replies.append(reply)
        self.sending = asyncio.current_task()
        speech_at = _speech_start(audio.samples)
        self.speaking = reply
        loop = asyncio.get_running_loop()
        begin = loop.time()
        for index, frame in enumerate(frames):
            if not self.settings.burst:
                await asyncio.sleep(max(0.0, begin + index * FRAME_SECONDS - loop.time()))
            sent_ns = await self.send({"event": "media", "streamSid": self.stream_sid, "media": {
                "payload": base64.b64encode(frame).decode("ascii")}})
            if not self.settings.burst:  # a busy machine delays the bot's own pacing: a stall
                late_s = loop.time() - (begin + index * FRAME_SECONDS)  # the caller hears
                reply.most_late_ms = max(reply.most_late_ms, round(late_s * 1000, 3))
            reply.frames_sent += 1
            if not self.settings.burst:
                reply.next_due = begin + (index + 1) * FRAME_SECONDS
            self.heard_until(reply, frame, sent_ns)
            if index == 0:
                reply.first_frame_ns = sent_ns
            if speech_at is not None and index * FRAME_BYTES <= speech_at < \
                    (index + 1) * FRAME_BYTES:  # paced: that sample is due its offset later
                offset = 0 if self.settings.burst else speech_at - index * FRAME_BYTES
                reply.speech_start_ns = sent_ns + offset * NS_PER_SAMPLE
            reply.last_frame_ns = sent_ns
        reply.mark_sent_ns = await self.send({"event": "mark", "streamSid": self.stream_sid,
                                              "mark": {"name": reply.mark}})
        self.sending = None
        self.note("reply_sent", reply=number, frames=reply.frames,
                  first_frame_ns=reply.first_frame_ns, speech_start_ns=reply.speech_start_ns,
                  audible_until_ns=reply.audible_until_ns, last_frame_ns=reply.last_frame_ns,
                  mark_sent_ns=reply.mark_sent_ns, most_late_ms=reply.most_late_ms)

    def heard_until(self, reply: ReplyRecord, frame: bytes, sent_ns: int) -> None:
        """Note the end of the frame's audible audio (paced: each sample is due its offset
        after the frame was sent)."""
        loud = np.flatnonzero(np.abs(mulaw_decode(frame).samples.astype(np.int32))
                              > SILENCE_THRESHOLD)
        if loud.size:
            offset = 0 if self.settings.burst else int(loud[-1]) + 1
            reply.audible_until_ns = sent_ns + offset * NS_PER_SAMPLE

    async def fade_out(self, reply: ReplyRecord) -> None:
        """Go on speaking ``stop_fade_ms`` more, fading out, from where the reply was."""
        audio = self.bot.reply_audio(reply.text).samples
        start = reply.frames_sent * FRAME_BYTES
        length = min(int(self.settings.stop_fade_ms * SAMPLES_PER_MS), audio.size - start)
        if length <= 0:
            return
        faded = audio[start:start + length] * np.linspace(1.0, 0.0, length, endpoint=False)
        codes = mulaw_encode(PcmAudio(faded.astype(np.int16), G711_SAMPLE_RATE_HZ))
        codes += bytes([0xFF]) * (-len(codes) % FRAME_BYTES)  # mu-law silence to a whole frame
        loop = asyncio.get_running_loop()
        # it goes on at its pace: its next frame when the last one sent has played
        begin = max(loop.time(), reply.next_due)
        for index in range(0, len(codes), FRAME_BYTES):
            due = begin + index / FRAME_BYTES * FRAME_SECONDS
            await asyncio.sleep(max(0.0, due - loop.time()))
            frame = codes[index:index + FRAME_BYTES]
            sent_ns = await self.send({"event": "media", "streamSid": self.stream_sid, "media": {
                "payload": base64.b64encode(frame).decode("ascii")}})
            # the fade's own pacing, late on a busy machine, is silence the caller hears too
            reply.most_late_ms = max(reply.most_late_ms, round((loop.time() - due) * 1000, 3))
            self.heard_until(reply, frame, sent_ns)
            reply.last_frame_ns = sent_ns

    async def clear(self) -> None:
        """The user talks over the bot: stop sending (fading out first, when configured),
        and drop what Twilio has queued."""
        reply = self.speaking
        assert reply is not None
        sending = self.sending
        if sending is not None and not sending.done():
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            self.sending = None
            if self.settings.stop_fade_ms:
                await self.fade_out(reply)
        reply.cleared_ns = await self.send({"event": "clear", "streamSid": self.stream_sid})
        self.speaking = None
        self.note("clear", reply=reply.number, frames_sent=reply.frames_sent,
                  frames=reply.frames, mark_sent=reply.mark_sent_ns is not None,
                  speech_start_ns=reply.speech_start_ns,
                  audible_until_ns=reply.audible_until_ns, most_late_ms=reply.most_late_ms)


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
