"""Cutting a recorded call into turns: synthetic legs with speech-like bursts at known times."""

from __future__ import annotations

import numpy as np
import pytest

from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio
from voicelab.ingest import call_recording, segment_call
from voicelab.recording import EventType, UserBargeIn, UserTurnStarted

RATE = CANONICAL_SAMPLE_RATE_HZ


def _legs(duration_s: float, user: list[tuple[float, float]], agent: list[tuple[float, float]]
          ) -> tuple[PcmAudio, PcmAudio]:
    """Two legs with a 220 Hz (caller) / 330 Hz (agent) tone over each (start, end) in seconds,
    in 250 ms syllables 60 ms apart (speech pauses between syllables; a steady tone would become
    the detector's noise floor), and a faint noise floor (-60 dBFS) everywhere: what a quiet
    phone leg looks like."""
    rng = np.random.default_rng(7)
    legs = []
    for spans, frequency in ((user, 220.0), (agent, 330.0)):
        samples = rng.normal(0.0, 30.0, int(duration_s * RATE))
        t = np.arange(samples.shape[0]) / RATE
        for start, end in spans:
            inside = (t >= start) & (t < end)
            syllables = ((t[inside] - start) % 0.31) < 0.25
            samples[inside] += 8000.0 * syllables * np.sin(2 * np.pi * frequency * t[inside])
        legs.append(PcmAudio(np.clip(samples, -32768, 32767).astype(np.int16)))
    return legs[0], legs[1]


def _s(sample: int) -> float:
    return sample / RATE


def test_an_opening_two_turns_and_a_pause_inside_a_turn():
    user, agent = _legs(12.0, user=[(2.0, 3.0), (3.8, 4.5), (8.0, 9.0)],
                        agent=[(0.2, 1.5), (5.0, 7.0), (9.6, 11.0)])
    turns = segment_call(user, agent)
    assert [t.turn_id for t in turns.user_turns] == ["turn-001", "turn-002"]
    assert [r.turn_id for r in turns.responses] == ["turn-000", "turn-001", "turn-002"]
    first = turns.user_turns[0]
    # the tones' edges to within a 10 ms frame
    assert _s(first.speech_start) == pytest.approx(2.0, abs=0.011)
    assert _s(first.speech_end) == pytest.approx(4.5, abs=0.011)
    [(silent, speaking)] = first.pauses()
    assert _s(speaking - silent) == pytest.approx(0.8, abs=0.02)
    # the turns' audio is the caller's leg, sample for sample, from its first speech
    assert first.audio_start == first.speech_start
    assert first.audio_end == turns.user_turns[1].audio_start
    assert turns.user_turns[-1].audio_end == user.samples.shape[0]
    assert all(t.barge_in_of is None for t in turns.user_turns)


def test_a_caller_who_talks_over_the_agent_barges_in_and_the_agent_keeps_its_old_response():
    # the agent's reply runs 5.0-8.0; the caller starts at 6.0, the agent stops at 6.4
    user, agent = _legs(12.0, user=[(2.0, 4.0), (6.0, 7.0)],
                        agent=[(4.5, 6.4), (7.6, 9.0)])
    turns = segment_call(user, agent)
    barge = turns.user_turns[1]
    assert barge.barge_in_of == "turn-001"
    assert _s(barge.after_product_audio_samples) == pytest.approx(1.5, abs=0.02)
    # what the agent said before the caller started stays in its response to turn-001
    responses = {r.turn_id: r for r in turns.responses}
    assert _s(responses["turn-001"].end) == pytest.approx(6.4, abs=0.011)
    assert _s(responses["turn-002"].start) == pytest.approx(7.6, abs=0.011)


def test_a_long_silence_ends_a_turn_the_agent_did_not_answer():
    user, agent = _legs(12.0, user=[(1.0, 2.0), (6.0, 7.0)], agent=[(7.5, 9.0)])
    assert len(segment_call(user, agent).user_turns) == 2
    assert len(segment_call(user, agent, turn_gap_ms=5000).user_turns) == 1


def test_the_recording_places_both_legs_where_they_were_and_times_from_the_caller():
    user, agent = _legs(10.0, user=[(2.0, 3.0), (6.0, 7.0)], agent=[(3.5, 6.3), (7.4, 9.0)])
    turns = segment_call(user, agent)
    recording = call_recording(turns, user=user, agent=agent, index=1, session_id="call")
    started = [UserTurnStarted.of(e) for e in recording.of_type(EventType.USER_TURN_STARTED)]
    assert [s.source_kind for s in started] == ["production", "production"]
    [barge] = [UserBargeIn.of(e) for e in recording.of_type(EventType.USER_BARGE_IN)]
    assert barge.response_turn_id == "turn-001" and barge.flush is False
    # every sample of the caller's leg was sent, in order; the agent's leg within its replies
    sent = np.frombuffer(recording.streams["user"].pcm(0, recording.streams["user"].num_samples),
                         dtype="<i2")
    np.testing.assert_array_equal(sent, user.samples)
    first = next(recording.of_type(EventType.PRODUCT_AUDIO))
    assert first.listener_ns / 1e9 == pytest.approx(3.5, abs=0.011)
    # events in time order on one clock
    times = [e.listener_ns for e in recording.events]
    assert times == sorted(times)


def test_a_caller_who_starts_in_the_agents_pause_between_words_barges_in_on_it():
    """The agent pauses 250 ms mid-sentence; the caller starts in the pause as the agent
    resumes, and the agent stops 150 ms later: still its opening, talked over."""
    user, agent = _legs(8.0, user=[(1.75, 3.0)], agent=[(0.2, 1.5), (1.75, 1.9), (3.6, 5.0)])
    turns = segment_call(user, agent)
    opening, reply = turns.responses
    assert (opening.turn_id, reply.turn_id) == ("turn-000", "turn-001")
    assert _s(opening.end) == pytest.approx(1.9, abs=0.011)
    assert turns.user_turns[0].barge_in_of == "turn-000"
