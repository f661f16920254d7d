"""One trial's conversation loop: the only place that knows the order of a conversation.

Exit reasons (``trial-report.json: exit_reason``):

* ``endpoint_completion``: the product ended the conversation (``conversation_complete``);
* ``script_exhaustion``: the scripted persona had nothing left to say and the product did not
  complete within ``post_script_completion_wait_seconds``;
* ``persona_ended``: an LLM or realtime persona decided the conversation was over;
* ``repeat_limit``: the scripted persona asked the product to repeat itself too often in a row;
* ``max_turns``: the user would speak more than ``max_turns`` times;
* ``max_time``: ``max_time_seconds`` elapsed on the listener's clock (real time, plus what an
  unpaced trial advanced it by): a user turn or a product reply that would run past it is cut
  there, and the turn's audio is never made beyond it;
* ``no_response``: the product sent nothing for ``response_timeout_seconds`` when a response was due;
* ``connection_closed``: the connection closed before the product completed the conversation;
* ``error``: the product sent an error, or the adapter, persona or speech provider failed;
* ``cancelled``: the run was interrupted (Ctrl-C).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from ..audio import PreparedEnvironment, mix
from ..config import MAX_TRIAL_SECONDS, ListenerConfig
from ..endpoints import (
    AdapterAbilities,
    DeclaresConversionDelay,
    DeclaresWireCodec,
    EndpointError,
    ReportsArrivalStamps,
    ReportsCallSetup,
    ReportsReceiveBacklog,
    abilities_of,
)
from ..errors import ExecutionError
from ..personas import PersonaEnd, UserTurn
from ..recording import (
    USER_HEARD,
    Connected,
    EventType,
    ExpectsResponse,
    PcmStream,
    PersonaEnded,
    ProductTurn,
    Recording,
    UserAudio,
    UserBargeIn,
    ns_to_samples,
)
from ._channel import ToProductLine, ToUserLine, line_config
from ._conversation_end import ConversationEnded, Failure
from ._heard_speech import HeardSpeech
from ._intake import AudioFloodLimit, Intake
from ._persona_view import PersonaView
from ._user_speech import TurnSpeech
from ._user_turn import UserTurns, _turn_id

logger = logging.getLogger(__name__)

#: After the persona has nothing more to say, wait at least this long for the product's own
#: completion message that may already be on its way.
COMPLETION_GRACE_SECONDS = 0.25
DEFAULT_CHUNK_MS = 100.0


class Conversation(PersonaView, UserTurns):
    """Drives persona, speech, environment and endpoint for one trial."""

    def __init__(self, *, endpoint: Any, persona: Any, speech: Any, environment: PreparedEnvironment,
                 recording: Recording, seed: int, voice: str | None, pace_audio: bool,
                 first_speaker: str, max_turns: int, response_timeout_seconds: float,
                 chunk_ms: float = DEFAULT_CHUNK_MS, scrubber: Any = None,
                 flood_limit: AudioFloodLimit | None = None,
                 first_speaker_wait_seconds: float = 3.0,
                 listener: ListenerConfig | None = None,
                 abilities: AdapterAbilities | None = None,
                 max_time_seconds: float = MAX_TRIAL_SECONDS):
        self.endpoint = endpoint
        #: what the adapter can do beyond the protocol (its wire codec, conversion delays)
        self.abilities = abilities or abilities_of(type(endpoint))
        # an adapter object may know its wire's codec from its settings (SIP: the first offered)
        declared = endpoint.wire_codec if isinstance(endpoint, DeclaresWireCodec) else None
        wire_codec = declared if isinstance(declared, str) else self.abilities.wire_codec
        self.persona = persona
        self.speech = speech
        self.environment = environment
        self.recording = recording
        self.seed = seed
        self.voice = voice
        self.pace_audio = pace_audio
        self.first_speaker = first_speaker
        self.max_turns = max_turns
        self.response_timeout_seconds = response_timeout_seconds
        self.chunk_ms = chunk_ms
        self.scrubber = scrubber
        self.first_speaker_wait_seconds = first_speaker_wait_seconds
        self.listener = listener or ListenerConfig()
        #: the trial's time limit on the listener's clock (see the module docstring)
        self.max_time_ns = int(max_time_seconds * 1e9)
        # the telephony line, when the environment has one (see ._channel)
        to_product, codec = line_config(environment.config.channel, "to_product",
                                        wire_codec=wire_codec)
        self.product_line = ToProductLine(to_product, seed=seed, codec=codec) \
            if to_product is not None else None
        to_user, codec = line_config(environment.config.channel, "to_user",
                                     wire_codec=wire_codec)
        self.to_user_line: ToUserLine | None = None
        if to_user is not None:
            heard = recording.streams[USER_HEARD] = PcmStream()
            self.to_user_line = ToUserLine(
                to_user, seed=seed, jitter_buffer_ms=self.listener.jitter_buffer_ms,
                heard=heard, codec=codec)
        self.heard_speech = HeardSpeech(
            recording, hangover_ms=self.listener.reply_end_hangover_ms,
            to_user_line=self.to_user_line) \
            if self.listening or self.to_user_line is not None else None
        if self.heard_speech is not None and isinstance(endpoint, ReportsReceiveBacklog):
            self.heard_speech.backlog = endpoint.oldest_waiting_ns
        self.intake = Intake(recording, flood_limit=flood_limit, listening=self.listening,
                             max_time_ns=self.max_time_ns)
        self.user_turns = 0
        self.mic_offset_seconds = 0.0
        self.failures: list[Failure] = []
        self._pump: asyncio.Task[None] | None = None
        self.turn_speech = TurnSpeech(speech=speech, recording=recording, voice=voice, seed=seed,
                                      trial_samples=self._trial_samples)

    #: listening turn taking (``server_vad``): see :mod:`._listening`
    listening = False

    # --- listener timeline ----------------------------------------------------------------------

    async def _reach(self, target_listener_ns: int, reason: str) -> None:
        """Let the listener timeline reach ``target``: sleep with pacing, advance without. A
        target past the time limit is reached up to the limit, where the trial ends."""
        if target_listener_ns > self.max_time_ns:
            await self._reach(self.max_time_ns, reason)
            raise ConversationEnded("max_time")
        remaining = target_listener_ns - self.recording.listener_now_ns()
        if remaining <= 0:
            return
        if self.pace_audio:
            await asyncio.sleep(remaining / 1e9)
        else:
            self.recording.advance(remaining, reason)

    # --- the time limit -------------------------------------------------------------------------

    def _check_time(self) -> None:
        """End the trial once the listener's clock has reached the time limit."""
        if self.recording.listener_now_ns() >= self.max_time_ns:
            raise ConversationEnded("max_time")

    def _seconds_left(self) -> float:
        return max(0, self.max_time_ns - self.recording.listener_now_ns()) / 1e9

    @property
    def _trial_samples(self) -> int:
        """The most audio one turn can need: the whole trial's time limit."""
        return ns_to_samples(self.max_time_ns)

    async def _end_at_time_limit(self, reason: str) -> NoReturn:
        """The listener hears what was received up to the limit; then the trial ends."""
        await self._reach(self.max_time_ns, reason)
        raise ConversationEnded("max_time")

    # --- the loop -------------------------------------------------------------------------------

    async def run(self) -> str:
        """Run until an exit condition; returns the exit reason (failures in ``self.failures``)."""
        try:
            return await self._run()
        except ConversationEnded as ended:
            if ended.failure is not None:
                self.failures.append(ended.failure)
            return ended.exit_reason

    async def _run(self) -> str:
        root = self.recording.root_span_id
        self.recording.record(EventType.CONNECT_STARTED, source="evaluator",
                              direction="outbound", span_id=root)
        try:
            await self.endpoint.connect()
        except EndpointError as error:
            raise ConversationEnded("error", Failure("endpoint", self._scrub(str(error)),
                                                     error.code)) from None
        # an opening (turn-000) is timed from the init; with `auto` the product may not open
        expects = "turn-000" if self.first_speaker != "user" else None
        if self.first_speaker == "product":
            self.intake.expect_response("turn-000")
        self.recording.record(EventType.CONNECTED,
                              self._connected(expects_response=expects),
                              source="evaluator", direction="outbound", span_id=root)
        self._pump = asyncio.create_task(self.intake.pump(self.endpoint.events()))
        await self._start_persona()
        return await self._take_turns(lambda: self._await_response("turn-000"))

    def _connected(self, *, expects_response: str | None,
                   turn_detection: str | None = None) -> Connected:
        """``session.connected``: the response it expects, and the adapter's constant
        conversion delays (when it declares any)."""
        values: dict[str, Any] = {"expects_response": expects_response}
        if turn_detection is not None:
            values["turn_detection"] = turn_detection
        endpoint = self.endpoint
        delays = self.abilities.conversion_delay_ms
        if delays and isinstance(endpoint, DeclaresConversionDelay):
            delays = endpoint.conversion_delay_ms  # once connected (SIP: its codec's own)
        if delays:
            values["conversion_delay_ms"] = {direction: round(float(ms), 6)
                                             for direction, ms in delays.items()}
        stamps = endpoint.arrival_stamps() if isinstance(endpoint, ReportsArrivalStamps) else "loop"
        if stamps != "loop":
            values["arrival_stamps"] = stamps
        setup_ms = endpoint.call_setup_ms() if isinstance(endpoint, ReportsCallSetup) else None
        if setup_ms is not None:
            values["call_setup_ms"] = round(float(setup_ms), 3)
        return Connected(**values)

    async def _take_turns(self, await_opening: Callable[[], Awaitable[Any]]) -> str:
        """The conversation's turns until it ends (its exit reason): the product's opening
        (``await_opening``) or the persona's, then one user turn (:meth:`_take_turn`) per
        persona decision."""
        decision: UserTurn | PersonaEnd | None = None
        if await self._product_opens():
            await await_opening()
        else:
            decision = await self._ask_persona(self.persona.opening())
        while True:
            await self._settle()
            if self.intake.conversation_complete:
                return "endpoint_completion"
            self._check_time()
            if decision is None:
                decision = await self._ask_persona(self.persona.reply(self._response_view()))
            if isinstance(decision, PersonaEnd):
                self.recording.record(EventType.PERSONA_ENDED, PersonaEnded(
                    exit_reason=decision.exit_reason, message=decision.message),
                    source="persona", direction="internal")
                wait = max(decision.wait_seconds, COMPLETION_GRACE_SECONDS)
                if await self.intake.wait_for(lambda: self.intake.conversation_complete, wait):
                    return "endpoint_completion"
                return decision.exit_reason
            if self.user_turns >= self.max_turns:
                return "max_turns"
            await self._take_turn(decision)
            decision = None

    async def _take_turn(self, turn: UserTurn) -> None:
        """Say ``turn`` once the product's audio has played out, and await the reply."""
        await self._wait_for_playback_end()
        await self._await_response(await self._speak(turn))

    async def _start_persona(self) -> None:
        try:
            await self.persona.start()
            await self._warm_up()
        except ExecutionError as error:
            raise ConversationEnded("error", Failure("persona", self._scrub(str(error)))) from None

    async def _product_opens(self) -> bool:
        """Whether the product has the first turn: always for ``first_speaker: product``, never
        for ``user``; for ``auto`` when it starts to speak within ``first_speaker_wait_seconds``."""
        if self.first_speaker != "auto":
            return self.first_speaker == "product"
        return await self.intake.wait_for(lambda: self.intake.current is not None,
                                          self.first_speaker_wait_seconds)

    async def _ask_persona(self, call: Any) -> UserTurn | PersonaEnd:
        try:
            return await call
        except ExecutionError as error:
            raise ConversationEnded("error", Failure("persona", self._scrub(str(error)))) from None

    async def _settle(self) -> None:
        """Let already-received events reach the timeline before deciding what comes next."""
        for _ in range(3):
            await asyncio.sleep(0)

    async def _wait_for_playback_end(self) -> None:
        # the end comes down the line too
        lag = self.to_user_line.lag_ns if self.to_user_line is not None else 0
        await self._reach(self.recording.timeline.cursor_ns + lag, "product playback")

    # --- speaking -------------------------------------------------------------------------------

    async def _speak(self, turn: UserTurn, *, barge_in_of: str | None = None) -> str:
        number = self.user_turns + 1
        turn_id = _turn_id(number)
        self.intake.user_turn_id = turn_id
        recording = self.recording
        prepared = await self._prepare(turn)
        room = ns_to_samples(self.max_time_ns - recording.listener_now_ns())
        if room <= 0:
            raise ConversationEnded("max_time")
        prepared = prepared.cut(room)  # what fits before the time limit
        delivered, summary = prepared.delivered, prepared.mix_summary
        if delivered is None:
            mixed = mix(prepared.clean, environment=self.environment, seed=self.seed,
                        turn_number=number, stream_offset_seconds=self.mic_offset_seconds)
            delivered, summary = mixed.audio, mixed.summary()
        self.mic_offset_seconds += prepared.clean.duration_seconds
        self.user_turns = number
        self._record_turn(turn, prepared, turn_id=turn_id, mix_summary=summary,
                          barge_in_of=barge_in_of)
        if self.product_line is not None:  # down the line: packets, each when it arrives
            packets = self.product_line.turn(delivered, turn_id=turn_id)
        else:
            frame_ns = int(self.chunk_ms * 1e6)
            packets = [(frame, index * frame_ns)
                       for index, frame in enumerate(delivered.chunks(self.chunk_ms))]
        clock = recording.clock_ns
        start_ns = clock()
        try:
            for index, (frame, arrival_ns) in enumerate(packets):
                if self.pace_audio and (index or arrival_ns):
                    delay = start_ns + arrival_ns - clock()
                    if delay > 0:
                        await asyncio.sleep(delay / 1e9)
                await self.endpoint.send_audio(frame)
                recording.record(EventType.USER_AUDIO, UserAudio(chunk_index=index),
                                 source="evaluator", direction="outbound", turn_id=turn_id,
                                 speaker_role="user", audio=frame.to_bytes())
            last_arrival = packets[-1][1] if packets else 0
            duration_ns = max(int(delivered.duration_seconds * 1e9),
                              last_arrival + (int(packets[-1][0].duration_seconds * 1e9)
                                              if packets else 0))
            if self.pace_audio:
                delay = start_ns + duration_ns - clock()
                if delay > 0:
                    await asyncio.sleep(delay / 1e9)
            else:
                recording.advance(min(duration_ns - (clock() - start_ns),
                                      self.max_time_ns - recording.listener_now_ns()),
                                  "user speech")
            if prepared.truncated:  # said up to the time limit: the call ends there
                logger.info("%s was cut at the trial's time limit", turn_id)
                raise ConversationEnded("max_time")
            await self._press(turn, turn_id)
            self.intake.expect_response(turn_id)
            await self.endpoint.commit_turn()
        except EndpointError as error:
            raise ConversationEnded(self._closed_or_error(), Failure(
                "endpoint", self._scrub(str(error)), error.code)) from None
        recording.record(EventType.USER_TURN_COMMITTED, ExpectsResponse(expects_response=turn_id),
                         source="evaluator", direction="outbound", turn_id=turn_id,
                         speaker_role="user", span_id=recording.root_span_id)
        return turn_id

    # --- waiting for the product ----------------------------------------------------------------


    async def _await_response(self, target_turn: str) -> ProductTurn | None:
        """Wait for the response to ``target_turn`` to complete, barging in if the persona wants."""
        intake = self.intake
        barge: tuple[UserTurn, ProductTurn] | None = None

        def response_for_target() -> ProductTurn | None:
            for response in reversed(intake.responses):
                if response.turn_id == target_turn:
                    return response
            return None

        clock = self.recording.clock_ns
        waiting_since = clock()
        checked: tuple[str, str] | None = None
        while True:
            if intake.conversation_complete:
                return response_for_target()
            self._check_product_failures()
            if intake.time_limit_reached:  # the reply was cut there
                await self._end_at_time_limit("product playback")
            self._check_time()
            response = response_for_target()
            if response is not None and barge is None and response.barged_in_by is None \
                    and checked != (response.turn_id, response.transcript):
                checked = (response.turn_id, response.transcript)
                candidate = self.persona.barge_in(self._view_of(response))
                if candidate is not None and candidate.interrupt_after_seconds is not None:
                    barge = (candidate, response)
                    self._prepare_soon(candidate)  # synthesized before the moment to speak
            if barge is not None:
                candidate, barged = barge
                threshold_ns = int(float(candidate.interrupt_after_seconds or 0) * 1e9)
                playback = intake.playback(barged)
                moment = playback.played_until_ns(threshold_ns) if playback else None
                if moment is not None:
                    intake.watch_audio = False
                    await self._reach(moment, "playback before barge-in")
                    turn_id = await self._barge_in(candidate, barged)
                    return await self._await_response(turn_id)
                if barged.completed:
                    barge = None  # the response was shorter than the barge-in point
            if response is not None and response.completed and barge is None:
                intake.watch_audio = False
                return response
            intake.watch_audio = barge is not None
            if not await intake.wait_signal(min(self.response_timeout_seconds,
                                                self._seconds_left())):
                last = max(waiting_since, intake.last_event_ns or 0)
                if clock() - last >= self.response_timeout_seconds * 1e9:
                    raise ConversationEnded("no_response", self._no_response(target_turn))

    async def _barge_in(self, turn: UserTurn, response: ProductTurn) -> str:
        cancel = not response.completed
        response.barged_in_by = _turn_id(self.user_turns + 1)
        if cancel:
            try:
                await self.endpoint.interrupt()
            except EndpointError as error:
                raise ConversationEnded(self._closed_or_error(), Failure(
                    "endpoint", self._scrub(str(error)), error.code)) from None
        # recording the barge-in also flushes the listener's buffer of this response
        self.recording.record(EventType.USER_BARGE_IN, UserBargeIn(
            response_turn_id=response.turn_id, cancel_sent=cancel,
            after_product_audio_ms=round(float(turn.interrupt_after_seconds or 0) * 1000, 3)),
            source="evaluator", direction="outbound", turn_id=_turn_id(self.user_turns + 1),
            speaker_role="user")
        self.persona.confirm_barge_in(turn)
        return await self._speak(turn, barge_in_of=response.turn_id)

