"""A recorded call as a :class:`~voicelab.recording.Recording`: the events a live line would have
recorded, on the recording's own timeline.

An ingested call is recorded as a listening-mode (``server_vad``) trial whose clock is the
recording: every event's offset is its position in the file, so the listener timeline places
each leg exactly where it was recorded and everything after (placement, metrics, transcripts,
verdicts, the bundle) is computed by the code that scores a simulated call.

* the caller's leg is the line (``user.audio_chunk`` with ``line``; before the first turn, of
  no turn), in turns (:mod:`._turns`): ``user.turn_started`` at its speech (the turn's words, its speech bounds
  and pauses in its audio),
  ``user.speech_started`` / ``user.speech_ended`` at the speech's first and last audible
  sample (``speech_ended`` times the response it expects), ``user.barge_in`` (``flush: false``:
  what the agent's leg holds is what the caller heard);
* ``speech.synthesized`` keeps each turn's utterance (its audio to the end of its speech plus
  :data:`REPLAY_TAIL_MS`): what a replay sends of the turn;
* the agent's leg is ``product.audio_chunk``s over each response's span (its first to its last
  audible sample), then its transcript, if known, and ``product.response_done``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import NamedTuple

import numpy as np

from ..audio import PcmAudio
from ..recording import (
    Connected,
    EventAttributes,
    EventType,
    ExpectsResponse,
    NoAttributes,
    ProductText,
    Recording,
    ResponseDone,
    SpeechSynthesized,
    TrialEnded,
    TrialStarted,
    UserAudio,
    UserBargeIn,
    UserTurnStarted,
    samples_to_ns,
)
from ..scoring import CALL_ENDED  # how a recorded call ends: when its recording does
from ._turns import CallTurns

#: Audio per recorded chunk (both legs): the timeline is exact whatever the size; this only
#: sets how many events a call has.
CHUNK_MS = 100
#: How much of the silence after a turn's speech a replay sends with it (a live line's product
#: hears the end of speech by its own silence detection).
REPLAY_TAIL_MS = 300
#: ``user.turn_started`` ``source_kind`` and ``speech.synthesized`` ``provider`` of a real caller
PRODUCTION = "production"


class _Planned(NamedTuple):
    """An event to record at ``sample`` (``order`` ranks events at the same sample)."""

    sample: int
    order: int
    kind: EventType
    attributes: EventAttributes | None
    turn_id: str | None
    audio: np.ndarray | None = None


#: who records each event type of a call (source, direction, speaker role)
_ORIGIN: dict[EventType, tuple[str, str, str | None]] = {
    EventType.USER_TURN_STARTED: ("persona", "outbound", "user"),
    EventType.SPEECH_SYNTHESIZED: ("speech", "internal", "user"),
    EventType.USER_AUDIO: ("evaluator", "outbound", "user"),
    EventType.USER_SPEECH_STARTED: ("evaluator", "outbound", "user"),
    EventType.USER_SPEECH_ENDED: ("evaluator", "outbound", "user"),
    EventType.USER_BARGE_IN: ("persona", "outbound", "user"),
    EventType.PRODUCT_TRANSCRIPT: ("product", "inbound", "assistant"),
    EventType.PRODUCT_RESPONSE_DONE: ("product", "inbound", "assistant"),
}


def _planned(turns: CallTurns, *, user: np.ndarray, agent: np.ndarray) -> list[_Planned]:
    rate = turns.sample_rate_hz
    chunk = rate * CHUNK_MS // 1000
    # the leg before the caller's first turn: the line's, no turn's
    lead = turns.user_turns[0].speech_start if turns.user_turns else turns.length
    planned = [_Planned(start, 3, EventType.USER_AUDIO, UserAudio(line=True), None,
                        user[start:min(start + chunk, lead)]) for start in range(0, lead, chunk)]
    for turn in turns.user_turns:
        key = turn.turn_id
        utterance_end = min(turn.audio_end, turn.speech_end + rate * REPLAY_TAIL_MS // 1000)
        planned.append(_Planned(turn.speech_start, 0, EventType.USER_TURN_STARTED, UserTurnStarted(
            text=turn.text, source_kind=PRODUCTION, barge_in_of=turn.barge_in_of,
            speech_start_sample=turn.speech_start - turn.audio_start,
            speech_end_sample=turn.speech_end - turn.audio_start,
            pauses=turn.pauses() or None), key))
        planned.append(_Planned(turn.speech_start, 1, EventType.SPEECH_SYNTHESIZED, SpeechSynthesized(
            text=turn.text, duration_ms=round((utterance_end - turn.audio_start) * 1000 / rate, 3),
            provider=PRODUCTION), key, user[turn.audio_start:utterance_end]))
        planned.append(_Planned(turn.speech_start, 2, EventType.USER_SPEECH_STARTED,
                                NoAttributes(), key))
        if turn.barge_in_of is not None:
            planned.append(_Planned(turn.speech_start, 2, EventType.USER_BARGE_IN, UserBargeIn(
                response_turn_id=turn.barge_in_of, flush=False,
                after_product_audio_ms=round(turn.after_product_audio_samples * 1000 / rate, 3)),
                key))
        planned.append(_Planned(turn.speech_end, 2, EventType.USER_SPEECH_ENDED,
                                ExpectsResponse(expects_response=key), key))
        planned += [_Planned(start, 3, EventType.USER_AUDIO,
                             UserAudio(line=True, chunk_index=number), key,
                             user[start:min(start + chunk, turn.audio_end)])
                    for number, start in enumerate(range(turn.audio_start, turn.audio_end,
                                                         chunk))]
    for response in turns.responses:
        key = response.turn_id
        planned += [_Planned(start, 4, EventType.PRODUCT_AUDIO, None, key,
                             agent[start:min(start + chunk, response.end)])
                    for start in range(response.start, response.end, chunk)]
        if response.text:
            planned.append(_Planned(response.end, 5, EventType.PRODUCT_TRANSCRIPT,
                                    ProductText(text=response.text), key))
        planned.append(_Planned(response.end, 6, EventType.PRODUCT_RESPONSE_DONE,
                                ResponseDone.reported({"status": "completed"}), key))
    return sorted(planned, key=lambda event: (event.sample, event.order))


def call_recording(turns: CallTurns, *, user: PcmAudio, agent: PcmAudio, index: int,
                   session_id: str, started_utc: datetime | None = None,
                   output_transcripts: bool = False) -> Recording:
    """The recording of one call (see the module docstring); ``index`` is its trial number,
    ``output_transcripts`` whether the agent's words are known (a transcript was given)."""
    started = started_utc or datetime.now(tz=UTC)
    recording = Recording(session_id=session_id, trace_id=uuid.uuid4().hex,
                          root_span_id=uuid.uuid4().hex[:16], clock_ns=lambda: 0, start_ns=0,
                          start_utc_ns=int(started.timestamp() * 1e9))
    recording.record(EventType.TRIAL_STARTED, TrialStarted(
        trial=index, seed=index, clock_start_ns=0, clock="recording", turn_taking="server_vad",
        listener={"jitter_buffer_ms": 0.0, "reply_end_hangover_ms": 700.0},
        capabilities={"streaming_input": True, "streaming_output": True, "interruption": True,
                      "tool_events": False, "input_transcripts": False,
                      "output_transcripts": output_transcripts}),
        source="runner", direction="internal", at_ns=0)
    recording.record(EventType.CONNECTED, Connected(expects_response="turn-000"),
                     source="evaluator", direction="outbound", at_ns=0)
    for event in _planned(turns, user=user.samples, agent=agent.samples):
        at_ns = samples_to_ns(event.sample)
        audio = event.audio.tobytes() if event.audio is not None else None
        if event.kind is EventType.PRODUCT_AUDIO:
            assert audio is not None
            recording.record_product_audio(at_ns, event.turn_id, audio, None)
            continue
        source, direction, role = _ORIGIN[event.kind]
        recording.record(event.kind, event.attributes, at_ns=at_ns, turn_id=event.turn_id,
                         source=source, direction=direction, speaker_role=role, audio=audio)
    recording.record(EventType.TRIAL_ENDED, TrialEnded(
        exit_reason=CALL_ENDED, failures=[], user_turns=len(turns.user_turns),
        product_responses=len(turns.responses)),
        source="runner", direction="internal", at_ns=samples_to_ns(turns.length))
    return recording
