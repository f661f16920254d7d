"""A pipecat-protocol bot: pipecat's protobuf frames over a WebSocket, turns taken by listening.

What a pipecat bot with the WebSocket transport and ``ProtobufFrameSerializer`` does, minus the
models: it hears the user's ``audio`` frames with voice activity detection (an utterance ends
after ``vad_silence_ms`` of silence), sends a ``transcription`` frame of what it "heard"
(configured text), answers with a ``text`` frame and tone speech as ``audio`` frames at its rate,
paced in real time (``frame_ms`` each: pipecat's default output chunk is 4 x 10 ms), greets first
(unless ``greeting`` is empty), and stops talking with an ``interruption`` frame once the user
has spoken ``stop_on_speech_ms`` over it (null: talks on). RTVI-style ``bot-started-speaking`` /
``bot-stopped-speaking`` message frames bracket each reply.

Its own send times, on the system monotonic clock the evaluator stamps with
(``time.perf_counter_ns``), go to ``timings_path`` (JSON, rewritten after every reply) so tests
can compare voicelab's figures with the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from ..._atomic import atomic_write
from ...audio import SILENCE_THRESHOLD, PcmAudio, StreamingResampler, StreamingVad
from ...endpoints._settings import AdapterSettings, parse_settings
from ...endpoints.pipecat._wire import (
    DecodedFrame,
    FrameError,
    audio_frame,
    decode_frame,
    encode_frame,
    message_frame,
    pcm_of,
)
from .._bot_server import BotServer
from .._voice import DoubleVoice, VoiceKind

logger = logging.getLogger(__name__)

DEFAULT_GREETING = "Hello! Tell me your daily plan and the reminder you want saved."
DEFAULT_REPLY = "Your daily plan is recorded and the reminder is saved."
DEFAULT_HEARD = "please record the plan and save the reminder"


class PipecatBotSettings(AdapterSettings):
    sample_rate_hz: Annotated[int, Field(ge=8000, le=48000, multiple_of=100)] = 16000
    frame_ms: Annotated[float, Field(gt=0, le=1000)] = 40.0
    greeting: str = DEFAULT_GREETING  # "": the bot waits for the user
    #: the answer to the user's n-th utterance (the last one repeats)
    replies: Annotated[list[str], Field(min_length=1)] = [DEFAULT_REPLY]
    #: what the bot "heard" in the user's n-th utterance (the last one repeats)
    heard: Annotated[list[str], Field(min_length=1)] = [DEFAULT_HEARD]
    vad_silence_ms: Annotated[float, Field(gt=0)] = 500.0
    #: stop replying once the user has spoken this long over the reply (null: never stops)
    stop_on_speech_ms: Annotated[float, Field(ge=0)] | None = 150.0
    reply_delay_ms: Annotated[float, Field(ge=0)] = 0.0  # "thinking" before each answer
    voice_seed: int = 7
    #: ``tone`` (no words) or ``piper`` (real words, ``voicelab[speech]``; its lines are
    #: synthesized before the bot serves)
    voice: VoiceKind = "tone"
    #: send each reply's ``text`` frame (a pipeline whose TTS takes the text sends none)
    send_text: bool = True
    user_id: str = "caller"
    timings_path: str | None = None
    max_client_message_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024
    #: a hostile bot: ``low_rate_audio`` labels its audio frames 1 Hz (their samples are at
    #: ``sample_rate_hz``): resampled as labelled, a 40 ms frame would become 16 minutes
    hostile: Literal["low_rate_audio"] | None = None


@dataclass
class ReplyTiming:
    """One reply, as the bot sent it (monotonic ns)."""

    reply: int
    kind: str  # greeting | answer
    text: str
    utterance: int | None = None
    utterance_end_detected_ns: int | None = None  # the user's silence ended the utterance
    first_audio_ns: int | None = None
    speech_start_ns: int | None = None  # the first speech sample sent (its frame + its offset)
    speech_end_ns: int | None = None    # the last speech sample sent so far
    interrupted_ns: int | None = None   # the user's speech over it was heard (or the client
                                        # asked it to stop)
    stopped_ns: int | None = None       # its interruption frame went out


@dataclass
class BotCall:
    """One connection: what came in and went out (decoded frames), and the replies' timings."""

    received: list[DecodedFrame] = field(default_factory=list)
    sent: list[DecodedFrame] = field(default_factory=list)
    replies: list[ReplyTiming] = field(default_factory=list)
    malformed: int = 0


class _Connection:
    def __init__(self, bot: PipecatBot, ws: ServerConnection, call: BotCall):
        self.bot, self.ws, self.call = bot, ws, call
        self.settings = settings = bot.settings
        self.rate = settings.sample_rate_hz
        self.vad = StreamingVad(sample_rate_hz=self.rate, hangover_ms=settings.vad_silence_ms)
        self.stop_samples = None if settings.stop_on_speech_ms is None else \
            int(settings.stop_on_speech_ms * self.rate / 1000)
        self.resampler: StreamingResampler | None = None  # when the user uses another rate
        self.onset: int | None = None
        self.utterances = 0
        self.frame_ids = 0
        self.speaking: ReplyTiming | None = None
        self.stop = asyncio.Event()
        self.replies: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        if self.settings.greeting:
            self.queue_reply(ReplyTiming(1, "greeting", self.settings.greeting))
        try:
            async for message in self.ws:
                if isinstance(message, str):
                    continue  # pipecat's protobuf serializer only reads binary frames
                try:
                    frame = decode_frame(message)
                except FrameError:
                    self.call.malformed += 1
                    continue
                self.call.received.append(frame)
                if frame.kind == "audio":
                    await self.hear(frame)
                elif frame.kind == "interruption" and self.speaking is not None:
                    self.speaking.interrupted_ns = time.perf_counter_ns()
                    self.stop.set()  # the client asks the bot to stop
        except ConnectionClosed:
            pass
        finally:
            for task in [*self.tasks, *([self.replies] if self.replies else [])]:
                task.cancel()

    # --- listening ---------------------------------------------------------------------------

    async def hear(self, frame: DecodedFrame) -> None:
        pcm = pcm_of(frame, default_rate_hz=self.rate)
        if pcm.sample_rate_hz != self.rate:  # pipecat's input transport resamples too
            if self.resampler is None or self.resampler.from_hz != pcm.sample_rate_hz:
                self.resampler = StreamingResampler(pcm.sample_rate_hz, self.rate)
            pcm = self.resampler.process(pcm)
        for transition in self.vad.push(pcm):
            if transition.kind == "onset":
                self.onset = transition.sample
            elif self.onset is not None:
                self.onset = None
                self.utterances += 1
                await self.utterance_ended(self.utterances, time.perf_counter_ns())
        speaking = self.speaking
        if self.onset is not None and speaking is not None and self.stop_samples is not None \
                and self.vad.samples_seen - self.onset >= self.stop_samples \
                and speaking.interrupted_ns is None:
            speaking.interrupted_ns = time.perf_counter_ns()
            self.stop.set()

    async def utterance_ended(self, number: int, detected_ns: int) -> None:
        settings = self.settings
        heard = settings.heard[min(number, len(settings.heard)) - 1]
        await self.send("transcription", text=heard, user_id=settings.user_id,
                        timestamp=datetime.now(UTC).isoformat(timespec="milliseconds"))
        text = settings.replies[min(number, len(settings.replies)) - 1]
        self.queue_reply(ReplyTiming(len(self.call.replies) + 1, "answer", text,
                                     utterance=number, utterance_end_detected_ns=detected_ns))

    # --- speaking ----------------------------------------------------------------------------

    def queue_reply(self, timing: ReplyTiming) -> None:
        self.call.replies.append(timing)
        previous = self.replies
        self.replies = asyncio.create_task(self.reply(timing, previous))

    async def reply(self, timing: ReplyTiming, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        if timing.kind == "answer" and self.settings.reply_delay_ms:
            await asyncio.sleep(self.settings.reply_delay_ms / 1000)
        self.stop.clear()
        self.speaking = timing
        try:
            await self.send("message", data=json.dumps(
                {"label": "rtvi-ai", "type": "bot-started-speaking"}))
            if self.settings.send_text:
                await self.send("text", text=timing.text)
            if await self.stream(timing):
                await self.send("interruption")
                timing.stopped_ns = time.perf_counter_ns()
            await self.send("message", data=json.dumps(
                {"label": "rtvi-ai", "type": "bot-stopped-speaking"}))
        except ConnectionClosed:
            return
        finally:
            self.speaking = None
            self.bot.write_timings()

    async def stream(self, timing: ReplyTiming) -> bool:
        """Send the reply's audio in real time; True when the bot was stopped."""
        audio = self.bot.voice.speak(timing.text)
        loop = asyncio.get_running_loop()
        start = loop.time()
        sent_seconds = 0.0
        for chunk in audio.chunks(self.settings.frame_ms):
            if await self._stopped_within(start + sent_seconds - loop.time()):
                return True
            await self.send("audio", audio=chunk)
            sent_ns = time.perf_counter_ns()
            timing.first_audio_ns = timing.first_audio_ns or sent_ns
            loud = np.flatnonzero(np.abs(chunk.samples.astype(np.int32)) > SILENCE_THRESHOLD)
            if loud.size:
                if timing.speech_start_ns is None:
                    timing.speech_start_ns = sent_ns + int(loud[0]) * 1_000_000_000 // self.rate
                timing.speech_end_ns = sent_ns + (int(loud[-1]) + 1) * 1_000_000_000 // self.rate
            sent_seconds += chunk.duration_seconds
        return False

    async def _stopped_within(self, seconds: float) -> bool:
        if seconds <= 0:
            return self.stop.is_set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)
        return self.stop.is_set()

    async def send(self, kind: str, **fields: Any) -> None:
        self.frame_ids += 1
        if kind == "audio":
            chunk: PcmAudio = fields.pop("audio")
            name = f"OutputAudioRawFrame#{self.frame_ids}"
            payload = audio_frame(chunk, id=self.frame_ids, name=name)
            if self.settings.hostile == "low_rate_audio":
                payload = encode_frame("audio", audio=chunk.to_bytes(), sample_rate=1,
                                       num_channels=1, id=self.frame_ids, name=name)
        elif kind == "message":
            payload = message_frame(fields["data"])
        else:
            name = {"text": "TextFrame", "transcription": "TranscriptionFrame",
                    "interruption": "InterruptionFrame"}[kind]
            payload = encode_frame(kind, id=self.frame_ids, name=f"{name}#{self.frame_ids}",
                                   **fields)
        await self.ws.send(payload)
        self.call.sent.append(decode_frame(payload))


class PipecatBot(BotServer):
    """The bot as a WebSocket server on ``host:port`` (0: a free port); ``await start()`` returns
    its ``ws://`` URI. ``calls`` keeps every connection's frames and reply timings."""

    name = "the pipecat bot"

    def __init__(self, settings: PipecatBotSettings | Mapping[str, Any] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0):
        self.settings = parse_settings(PipecatBotSettings, settings)
        super().__init__(host=host, port=port,
                         max_message_bytes=self.settings.max_client_message_bytes)
        self.calls: list[BotCall] = []
        self.voice = DoubleVoice(self.settings.voice, seed=self.settings.voice_seed,
                                 sample_rate_hz=self.settings.sample_rate_hz)

    def _warm_up(self) -> None:
        settings = self.settings
        self.voice.prepare([settings.greeting, *settings.replies])

    async def _handle(self, ws: ServerConnection) -> None:
        call = BotCall()
        self.calls.append(call)
        await _Connection(self, ws, call).run()

    def timings(self) -> dict[str, Any]:
        """Every call's replies, as written to ``timings_path``."""
        return {"sample_rate_hz": self.settings.sample_rate_hz, "clock": "perf_counter_ns",
                "calls": [[vars(reply) for reply in call.replies] for call in self.calls]}

    def write_timings(self) -> None:
        if self.settings.timings_path:
            atomic_write(Path(self.settings.timings_path),
                         json.dumps(self.timings(), indent=1).encode())
