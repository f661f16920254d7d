"""One media stream of the Twilio bot double: the reader that checks Twilio's messages in
protocol order (a violation closes the socket with 1008), the voice activity detection that
hears the user, and the answers, paced, marked, faded and cleared. Its own module because it is
the double's whole conversation, which the server (:mod:`._bot`) starts once per connection and
reaches only through :class:`CallBot`, what a call uses of it."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import time
from typing import Protocol

import numpy as np
from pydantic import JsonValue
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ...audio import (
    G711_SAMPLE_RATE_HZ,
    SILENCE_THRESHOLD,
    PcmAudio,
    StreamingVad,
    mulaw_decode,
    mulaw_encode,
)
from .._json import JsonObject, object_or_empty
from ._records import FRAME_BYTES, FRAME_SECONDS, CallRecord, ReplyRecord
from ._settings import TwilioBotSettings

MEDIA_FORMAT = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
DTMF_KEYS = frozenset("0123456789*#")
VIOLATION_CLOSE_CODE = 1008
SAMPLES_PER_MS = G711_SAMPLE_RATE_HZ // 1000
NS_PER_SAMPLE = 1_000_000_000 // G711_SAMPLE_RATE_HZ


class CallBot(Protocol):
    """What a call uses of the bot that serves it (:class:`._bot.TwilioBot`)."""

    settings: TwilioBotSettings

    def report(self, entry: JsonObject) -> None: ...

    def reply_audio(self, text: str) -> PcmAudio: ...


class _Violation(Exception):
    pass


def _speech_start(samples: np.ndarray) -> int | None:
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SILENCE_THRESHOLD)
    return int(loud[0]) if loud.size else None


class _Call:
    """One media stream: the reader (in protocol order) and the answers, one after another."""

    def __init__(self, bot: CallBot, ws: ServerConnection, record: CallRecord):
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

