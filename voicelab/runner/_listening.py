"""Listening turn taking (``server_vad``): a live line and a simulated user that listens.

The product decides by voice activity when the user has finished; the evaluator never commits
a turn. The user's side is a :class:`~._line.UserLine` (speech, then silence or room noise, in
real time). A product reply is over when the simulated user has heard its speech followed by
``listener.reply_end_hangover_ms`` of silence (:class:`~._heard_speech.HeardSpeech`), or earlier
when the wire says the response is done and its audio has played. A barge-in is the user speaking over
the product (no cancel is sent: on a line, a user can only speak).

Product output is attributed to the turn whose speech ended last (``turn-000`` before any), so
silence frames a product streams between replies belong to the period they fall in: its first
packet is ``first_audio_latency_ms``, the onset of its speech ``response_latency_ms``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np

from ..audio import PcmAudio
from ..endpoints import EndpointError
from ..personas import ProductResponse, UserTurn
from ..recording import EventType, ProbeSkipped, ProductTurn, UserBargeIn
from ._conversation import Conversation
from ._conversation_end import ConversationEnded, Failure
from ._key_prompts import PromptWatch
from ._line import UserLine, Utterance
from ._probes import LineEcho, ProbeMark, audible_bounds, noise_probes_for, noise_sound
from ._user_speech import Prepared
from ._user_turn import _turn_id, is_key_barge_in

#: How often the listener checks what it has heard while nothing else wakes it.
LISTEN_TICK_SECONDS = 0.02
#: A timed utterance (a barge-in, a backchannel) is queued this many line frames before its
#: speech is due, and padded (or its leading silence trimmed) so that its first speech sample
#: is said exactly then: the frame it starts in is not yet cut when it is queued.
TIMED_LEAD_FRAMES = 3
#: Keys are pressed this long before the line hands its next chunk to the adapter (the
#: chunk's audio would otherwise be queued ahead of them).
KEY_LEAD_NS = 2_000_000
#: How long a failed send on the line waits for the product's own account of the call's end.
LINE_FAILURE_GRACE_SECONDS = 1.0


def aligned(prepared: Prepared, samples: int) -> Prepared:
    """``prepared`` moved so its speech starts ``samples`` after the line position it is queued
    at: leading silence added (the environment is mixed into it like any other), or the
    utterance's own leading silence trimmed (never its speech: a moment already past is met as
    soon as the line can)."""
    bounds = prepared.bounds
    speech_start = bounds.start_sample if bounds is not None else 0
    pad = samples - speech_start
    if pad < 0:
        pad = -min(-pad, speech_start)
    if pad == 0:
        return prepared

    def moved(audio: PcmAudio) -> PcmAudio:
        if pad > 0:
            return PcmAudio(np.concatenate([np.zeros(pad, dtype=np.int16), audio.samples]),
                            audio.sample_rate_hz)
        return PcmAudio(audio.samples[-pad:], audio.sample_rate_hz)

    return replace(prepared, clean=moved(prepared.clean),
                   delivered=moved(prepared.delivered) if prepared.delivered is not None
                   else None,
                   bounds=replace(bounds, start_sample=bounds.start_sample + pad,
                                  end_sample=bounds.end_sample + pad)
                   if bounds is not None else None,
                   pauses=tuple((start + pad, end + pad) for start, end in prepared.pauses))


class ServerVadConversation(Conversation):
    listening = True

    def __init__(self, **options: object):
        super().__init__(**options)  # type: ignore[arg-type]
        self.line: UserLine | None = None
        self._line_failure: EndpointError | None = None
        self._line_failed_ns = 0
        self.replies_heard = 0  # product replies whose speech the user has heard begin
        self.probes_played = 0

    # --- the loop ---------------------------------------------------------------------------

    async def _run(self) -> str:
        root = self.recording.root_span_id
        self.recording.record(EventType.CONNECT_STARTED, source="evaluator",
                              direction="outbound", span_id=root)
        try:
            await self.endpoint.connect()
        except EndpointError as error:
            raise ConversationEnded("error", Failure("endpoint", self._scrub(str(error)),
                                                     error.code)) from None
        expects = "turn-000" if self.first_speaker != "user" else None
        connected = self.recording.record(
            EventType.CONNECTED, self._connected(expects_response=expects,
                                                 turn_detection="server_vad"),
            source="evaluator", direction="outbound", span_id=root)
        self._pump = asyncio.create_task(self.intake.pump(self.endpoint.events()))
        self.line = UserLine(endpoint=self.endpoint, recording=self.recording,
                             environment=self.environment, seed=self.seed,
                             chunk_ms=self.chunk_ms, on_failure=self._line_failed,
                             on_speech_ended=self._speech_ended,
                             product_line=self.product_line)
        echo = self.environment.config.echo
        if echo is not None:
            assert self.heard_speech is not None
            self.line.echo = LineEcho(echo, heard_speech=self.heard_speech, seed=self.seed)
            self.recording.record(EventType.ENVIRONMENT_ECHO,
                                  self.line.echo.describe(self.line.frame_samples),
                                  source="environment", direction="internal")
        self.line.start()
        await self._start_persona()
        return await self._take_turns(
            lambda: self._await_reply("turn-000", since_ns=connected.listener_ns))

    async def _take_turn(self, turn: UserTurn) -> None:
        """Say ``turn`` on the line (keys after its speech), then listen for the reply."""
        utterance = await self._say(turn)
        assert utterance.turn_id is not None
        await self._until(utterance.speech_over)
        if turn.dtmf:  # keys after the speech: once its last sample has played out
            assert utterance.speech_ended_ns is not None
            await asyncio.sleep(max(0, utterance.speech_ended_ns
                                    - self.recording.clock_ns()) / 1e9)
            try:
                await self._press(turn, utterance.turn_id)
            except EndpointError as error:
                self._line_failed(error)
        assert utterance.speech_ended_ns is not None
        await self._await_reply(utterance.turn_id,
                                since_ns=self.recording.offset_of(utterance.speech_ended_ns))

    async def _press(self, turn: UserTurn, turn_id: str) -> None:
        """Press the turn's keys once the line audio already handed to the adapter has been
        said: an adapter sends keys after the audio it holds, so the keys leave when
        ``user.dtmf`` is stamped (within one of the adapter's frames), not up to a line chunk
        later."""
        if turn.dtmf and self.line is not None:
            for _ in range(2):  # the line may hand its next chunk while this one waits
                wait_ns = self.line.handed_until_ns - KEY_LEAD_NS - self.recording.clock_ns()
                if wait_ns <= 0:
                    break
                await asyncio.sleep(wait_ns / 1e9)
        await super()._press(turn, turn_id)

    async def _product_opens(self) -> bool:
        if self.first_speaker != "auto":
            return self.first_speaker == "product"
        heard_speech = self.heard_speech
        assert heard_speech is not None
        deadline = self.recording.listener_now_ns() + int(self.first_speaker_wait_seconds * 1e9)
        while self.recording.listener_now_ns() < deadline:
            self._check()
            heard_speech.listen_until(self.recording.listener_now_ns())
            if heard_speech.spoke_after(0):
                return True
            await self.intake.wait_signal(LISTEN_TICK_SECONDS)
        return False

    # --- speaking ---------------------------------------------------------------------------

    async def _say(self, turn: UserTurn, *, barge_in_of: str | None = None,
                   probe_of: str | None = None, speech_at_ns: int | None = None) -> Utterance:
        """Queue ``turn`` on the line (it starts with the next frame); ``probe_of``: the turn
        whose reply it probes (a backchannel or an interruption); ``speech_at_ns``: the
        listener time its first speech sample is to be said (see :func:`aligned`)."""
        assert self.line is not None
        number = self.user_turns + 1
        turn_id = _turn_id(number)
        prepared = await self._prepare(turn)
        room = self.line.sample_at(self.max_time_ns) - self.line.next_line_sample
        if room <= 0:
            raise ConversationEnded("max_time")
        prepared = prepared.cut(room)  # what the line can say before the time limit
        if speech_at_ns is not None:
            prepared = aligned(prepared, self.line.sample_at(speech_at_ns)
                               - self.line.next_line_sample).cut(room)
        delivered, summary = prepared.delivered, prepared.mix_summary
        if delivered is None:  # (a replayed turn has its environment in it already)
            delivered, summary = self.line.mix_for_line(prepared.clean, turn_number=number)
        self.user_turns = number
        self.intake.user_turn_id = turn_id
        self._record_turn(turn, prepared, turn_id=turn_id, mix_summary=summary,
                          barge_in_of=barge_in_of)
        bounds = prepared.bounds
        start = bounds.start_sample if bounds else 0
        end = bounds.end_sample if bounds else delivered.num_samples
        probe = None
        if probe_of is not None:
            probe = self._probe_mark(turn.kind if turn.kind != "speech" else "interruption",
                                     probe_of, start, end, label=turn.text,
                                     after_product_speech_ms=round(
                                         float(turn.interrupt_after_seconds or 0) * 1000, 3))
        utterance = Utterance(turn_id, delivered, speech_start=start, speech_end=end,
                              probe=probe)
        self.line.say(utterance)
        return utterance

    def _probe_mark(self, kind: str, response_turn: str, start: int, end: int,
                    **details: str | int | float) -> ProbeMark:
        """The next probe; ``details``: what its events record besides (``ProbeMarked``)."""
        self.probes_played += 1
        return ProbeMark(f"probe-{self.probes_played:03d}", kind, response_turn, start, end,
                         details)

    async def _play_noise(self, index: int, response_turn: str) -> None:
        """An environment noise probe on the line (not the user speaking: no turn)."""
        assert self.line is not None
        probe = self.environment.config.noise_probes[index]
        sound = noise_sound(self.environment.probe_sounds[index], probe.volume)
        delivered, _ = self.line.mix_for_line(PcmAudio(sound), turn_number=0)
        start, end = audible_bounds(sound)
        mark = self._probe_mark("noise", response_turn, start, end, label=probe.sound.name,
                                noise_probe_index=index, volume=probe.volume,
                                after_product_speech_ms=round(probe.after_seconds * 1000, 3))
        self.line.say(Utterance(None, delivered, speech_start=start, speech_end=end,
                                probe=mark))

    async def _backchannel(self, turn: UserTurn, response_turn: str, *,
                           speech_at_ns: int | None = None) -> None:
        """A short acknowledgement said into the reply; the user keeps listening to it."""
        self.persona.confirm_barge_in(turn)
        await self._say(turn, probe_of=response_turn, speech_at_ns=speech_at_ns)

    def _speech_ended(self, utterance: Utterance) -> None:
        if utterance.probe is not None and utterance.probe.kind != "interruption":
            return  # a backchannel does not take the turn: the reply still answers its turn
        # from now on, product output answers this turn
        self.intake.period_turn = utterance.turn_id  # type: ignore[assignment]

    def _line_failed(self, error: EndpointError) -> None:
        self._line_failure = error
        self._line_failed_ns = self.recording.clock_ns()
        self.intake.wake()

    # --- listening --------------------------------------------------------------------------

    def _check(self) -> None:
        """End the conversation when the product has completed it, or the call has failed.

        Completion comes first: a product that hangs up makes the line's next send fail at
        about the moment its completion arrives, and the line may notice first. So a line
        failure waits for the product's event stream to end (or ``LINE_FAILURE_GRACE_SECONDS``)
        before it is the call's outcome."""
        if self.intake.conversation_complete:
            raise ConversationEnded("endpoint_completion")
        if self._line_failure is not None:
            waited = self.recording.clock_ns() - self._line_failed_ns
            if self.intake.ended or waited >= LINE_FAILURE_GRACE_SECONDS * 1e9:
                error = self._line_failure
                raise ConversationEnded(self._closed_or_error(), Failure(
                    "endpoint", self._scrub(str(error)), error.code))
        self._check_product_failures()
        self._check_time()  # a reply or a turn cut at the limit has played up to it

    async def _until(self, event: asyncio.Event) -> None:
        """Wait for ``event`` (a line milestone), failing as soon as the call fails."""
        while not event.is_set():
            self._check()
            waiter = asyncio.ensure_future(event.wait())
            try:
                await asyncio.wait({waiter}, timeout=LISTEN_TICK_SECONDS)
            finally:
                waiter.cancel()

    async def _await_reply(self, turn_id: str, *, since_ns: int) -> None:
        """Listen until the reply to ``turn_id`` is over; barge in if the persona wants to."""
        noise: list[int] = []  # the environment's noise probes still to play into this reply
        try:
            await self._listen_to_reply(turn_id, since_ns=since_ns, noise=noise)
        finally:
            for index in noise:  # the reply ended before their moment: said so, not dropped
                self._skip_noise(index, turn_id)

    def _skip_noise(self, index: int, response_turn: str, *,
                    reason: str = "the reply was over before the probe's moment") -> None:
        probe = self.environment.config.noise_probes[index]
        self.probes_played += 1
        self.recording.record(EventType.PROBE_SKIPPED, ProbeSkipped(
            probe_id=f"probe-{self.probes_played:03d}", kind="noise",
            response_turn_id=response_turn, label=probe.sound.name, noise_probe_index=index,
            after_product_speech_ms=round(probe.after_seconds * 1000, 3), reason=reason),
            source="evaluator", direction="internal")

    async def _listen_to_reply(self, turn_id: str, *, since_ns: int, noise: list[int]) -> None:
        intake, heard_speech = self.intake, self.heard_speech
        assert heard_speech is not None
        barge: UserTurn | None = None
        asked = False
        speech_onset: int | None = None
        while True:
            self._check()
            if intake.conversation_complete:
                return
            now = self.recording.listener_now_ns()
            heard_speech.listen_until(now)
            if speech_onset is None:
                speech_onset = heard_speech.first_onset_ns(since_ns)
                if speech_onset is not None:
                    self.replies_heard += 1
                    noise.extend(index for index, _ in noise_probes_for(
                        self.environment.config.noise_probes, self.replies_heard))
            for index in list(noise):
                due = self.environment.config.noise_probes[index].after_seconds
                if speech_onset is not None and now >= speech_onset + int(due * 1e9):
                    noise.remove(index)
                    await self._play_noise(index, turn_id)
            response = intake.response_for(turn_id)
            if speech_onset is not None and not asked:
                asked = True
                candidate = self.persona.barge_in(self._reply_view(response))
                if candidate is not None and candidate.interrupt_after_seconds is not None:
                    barge = candidate
                    self._prepare_soon(candidate)
            due_ns = None if barge is None or speech_onset is None else \
                speech_onset + int(float(barge.interrupt_after_seconds or 0) * 1e9)
            if barge is not None and due_ns is not None and now >= self._act_at(barge, due_ns):
                if barge.kind == "backchannel":
                    await self._backchannel(barge, turn_id, speech_at_ns=due_ns)
                    barge, asked = None, False  # the next probe may come into the same reply
                    continue
                if is_key_barge_in(barge):
                    await self._key_barge_in(barge, turn_id, heard_onset_ns=speech_onset)
                    return
                utterance = await self._barge_in_on_line(barge, turn_id, speech_at_ns=due_ns,
                                                         heard_onset_ns=speech_onset)
                assert utterance.turn_id is not None
                await self._until(utterance.speech_over)
                assert utterance.speech_ended_ns is not None
                await self._await_reply(utterance.turn_id, since_ns=self.recording.offset_of(
                    utterance.speech_ended_ns))
                return
            if heard_speech.reply_over(since_ns):
                return
            if response is not None and response.completed and speech_onset is not None \
                    and self.recording.timeline.cursor_ns <= now:
                return  # the wire says the reply is done and all of it has played
            # silent for the timeout as far as the product's audio has been delivered (an
            # evaluator behind its socket has not heard the reply waiting there yet)
            if speech_onset is None and heard_speech.heard_until_ns - since_ns \
                    >= self.response_timeout_seconds * 1e9:
                raise ConversationEnded("no_response", self._no_speech(turn_id))
            wait = LISTEN_TICK_SECONDS
            if barge is not None and due_ns is not None:  # wake when it is time to queue it
                wait = min(wait, max(0.0, (self._act_at(barge, due_ns) - now) / 1e9))
            await intake.wait_signal(wait)

    def _act_at(self, barge: UserTurn, due_ns: int) -> int:
        """When a timed turn due at ``due_ns`` is acted on: speech is queued a few frames
        ahead (its first sample is then said on time); keys are pressed at the moment."""
        return due_ns if is_key_barge_in(barge) else due_ns - self._lead_ns()

    def _lead_ns(self) -> int:
        assert self.line is not None
        return TIMED_LEAD_FRAMES * self.line.frame_ns

    async def _barge_in_on_line(self, turn: UserTurn, response_turn: str, *,
                                speech_at_ns: int | None = None,
                                heard_onset_ns: int | None = None) -> Utterance:
        self.recording.record(EventType.USER_BARGE_IN, UserBargeIn(
            response_turn_id=response_turn, cancel_sent=False, flush=False,
            after_product_audio_ms=round(float(turn.interrupt_after_seconds or 0) * 1000, 3),
            kind=turn.kind, heard_speech_onset_ms=None if heard_onset_ns is None
            else round(heard_onset_ns / 1e6, 3)),
            source="evaluator", direction="outbound", turn_id=_turn_id(self.user_turns + 1),
            speaker_role="user")
        self.persona.confirm_barge_in(turn)
        return await self._say(turn, barge_in_of=response_turn, probe_of=response_turn,
                               speech_at_ns=speech_at_ns)

    async def _key_barge_in(self, turn: UserTurn, response_turn: str, *,
                            heard_onset_ns: int | None) -> None:
        """A key barge-in: ``turn``'s keys pressed into the reply to ``response_turn`` now
        (nothing is said on the line). The product's output stays the barged reply's until
        its prompt is over (:class:`~._key_prompts.PromptWatch`), so its stop and its next
        prompt are told apart; then the reply to the keys is awaited."""
        self.recording.record(EventType.USER_BARGE_IN, UserBargeIn(
            response_turn_id=response_turn, cancel_sent=False, flush=False,
            after_product_audio_ms=round(float(turn.interrupt_after_seconds or 0) * 1000, 3),
            kind="keys", heard_speech_onset_ms=None if heard_onset_ns is None
            else round(heard_onset_ns / 1e6, 3)),
            source="evaluator", direction="outbound", turn_id=_turn_id(self.user_turns + 1),
            speaker_role="user")
        self.persona.confirm_barge_in(turn)
        number = self.user_turns + 1
        turn_id = _turn_id(number)
        self.user_turns = number
        self.intake.user_turn_id = turn_id
        nothing = PcmAudio(np.zeros(0, dtype=np.int16))
        self._record_turn(turn, Prepared(nothing, {"provider": "dtmf", "cached": False}, None),
                          turn_id=turn_id, mix_summary={}, barge_in_of=response_turn)
        try:
            await self._press(turn, turn_id)
        except EndpointError as error:
            self._line_failed(error)
        pressed_ns = self.recording.listener_now_ns()
        deadline = pressed_ns + int(self.response_timeout_seconds * 1e9)
        assert self.heard_speech is not None
        watch = PromptWatch(self.recording, self.intake, self.heard_speech, self._check)
        await watch.stopped(response_turn, pressed_ns=pressed_ns, deadline_ns=deadline)
        self.intake.period_turn = turn_id
        await self._await_reply(turn_id, since_ns=await watch.reply_from(
            turn_id, deadline_ns=deadline))

    def _reply_view(self, response: object) -> ProductResponse:
        if isinstance(response, ProductTurn):
            return self._view_of(response)
        return ProductResponse(index=-1, status="in_progress")

    def _no_speech(self, turn_id: str) -> Failure:
        seconds = f"{self.response_timeout_seconds:g} s"
        if turn_id == "turn-000" and self.first_speaker == "product":
            return Failure("timeout", f"the product did not speak first within {seconds} "
                           f"(scenario conversation.first_speaker: product); if it waits for "
                           f"the user, set first_speaker: user (or auto)", "response_timeout")
        return Failure("timeout", f"the product did not speak within {seconds} after the "
                       f"user's speech ended", "response_timeout")

    # --- shutdown ---------------------------------------------------------------------------

    async def shutdown(self) -> None:
        for index, probe in enumerate(self.environment.config.noise_probes):
            if probe.on_reply > self.replies_heard:  # its reply never came: said so
                self._skip_noise(index, "", reason=f"the call had {self.replies_heard} "
                                 f"product repl{'y' if self.replies_heard == 1 else 'ies'}")
        try:
            if self.line is not None:
                await self.line.stop()  # hang up before closing the connection
        finally:  # an interruption while hanging up still closes everything
            await super().shutdown()
