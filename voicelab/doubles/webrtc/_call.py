"""One WebRTC call of the bot double: its peer connection, the track it speaks on, what it
hears, and the RTVI messages on its data channel.

The bot speaks Opus packets it encodes itself (48 kHz, 20 ms, libopus through PyAV; each reply
encoded once and its packets reused by every call), handed to
aiortc's sender as pre-encoded packets: aiortc then packs and sends each one in the same step
that took it from the track, with no thread in between, so the moment :meth:`BotTrack.recv`
hands a packet over is its RTP send stamp (``time.perf_counter_ns``), the truth the evaluator's
figures are checked against. It listens through aiortc's own receiver (jitter buffer and
decoder, as pipecat's SmallWebRTC transport does) with voice activity detection.
"""

from __future__ import annotations

import asyncio
import fractions
import json
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
from pydantic import JsonValue

from ...audio import SILENCE_THRESHOLD, StreamingVad
from .._json import JsonObject
from ._dead_air import dead_air_ms
from ._settings import WebRtcBotSettings

if TYPE_CHECKING:
    from aiortc import MediaStreamTrack, RTCDataChannel, RTCPeerConnection
    from av import AudioFrame, Packet


logger = logging.getLogger(__name__)

RATE_HZ = 48_000
FRAME_SAMPLES = 960  # 20 ms
FRAME_NS = 20_000_000
NS_PER_SAMPLE = 1_000_000_000 / RATE_HZ
RTVI_LABEL = "rtvi-ai"
#: what a flood keeps queued in its own data channel at most (it waits for the channel below it)
FLOOD_BUFFERED_BYTES = 256 * 1024


@dataclass
class ReplyRecord:
    """One reply: ``number`` 0 is the greeting. Stamps are the bot's RTP send stamps."""

    number: int
    text: str
    frames: int
    first_packet_ns: int | None = None
    speech_start_ns: int | None = None
    last_packet_ns: int | None = None
    #: when the sample after its last audible one was due (paced: each sample is due its
    #: offset after its packet was sent): the end of what a listener can hear of it
    audible_until_ns: int | None = None
    stopped_ns: int | None = None  # a barge-in stopped it
    #: the silences of 300 ms or more between its first and last audible sample, as sent whole
    dead_air_ms: float = 0.0
    frames_sent: int = 0


@dataclass
class CallRecord:
    """What one call did, for tests: replies, the caller's utterances, data-channel traffic."""

    index: int
    signalling: str
    replies: list[ReplyRecord] = field(default_factory=list)
    caller_speech_ended_ns: list[int] = field(default_factory=list)
    data_received: list[JsonValue] = field(default_factory=list)
    packets_sent: int = 0
    ended: bool = False


class _Encoder:
    """libopus at 48 kHz mono, 20 ms a packet."""

    def __init__(self) -> None:
        from av import CodecContext

        codec = CodecContext.create("libopus", "w")
        codec.sample_rate, codec.layout, codec.format = RATE_HZ, "mono", "s16"
        codec.bit_rate = 32_000
        codec.time_base = fractions.Fraction(1, RATE_HZ)
        codec.open()
        self.codec, self.count = codec, 0

    def encode(self, samples: np.ndarray) -> bytes:
        from av import AudioFrame

        frame = AudioFrame.from_ndarray(samples[None, :], format="s16", layout="mono")
        frame.sample_rate, frame.pts = RATE_HZ, self.count * FRAME_SAMPLES
        self.count += 1
        packets = self.codec.encode(frame)
        return bytes(packets[0]) if packets else b"\xf8\xff\xfe"


def encode_all(samples: np.ndarray) -> list[bytes]:
    """``samples`` (48 kHz) as 20 ms Opus packets, from a fresh encoder: a reply is encoded
    once per text and its packets reused by every call (libopus at 48 kHz costs ~0.7 ms a
    packet here, which 20 calls at 50 packets a second could not afford)."""
    encoder = _Encoder()
    frames = -(-samples.size // FRAME_SAMPLES)
    padded = np.zeros(frames * FRAME_SAMPLES, dtype=np.int16)
    padded[:samples.size] = samples
    return [encoder.encode(padded[i * FRAME_SAMPLES:(i + 1) * FRAME_SAMPLES])
            for i in range(frames)]


@cache
def silent_packet() -> bytes:
    """20 ms of silence, encoded once."""
    return _Encoder().encode(np.zeros(FRAME_SAMPLES, dtype=np.int16))


def _track_base() -> type[MediaStreamTrack]:
    from aiortc import MediaStreamTrack

    return MediaStreamTrack


class BotSpeech:
    """The bot's outbound audio: 20 ms of the reply being said, or silence, each time the
    sender asks; the reply's send stamps are noted as its packets leave."""

    def __init__(self, call: BotCall):
        self.call = call
        self.reply: ReplyRecord | None = None
        self.samples = np.zeros(0, dtype=np.int16)
        self.packets: list[bytes] = []
        self.position = 0
        self.speech_at: int | None = None
        self.start_ns: int | None = None
        self.sent = 0

    def say(self, reply: ReplyRecord, samples: np.ndarray, packets: list[bytes]) -> None:
        self.reply, self.samples, self.position, self.packets = reply, samples, 0, packets
        loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SILENCE_THRESHOLD)
        self.speech_at = int(loud[0]) if loud.size else None

    def stop(self) -> ReplyRecord | None:
        reply, self.reply = self.reply, None
        return reply

    async def next_packet(self) -> Packet:
        from av import Packet

        settings = self.call.settings
        now = time.perf_counter_ns()
        if self.start_ns is None:
            self.start_ns = now
            self.call.started()
        if settings.hostile == "silent_track":
            await asyncio.Event().wait()
        if settings.hostile == "rtp_flood":  # bursts of 20 packets every 20 ms: 20 times the
            # pace, however coarse the loop's timers are on a busy machine
            await asyncio.sleep(0 if self.sent % 20 else 0.02)
        else:
            due = self.start_ns + self.sent * FRAME_NS
            if due > now:
                await asyncio.sleep((due - now) / 1e9)
        reply = self.reply
        payload = self.packets[self.position // FRAME_SAMPLES] if reply is not None \
            else silent_packet()
        packet = Packet(payload)
        packet.pts, packet.time_base = self.sent * FRAME_SAMPLES, fractions.Fraction(1, RATE_HZ)
        sent_ns = time.perf_counter_ns()
        self.sent += 1
        self.call.record.packets_sent += 1
        if reply is not None:
            self._note_sent(reply, sent_ns)
        return packet

    def _note_sent(self, reply: ReplyRecord, sent_ns: int) -> None:
        if reply.first_packet_ns is None:
            reply.first_packet_ns = sent_ns
        at = self.speech_at
        if at is not None and self.position <= at < self.position + FRAME_SAMPLES:
            reply.speech_start_ns = sent_ns + int((at - self.position) * NS_PER_SAMPLE)
        reply.last_packet_ns = sent_ns
        piece = self.samples[self.position:self.position + FRAME_SAMPLES]
        loud = np.flatnonzero(np.abs(piece.astype(np.int32)) > SILENCE_THRESHOLD)
        if loud.size:
            reply.audible_until_ns = sent_ns + int((int(loud[-1]) + 1) * NS_PER_SAMPLE)
        reply.frames_sent += 1
        self.position += FRAME_SAMPLES
        if self.position >= self.samples.size:
            self.reply = None
            self.call.finished(reply)


def bot_track(speech: BotSpeech) -> MediaStreamTrack:
    """The bot's outbound track: aiortc's sender takes pre-encoded packets from ``recv``."""

    class BotTrack(_track_base()):  # type: ignore[misc]
        kind = "audio"

        async def recv(self) -> Packet:
            return await speech.next_packet()

    return BotTrack()


class BotCall:
    """One call: listens, answers each utterance, stops when talked over, tells RTVI."""

    def __init__(self, pc: RTCPeerConnection, record: CallRecord, settings: WebRtcBotSettings,
                 *, voice: Callable[[str], tuple[np.ndarray, list[bytes]]],
                 note: Callable[..., None]):
        self.pc, self.record, self.settings = pc, record, settings
        self.voice, self._note = voice, note
        self.speech = BotSpeech(self)
        self.track = bot_track(self.speech)
        self.channel: RTCDataChannel | None = None
        self.vad = StreamingVad(sample_rate_hz=RATE_HZ, hangover_ms=settings.vad_silence_ms)
        self.onset: int | None = None
        self.utterances = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.answers: asyncio.Task[None] | None = None
        self._waiting: asyncio.Future[None] | None = None
        self.pending: list[str] = []

    def note(self, kind: str, **details: JsonValue) -> None:
        self._note({"call": self.record.index, "event": kind, "ns": time.perf_counter_ns(),
                    **details})

    def spawn(self, coroutine: Coroutine[object, object, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # --- RTVI -------------------------------------------------------------------------------

    def rtvi(self, kind: str, data: JsonObject | None = None) -> None:
        if not self.settings.rtvi:
            return
        message: JsonObject = {"label": RTVI_LABEL, "type": kind}
        if data is not None:
            message["data"] = data
        channel = self.channel
        if channel is None or channel.readyState != "open":
            if len(self.pending) < 100:  # said before the caller's channel opened
                self.pending.append(json.dumps(message))
            return
        channel.send(json.dumps(message))

    def on_channel(self, channel: RTCDataChannel) -> None:
        self.channel = channel
        if channel.readyState == "open":
            for message in self.pending:
                channel.send(message)
            self.pending.clear()

        @channel.on("message")
        def _message(message: str | bytes) -> None:
            try:
                parsed: JsonValue = json.loads(message)
            except ValueError:
                parsed = None
            if len(self.record.data_received) < 1000:
                self.record.data_received.append(parsed)
            if isinstance(parsed, dict) and parsed.get("type") == "client-ready":
                self.rtvi("bot-ready", {"version": "1.0.0"})
        if self.settings.hostile in ("data_flood", "big_data_message"):
            self.spawn(self.flood(channel))
        if self.settings.hostile == "renegotiate":  # pipecat's bot asking for a new offer
            channel.send(json.dumps({"type": "signalling", "message": {"type": "renegotiate"}}))

    async def flood(self, channel: RTCDataChannel) -> None:
        """Hostile: thousands of messages a second until the call ends, or one of 200 KiB (aiortc
        sends no more than the 256 KiB the caller's SDP allows)."""
        while channel.readyState == "connecting":
            await asyncio.sleep(0.01)
        if self.settings.hostile == "big_data_message":
            channel.send("x" * (200 * 1024))  # aiortc refuses more than 256 KiB
            return
        for number in range(50_000):
            if channel.readyState != "open":
                return
            channel.send(json.dumps({"label": RTVI_LABEL, "type": "server-message",
                                     "data": {"n": number}}))
            if number % 100 == 99:
                await asyncio.sleep(0.005)
            # as fast as the channel carries them, never faster: the flood tests the caller, and
            # an unbounded queue in the double's own SCTP buffer would only grow the double
            while channel.bufferedAmount > FLOOD_BUFFERED_BYTES and channel.readyState == "open":
                await asyncio.sleep(0.005)

    # --- listening --------------------------------------------------------------------------

    async def listen(self, track: MediaStreamTrack) -> None:
        from aiortc.mediastreams import MediaStreamError

        while True:
            try:
                frame: AudioFrame = await track.recv()  # type: ignore[assignment]
            except MediaStreamError:
                return
            samples = frame.to_ndarray().reshape(-1)
            if len(frame.layout.channels) == 2:
                samples = samples[0::2]
            self.hear(samples.astype(np.int16))

    def hear(self, samples: np.ndarray) -> None:
        for transition in self.vad.push(samples):
            if transition.kind == "onset":
                self.onset = transition.sample
                self.note("caller_speech_started")
                self.rtvi("user-started-speaking")
            else:
                self.onset = None
                self.utterances += 1
                self.record.caller_speech_ended_ns.append(time.perf_counter_ns())
                self.note("caller_speech_ended", utterance=self.utterances)
                self.rtvi("user-stopped-speaking")
                self.rtvi("user-transcription", {"text": self.heard_text(self.utterances),
                                                 "final": True, "user_id": "caller"})
                self.answer(self.utterances, self.reply_text(self.utterances))
        self.maybe_stop()

    def maybe_stop(self) -> None:
        settings = self.settings
        if self.onset is None or not settings.barge_in or self.speech.reply is None:
            return
        if (self.vad.samples_seen - self.onset) * 1000 / RATE_HZ < settings.barge_in_after_ms:
            return
        reply = self.speech.stop()
        if reply is not None:
            reply.stopped_ns = reply.last_packet_ns
            self.note("reply_stopped", reply=reply.number, stopped_ns=reply.stopped_ns,
                      first_packet_ns=reply.first_packet_ns,
                      speech_start_ns=reply.speech_start_ns,
                      audible_until_ns=reply.audible_until_ns, frames_sent=reply.frames_sent)
            self.rtvi("bot-stopped-speaking")
            self._done_speaking()

    def _done_speaking(self) -> None:
        waiting = self._waiting
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    def heard_text(self, number: int) -> str:
        heard = self.settings.user_transcripts
        return heard[number - 1] if number <= len(heard) else f"utterance {number}"

    def reply_text(self, number: int) -> str:
        replies = self.settings.replies
        return replies[number - 1] if number <= len(replies) else self.settings.reply_text

    # --- speaking ---------------------------------------------------------------------------

    def started(self) -> None:
        """The sender asked for its first packet: the call is up; greet."""
        self.note("media_started")
        if self.settings.hostile == "transport_lost":
            self.spawn(self._lose_transport(1.0))
        if self.settings.greeting:
            if self.settings.greeting_delay_ms:
                self.spawn(self._greet_later(self.settings.greeting_delay_ms / 1000))
            else:
                self.answer(0, self.settings.greeting)

    async def _lose_transport(self, seconds: float) -> None:
        """Close the call's UDP sockets with no goodbye (no DTLS close_notify, no RTCP BYE):
        the caller's packets then meet a closed port. aioice names its sockets nowhere
        public; a double may reach them (the tested aiortc 1.16 / aioice 0.13)."""
        await asyncio.sleep(seconds)
        gatherer = self.pc.getTransceivers()[0].receiver.transport.transport.iceGatherer
        for protocol in gatherer._connection._protocols:
            protocol.transport.close()
        self.note("transport_lost")

    async def _greet_later(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.answer(0, self.settings.greeting)

    def answer(self, number: int, text: str) -> None:
        previous = self.answers
        self.answers = asyncio.ensure_future(self.speak(previous, number, text))
        self.tasks.add(self.answers)

    async def speak(self, previous: asyncio.Task[None] | None, number: int, text: str) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        if number:
            await asyncio.sleep(self.settings.reply_latency_ms / 1000)
        samples, packets = self.voice(text)
        reply = ReplyRecord(number, text, -(-samples.size // FRAME_SAMPLES),
                            dead_air_ms=dead_air_ms(samples))
        self.record.replies.append(reply)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting = done
        self.speech.say(reply, samples, packets)
        self.rtvi("bot-started-speaking")
        self.rtvi("bot-transcription", {"text": text})
        await done

    def finished(self, reply: ReplyRecord) -> None:
        """The sender took the reply's last packet."""
        self.note("reply_sent", reply=reply.number, first_packet_ns=reply.first_packet_ns,
                  speech_start_ns=reply.speech_start_ns, last_packet_ns=reply.last_packet_ns,
                  audible_until_ns=reply.audible_until_ns,
                  frames=reply.frames, dead_air_ms=reply.dead_air_ms)
        self.rtvi("bot-stopped-speaking")
        self._done_speaking()
        hang_up = self.settings.hang_up_after_replies
        if hang_up and reply.number >= hang_up:
            self.note("hang_up")
            self.spawn(self.pc.close())

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.pc.close()
        self.record.ended = True
