"""The user's live line (``server_vad`` turn taking): audio from connect to hang-up, in real time.

Like a phone line, the channel never pauses: every ``chunk_ms`` it carries the next frame of
what the simulated user is saying, or, between utterances, silence or the environment's
background (the mixer's continuous layers at the line's own time, so the room noise is
seamless across utterances). Frames are paced on the trial's clock (frame ``k`` is due at
``start + k * chunk``); every frame sent is recorded as a ``user.audio_chunk`` (``line: true``),
with the turn id of the utterance it belongs to. The moments an utterance's speech starts and
ends on the line are recorded exactly (``user.speech_started`` / ``user.speech_ended``: the
send time of the frame holding that sample plus its offset in the frame).

With a ``to_product`` telephony line (:class:`~._channel.ToProductLine`) a frame is one packet:
what is sent is the packet as it arrives (coded, or concealed when lost), when it arrives (its
slot plus its network delay); the speech moments stay the user's (the frame's slot).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio, PreparedEnvironment, add_echo, mix
from ..endpoints import ConversationEndpoint, EndpointError, ReportsDeparture
from ..recording import EventType, ExpectsResponse, Recording, UserAudio
from ._channel import ToProductLine
from ._probes import LineEcho, ProbeMark

logger = logging.getLogger(__name__)

_RATE = CANONICAL_SAMPLE_RATE_HZ


@dataclass
class Utterance:
    """What the user says on the line: the delivered (mixed) audio and where its speech is."""

    turn_id: str | None  # None: not the user speaking (a noise probe)
    audio: PcmAudio
    speech_start: int  # samples into ``audio``
    speech_end: int
    #: a selectivity probe (its sound's first and last samples are recorded as probe events)
    probe: ProbeMark | None = None
    #: set as the line reaches each point (line sample numbers and monotonic times)
    first_line_sample: int | None = None
    speech_started_ns: int | None = None
    speech_ended_ns: int | None = None
    sent: asyncio.Event = field(default_factory=asyncio.Event)
    speech_over: asyncio.Event = field(default_factory=asyncio.Event)


class UserLine:
    """Streams the user's side of a call (see the module docstring)."""

    def __init__(self, *, endpoint: ConversationEndpoint, recording: Recording,
                 environment: PreparedEnvironment, seed: int, chunk_ms: float,
                 on_failure: Callable[[EndpointError], None],
                 on_speech_ended: Callable[[Utterance], None] = lambda utterance: None,
                 product_line: ToProductLine | None = None):
        self.endpoint = endpoint
        self.recording = recording
        self.environment = environment
        self.seed = seed
        self.product_line = product_line
        self.frame_samples = product_line.packet_samples if product_line is not None \
            else max(1, int(round(chunk_ms * _RATE / 1000)))
        self.frame_ns = self.frame_samples * 1_000_000_000 // _RATE
        self.on_failure = on_failure
        self.on_speech_ended = on_speech_ended
        #: when the audio last sent really left, for an adapter that knows (a frame and the
        #: speech moments in it are stamped then); else a frame is stamped as handed over
        self._departure: Callable[[], int | None] | None = endpoint.last_departure_ns \
            if isinstance(endpoint, ReportsDeparture) else None
        self._queue: deque[Utterance] = deque()
        self._current: Utterance | None = None
        self._position = 0  # samples into the current utterance
        self.frames_sent = 0
        self._task: asyncio.Task[None] | None = None
        self._start_ns = 0
        #: the speakerphone echo added to every frame (an environment's ``echo``)
        self.echo: LineEcho | None = None

    # --- what the user says ---------------------------------------------------------------

    @property
    def next_line_sample(self) -> int:
        """Where an utterance said now would start on the line (after what is queued)."""
        queued = sum(u.audio.num_samples for u in self._queue)
        if self._current is not None:
            queued += self._current.audio.num_samples - self._position
        frames = -(-queued // self.frame_samples)
        return (self.frames_sent + frames) * self.frame_samples

    def mix_for_line(self, clean: PcmAudio, *, turn_number: int) -> tuple[PcmAudio, dict]:
        """``clean`` speech mixed with the environment where it will play on the line."""
        start = self.next_line_sample
        mixed = mix(clean, environment=self.environment, seed=self.seed, turn_number=turn_number,
                    stream_offset_seconds=start / _RATE)
        return mixed.audio, mixed.summary()

    def say(self, utterance: Utterance) -> None:
        """Queue ``utterance``: it starts with the next free frame."""
        self._queue.append(utterance)

    def sample_at(self, listener_ns: int) -> int:
        """The line sample said at listener time ``listener_ns`` (sample ``k`` is said ``k``
        samples after the line started: frames leave on that grid)."""
        origin = self.recording.offset_of(self._start_ns) + self.recording.shift_ns
        return (listener_ns - origin) * _RATE // 1_000_000_000

    @property
    def handed_until_ns(self) -> int:
        """When the line audio already handed to the adapter will have been said (clock ns):
        keys pressed now leave after it."""
        return self._start_ns + self.frames_sent * self.frame_ns

    @property
    def busy(self) -> bool:
        return self._current is not None or bool(self._queue)

    # --- the stream -----------------------------------------------------------------------

    def start(self) -> None:
        self._start_ns = self.recording.clock_ns()
        if self.echo is not None:
            self.echo.start(self.recording.listener_now_ns())
        self._task = asyncio.create_task(self._run(), name="voicelab-user-line")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _background(self, line_sample: int) -> np.ndarray:
        silence = PcmAudio(np.zeros(self.frame_samples, dtype=np.int16))
        if self.environment.is_silent:
            return silence.samples
        return mix(silence, environment=self.environment, seed=self.seed, turn_number=0,
                   stream_offset_seconds=line_sample / _RATE).audio.samples

    def _next_frame(self) -> tuple[np.ndarray, Utterance | None, int]:
        """The next frame's samples, the utterance it belongs to and where it starts in it."""
        if self._current is None and self._queue:
            self._current, self._position = self._queue.popleft(), 0
            self._current.first_line_sample = self.frames_sent * self.frame_samples
        utterance = self._current
        line_sample = self.frames_sent * self.frame_samples
        if utterance is None:
            return self._background(line_sample), None, 0
        begin = self._position
        piece = utterance.audio.samples[begin:begin + self.frame_samples]
        if piece.shape[0] < self.frame_samples:  # the utterance ends inside this frame
            rest = self._background(line_sample)[piece.shape[0]:]
            piece = np.concatenate([piece, rest])
        self._position += self.frame_samples
        return piece, utterance, begin

    async def _run(self) -> None:
        clock = self.recording.clock_ns
        try:
            while True:
                due = self._start_ns + self.frames_sent * self.frame_ns
                delay = due - clock()
                if delay > 0:
                    await asyncio.sleep(delay / 1e9)
                samples, utterance, begin = self._next_frame()
                if self.echo is not None:
                    samples = add_echo(samples, self.echo.for_frame(self.frames_sent,
                                                                    self.frame_samples))
                frame = PcmAudio(np.ascontiguousarray(samples, dtype=np.int16))
                index = self.frames_sent
                if self.product_line is None:
                    await self.endpoint.send_audio(frame)
                    departed = self._departure() if self._departure is not None else None
                    said_ns = clock() if departed is None else departed
                    self._record(frame, utterance.turn_id if utterance else None, said_ns,
                                 index)
                else:
                    said_ns = due
                    await self._send_down_the_line(frame, utterance)
                self.frames_sent += 1
                if utterance is not None:
                    self._mark(utterance, begin, said_ns)
        except EndpointError as error:
            self.on_failure(error)

    async def _send_down_the_line(self, frame: PcmAudio, utterance: Utterance | None) -> None:
        """Each packet the frame completes, as and when it reaches the product."""
        assert self.product_line is not None
        clock = self.recording.clock_ns
        for packet, arrival_ns in self.product_line.push(
                frame, turn_id=utterance.turn_id if utterance else None,
                line_start_ns=self._start_ns):
            delay = arrival_ns - clock()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            await self.endpoint.send_audio(packet.audio)
            turn_id = packet.record.turn_id
            self._record(packet.audio, str(turn_id) if turn_id is not None else None, clock(),
                         packet.record.index, lost=packet.record.lost or packet.record.late)

    def _record(self, frame: PcmAudio, turn_id: str | None, sent_ns: int, index: int, *,
                lost: bool | None = None) -> None:
        """One frame sent on the line (``lost``: a telephony packet lost or late, its
        concealment sent)."""
        attributes = UserAudio(line=True, chunk_index=index) if lost is None \
            else UserAudio(line=True, chunk_index=index, lost=lost)
        self.recording.record(
            EventType.USER_AUDIO, attributes, source="evaluator", direction="outbound",
            at_ns=sent_ns, turn_id=turn_id, speaker_role="user" if turn_id else None,
            audio=frame.to_bytes())

    def _mark(self, utterance: Utterance, begin: int, sent_ns: int) -> None:
        end = begin + self.frame_samples
        if utterance.probe is not None:
            utterance.probe.mark(self.recording, utterance.turn_id, begin=begin, end=end,
                                 sent_ns=sent_ns)
        if utterance.turn_id is None:  # a sound, not the user speaking
            if end >= utterance.audio.num_samples:
                utterance.speech_ended_ns = sent_ns
                utterance.speech_over.set()
                utterance.sent.set()
                self._current = None
            return
        for point, kind in ((utterance.speech_start, EventType.USER_SPEECH_STARTED),
                            (utterance.speech_end, EventType.USER_SPEECH_ENDED)):
            # a start is in the frame holding its sample; an end in the frame its last sample
            # ends (an end on a frame boundary belongs to the frame before it, once)
            inside = begin < point <= end if kind is EventType.USER_SPEECH_ENDED \
                else begin <= point < end
            if inside:
                at = sent_ns + (point - begin) * 1_000_000_000 // _RATE
                if kind is EventType.USER_SPEECH_STARTED:
                    utterance.speech_started_ns = at
                    self.recording.record(kind, source="evaluator", direction="outbound",
                                          at_ns=at, turn_id=utterance.turn_id,
                                          speaker_role="user")
                else:
                    utterance.speech_ended_ns = at
                    self.recording.record(kind, ExpectsResponse(expects_response=utterance.turn_id),
                                          source="evaluator", direction="outbound", at_ns=at,
                                          turn_id=utterance.turn_id, speaker_role="user")
                    utterance.speech_over.set()
                    self.on_speech_ended(utterance)
        if end >= utterance.audio.num_samples:
            if not utterance.speech_over.is_set():  # no speech end inside the audio
                utterance.speech_ended_ns = sent_ns
                utterance.speech_over.set()
                self.on_speech_ended(utterance)
            utterance.sent.set()
            self._current = None
