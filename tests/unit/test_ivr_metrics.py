"""Key presses and what the product did about them, over constructed evidence: which prompt a
press answers, the first key to the product's next speech, and a key barge-in's stop latency
(measured as a spoken barge-in's: to the end of the prompt's last audible sample)."""

from __future__ import annotations

import numpy as np

from voicelab.artifacts import TurnMetrics
from voicelab.metrics._keys import KeyPress, key_presses, key_stop_ns, key_to_speech_ns
from voicelab.recording import (
    EventType,
    HeardChunk,
    HeardResponse,
    Recording,
    UserDtmf,
    UserTurnStarted,
    samples_to_ns,
)

MS = 1_000_000
RATE = 24_000


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _recording() -> Recording:
    return Recording(session_id="s", trace_id="t" * 32, root_span_id="r" * 16,
                     clock_ns=_Clock(), start_ns=0)


def _press(recording: Recording, turn_id: str, digits: str, *, at_ms: int,
           barge_in_of: str | None = None) -> None:
    recording.record(EventType.USER_TURN_STARTED, UserTurnStarted(
        text="", dtmf=digits, barge_in_of=barge_in_of), source="persona",
        direction="outbound", at_ns=at_ms * MS, turn_id=turn_id)
    for index, digit in enumerate(digits):  # one event a key, 10 ms apart
        recording.record(EventType.USER_DTMF, UserDtmf(digits=digit), source="evaluator",
                         direction="outbound", at_ns=(at_ms + 10 * index) * MS,
                         turn_id=turn_id)


def _heard(recording: Recording, turn_id: str, *, start_ms: int, end_ms: int
           ) -> HeardResponse:
    event = recording.record(EventType.PRODUCT_RESPONSE_DONE, None, source="product",
                             direction="inbound", at_ns=start_ms * MS, turn_id=turn_id)
    samples = (end_ms - start_ms) * RATE // 1000
    return HeardResponse(turn_id, [HeardChunk(event, start_ms * RATE // 1000, samples)])


def test_a_press_answers_the_prompt_heard_last_or_the_one_it_barged_into():
    recording = _recording()
    responses = {"turn-000": _heard(recording, "turn-000", start_ms=0, end_ms=3000),
                 "turn-001": _heard(recording, "turn-001", start_ms=4000, end_ms=7000)}
    _press(recording, "turn-001", "1", at_ms=1000, barge_in_of="turn-000")
    _press(recording, "turn-002", "42#", at_ms=7500)
    presses = key_presses(recording.events, responses)
    assert presses == [
        KeyPress("turn-001", "1", 1000 * MS, "turn-000", True),
        KeyPress("turn-002", "42#", 7500 * MS, "turn-001", False)]  # timed from the first key


def test_a_press_before_any_prompt_has_no_row_to_go_on():
    recording = _recording()
    _press(recording, "turn-001", "9", at_ms=100)
    assert key_presses(recording.events, {}) == []


def test_key_to_speech_is_the_next_speech_onset_in_the_reply_to_the_keys():
    key = KeyPress("turn-002", "2", 7500 * MS, "turn-001", False)
    speech = [(4000 * MS, 6900 * MS), (8600 * MS, 9000 * MS), (9100 * MS, 9900 * MS)]
    # the reply to the keys sounds from 8.5 s: its speech begins at 8.6 s; 20 ms line delay
    assert key_to_speech_ns(key, (8500 * MS, 9900 * MS), speech, heard_delay_ns=20 * MS) \
        == 1120 * MS
    assert key_to_speech_ns(key, None, speech, heard_delay_ns=0) is None  # never answered
    # speech before the key (the prompt) is never the answer
    assert key_to_speech_ns(key, (8500 * MS, 9900 * MS), [(4000 * MS, 6900 * MS)],
                            heard_delay_ns=0) is None


def test_a_key_barge_in_stops_when_the_prompt_last_sounds():
    samples = np.zeros(4 * RATE, dtype=np.int16)
    samples[: int(1.25 * RATE)] = 3000  # the prompt sounds until 1.25 s, then silence
    key = KeyPress("turn-001", "1", 1000 * MS, "turn-000", True)
    assert key_stop_ns(key, (0, 4000 * MS), samples) == samples_to_ns(int(1.25 * RATE)) \
        - 1000 * MS
    # a prompt already silent at the key stopped at once; a press after a prompt is no barge-in
    assert key_stop_ns(KeyPress("turn-001", "1", 2000 * MS, "turn-000", True),
                       (0, 4000 * MS), samples) == 0
    assert key_stop_ns(KeyPress("turn-001", "1", 1000 * MS, "turn-000", False),
                       (0, 4000 * MS), samples) is None


def test_key_columns_are_written_only_on_rows_keys_answered():
    plain = TurnMetrics(turn_id="turn-000", index=0, status="completed",
                        output_audio_seconds=1.0, interrupted=False)
    assert not [name for name in plain.model_dump() if name.startswith("key_")]
    answered = plain.model_copy(update={"key_turn_id": "turn-001", "key_digits": "1",
                                        "key_barge_in": True, "key_to_speech_ms": 1046.4,
                                        "key_stop_latency_ms": 2.5})
    dumped = answered.model_dump()
    assert dumped["key_to_speech_ms"] == 1046.4 and dumped["key_stop_latency_ms"] == 2.5
