"""Event attributes are typed: recorded from the event type's model, read back through it,
validated when a bundle is read."""

from __future__ import annotations

import json

import pytest

from voicelab.recording import (
    ATTRIBUTES,
    PRODUCT,
    USER,
    EventType,
    NoAttributes,
    ProductInterruption,
    ProductTurns,
    Recording,
    RecordingError,
    ReportedAttributes,
    ToolCall,
    TrialEnded,
    UserAudio,
    UserBargeIn,
    UserTurnStarted,
    encode_voice_events,
    recording_from_records,
)


def _recording() -> Recording:
    return Recording(session_id="s", trace_id="0" * 32, root_span_id="r", clock_ns=lambda: 0,
                     start_ns=0, start_utc_ns=0)


def _read_back(recording: Recording) -> Recording:
    records = [json.loads(line) for line in encode_voice_events(recording).splitlines()]
    return recording_from_records(records, streams={
        USER: recording.streams[USER].pcm(), PRODUCT: recording.streams[PRODUCT].pcm()})


def test_every_event_type_has_a_model():
    assert set(ATTRIBUTES) == set(EventType)


def test_attributes_are_recorded_as_given_in_the_model_s_order_and_read_back_typed():
    recording = _recording()
    event = recording.record(EventType.USER_TURN_STARTED, UserTurnStarted(
        dtmf="1", text="hello", speech_start_sample=10, topic="billing"),
        source="persona", direction="outbound", turn_id="turn-001")
    # the fields given, in the model's order, then the further ones; nothing left out is written
    assert list(event.attributes.items()) == [("text", "hello"), ("dtmf", "1"),
                                              ("speech_start_sample", 10),
                                              ("topic", "billing")]
    said = UserTurnStarted.of(_read_back(recording).events[0])
    assert (said.text, said.speech_start_sample, said.speech_end_sample) == ("hello", 10, None)
    assert said.model_extra == {"topic": "billing"}


def test_an_event_is_recorded_only_with_its_type_s_model():
    recording = _recording()
    with pytest.raises(TypeError, match="user.barge_in is recorded with UserBargeIn"):
        recording.record(EventType.USER_BARGE_IN, UserAudio(chunk_index=1), source="evaluator",
                         direction="outbound")
    event = recording.record(EventType.USER_AUDIO, UserAudio(chunk_index=1),
                             source="evaluator", direction="outbound")
    with pytest.raises(TypeError, match="not described by UserBargeIn"):
        UserBargeIn.of(event)
    assert ATTRIBUTES[EventType.USER_SPEECH_STARTED] is NoAttributes


def test_a_bundle_s_attribute_of_the_wrong_type_is_refused_naming_its_line():
    recording = _recording()
    recording.record(EventType.USER_AUDIO, UserAudio(chunk_index=1), source="evaluator",
                     direction="outbound")
    recording.record(EventType.USER_BARGE_IN, UserBargeIn(response_turn_id="turn-000"),
                     source="evaluator", direction="outbound", turn_id="turn-001")
    records = [json.loads(line) for line in encode_voice_events(recording).splitlines()]
    records[1]["attributes"]["response_turn_id"] = 7
    with pytest.raises(RecordingError, match=r"line 2: user.barge_in "
                                             r"attributes.response_turn_id: Input should be"):
        recording_from_records(records, streams={"user": b"", "product": b""})


def test_what_a_product_reported_is_kept_as_sent_and_read_leniently():
    recording = _recording()
    data = {"name": 5, "zeta": [1, 2], "call_id": {"odd": "id"}}
    event = recording.record(EventType.PRODUCT_TOOL_CALL, ToolCall.reported(data),
                             source="product", direction="inbound", turn_id="turn-001",
                             speaker_role="assistant")
    assert list(event.attributes.items()) == list(data.items())  # its order, its values
    assert event.attributes is not data
    call = ToolCall.of(_read_back(recording).events[0])
    assert (call.name, call.call_id) == (5, {"odd": "id"})
    assert issubclass(ToolCall, ReportedAttributes)


def test_the_recording_follows_typed_attributes_live_and_read_back():
    recording = _recording()
    recording.advance(5_000_000, "wait")
    recording.record(EventType.PRODUCT_AUDIO, source="product", direction="inbound", at_ns=0,
                     turn_id="turn-000", speaker_role="assistant", audio=bytes(48_000))
    cleared = recording.record(EventType.PRODUCT_INTERRUPTION,
                               ProductInterruption.reported({"flush": True}), source="product",
                               direction="inbound", at_ns=495_000_000, turn_id="turn-000",
                               speaker_role="assistant")
    assert recording.shift_ns == 5_000_000
    # the second of audio plays from 5 ms (the advance) on the listener timeline; the clear comes
    # at 500 ms there: 505 ms were not heard
    assert ProductInterruption.of(cleared).dropped_ms == 505.0
    again = _read_back(recording)
    assert again.shift_ns == 5_000_000 and again.events[-1].attributes["dropped_ms"] == 505.0


def test_the_responses_are_one_view_of_the_product_s_events():
    recording = _recording()
    record = recording.record
    record(EventType.PRODUCT_AUDIO, source="product", direction="inbound", turn_id="turn-000",
           speaker_role="assistant", audio=bytes(4800))
    record(EventType.PRODUCT_TRANSCRIPT, ATTRIBUTES[EventType.PRODUCT_TRANSCRIPT](text="Hi"),
           source="product", direction="inbound", turn_id="turn-000", speaker_role="assistant")
    record(EventType.PRODUCT_TRANSCRIPT, ATTRIBUTES[EventType.PRODUCT_TRANSCRIPT](text=""),
           source="product", direction="inbound", turn_id="turn-000", speaker_role="assistant")
    record(EventType.PRODUCT_TRANSCRIPT, ATTRIBUTES[EventType.PRODUCT_TRANSCRIPT](text="there"),
           source="product", direction="inbound", turn_id="turn-000", speaker_role="assistant")
    record(EventType.USER_BARGE_IN, UserBargeIn(response_turn_id="turn-000"),
           source="evaluator", direction="outbound", turn_id="turn-001")
    record(EventType.PRODUCT_INPUT_TRANSCRIPT,
           ATTRIBUTES[EventType.PRODUCT_INPUT_TRANSCRIPT](text="wait"), source="product",
           direction="inbound", turn_id="turn-001")
    for status in ("cancelled", "completed"):
        record(EventType.PRODUCT_RESPONSE_DONE,
               ATTRIBUTES[EventType.PRODUCT_RESPONSE_DONE](status=status), source="product",
               direction="inbound", turn_id="turn-000", speaker_role="assistant")
    turns = ProductTurns.of(recording)
    assert list(turns.by_turn) == ["turn-000", "turn-001"]
    opening, heard = turns.by_turn["turn-000"], turns.by_turn["turn-001"]
    assert [r.turn_id for r in turns.responses] == ["turn-000"]  # turn-001: only heard
    assert opening.transcript == "Hi  there" and opening.transcript_parts == ["Hi", "", "there"]
    assert (opening.status, opening.latest_status) == ("cancelled", "completed")
    assert opening.barged_in_by == "turn-001" and opening.audio_samples == 2400
    assert heard.heard == ["wait"] and not heard.answered
    assert TrialEnded.of(record(EventType.TRIAL_ENDED, TrialEnded(exit_reason="max_turns"),
                                source="runner", direction="internal")).failures is None


def test_the_intake_s_live_responses_are_the_responses_read_back():
    from voicelab.endpoints import EndpointEvent
    from voicelab.runner._intake import Intake

    recording = _recording()
    intake = Intake(recording)

    def event(kind: str, **values: object) -> None:
        intake.handle(EndpointEvent(kind, received_ns=len(recording.events) * 1_000_000,
                                    **values))  # type: ignore[arg-type]

    event("audio_delta", audio=bytes(960))
    event("transcript_final", text="Hello")
    event("turn_complete", data={"status": "completed"})
    intake.user_turn_id = "turn-001"
    intake.expect_response("turn-001")
    event("input_transcript", text="plan please")
    event("audio_delta", audio=bytes(960))
    event("tool_call", data={"call_id": "c1", "name": "save", "arguments": {"at": "16:00"}})
    event("tool_result", data={"call_id": "c1", "output": {"ok": True}})
    event("turn_complete", data={"status": "completed"})
    event("turn_complete", data={})  # a stray one: no response expected, kept unattached
    event("audio_delta", audio=bytes(480))  # a response nobody expected: turn-001.2
    live = [(r.turn_id, r.events, r.status) for r in intake.responses]
    again = ProductTurns.of(_read_back(recording))
    read = [(r.turn_id, r.events, r.status) for r in again.responses]
    assert [turn for turn, _, _ in live] == ["turn-000", "turn-001", "turn-001.2"]
    assert [(t, [e.sequence for e in es], s) for t, es, s in live] == \
        [(t, [e.sequence for e in es], s) for t, es, s in read]
    assert again.by_turn["turn-001"].heard == ["plan please"]
    assert again.by_turn["turn-001"].tool_calls == 1


def test_a_runner_s_trial_ended_keeps_its_late_ticks_as_built_and_records_the_same():
    ticks = {"floor_ms": 1.0, "ticks": [[i * 2000, 1500] for i in range(500)], "since": "x"}
    fields = {"exit_reason": "max_turns", "loop_lag": {"p50": 0.2, "ticks": 500},
              "failures": [], "user_turns": 3, "product_responses": 3}
    built = TrialEnded.ending(late_ticks=ticks, **fields)
    validated = TrialEnded(late_ticks=ticks, **fields)
    recorded = built.recorded()
    assert recorded == validated.recorded()
    assert list(recorded) == list(validated.recorded())  # the model's order
    assert recorded["late_ticks"] is ticks  # not copied
    assert TrialEnded.ending(late_ticks=None, exit_reason="error").recorded() == {
        "exit_reason": "error", "late_ticks": None}
