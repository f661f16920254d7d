"""The recording: voice-events.jsonl bytes, and a recording rebuilt from them and its streams."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicelab.recording import (
    PRODUCT,
    USER,
    USER_CLEAN,
    EventType,
    OutcomeProbed,
    PcmStream,
    ProductInterruption,
    ProductText,
    Recording,
    RecordingError,
    SpeechSynthesized,
    TrialStarted,
    UserAudio,
    UserBargeIn,
    UserTurnStarted,
    encode_voice_events,
    recording_from_records,
    to_records,
    voice_events_jsonl,
)


def _reference_jsonl(records: list[dict]) -> bytes:
    lines = [json.dumps(r, ensure_ascii=False, default=str, separators=(",", ":"))
             for r in records]
    return ("\n".join(lines) + ("\n" if lines else "")).encode()


def _pcm(count: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    return rng.integers(-20000, 20000, count, dtype=np.int16).astype("<i2").tobytes()


def _recording() -> Recording:
    ticks = iter(range(0, 10**12, 7_654_321))
    recording = Recording(session_id="sess-ü-001", trace_id="0af7651916cd43dd8448eb211c80319c",
                          root_span_id="b7ad6b7169203331", clock_ns=lambda: next(ticks))
    recording.record(EventType.TRIAL_STARTED, TrialStarted(trial=1), source="runner",
                     direction="internal", span_id="b7ad6b7169203331")
    recording.record(EventType.SPEECH_SYNTHESIZED, SpeechSynthesized(text="hello"),
                     source="speech", direction="internal", turn_id="turn-001",
                     audio=_pcm(2400, 1))
    recording.record(EventType.USER_TURN_STARTED, UserTurnStarted(
        text='Grüße "quoted" \\ \n line', metadata={"nested": [1, 2.5, None, True]}),
        source="persona", direction="outbound", turn_id="turn-001", speaker_role="user")
    for index in range(5):
        recording.record(EventType.USER_AUDIO, UserAudio(chunk_index=index), source="evaluator",
                         direction="outbound", turn_id="turn-001", speaker_role="user",
                         audio=_pcm(2400, 10 + index))
    recording.advance(3_000_000_000, "user speech")
    for index in range(5):
        recording.record(EventType.PRODUCT_AUDIO, source="product", direction="inbound",
                         turn_id="turn-001", speaker_role="assistant",
                         audio=_pcm(960 + index, 20 + index))
    recording.record(EventType.USER_BARGE_IN,
                     UserBargeIn(response_turn_id="turn-001", cancel_sent=True),
                     source="evaluator", direction="outbound", turn_id="turn-002")
    recording.record(EventType.PRODUCT_AUDIO, source="product", direction="inbound",
                     turn_id="turn-001", speaker_role="assistant", audio=_pcm(480, 30))
    recording.record(EventType.PRODUCT_TRANSCRIPT, ProductText(text="Done — 16:00 ✓"),
                     source="product", direction="inbound", turn_id="turn-001",
                     speaker_role="assistant")
    recording.record(EventType.OUTCOME_PROBED,
                     OutcomeProbed(error=None, odd=b"bytes are written with str()"),
                     source="probe", direction="internal")
    return recording


def _streams(recording: Recording) -> dict[str, bytes]:
    return {name: stream.pcm() for name, stream in recording.streams.items()}


def test_jsonl_is_byte_identical_to_json_dumps_of_each_record():
    recording = _recording()
    records = to_records(recording)
    assert voice_events_jsonl(records) == _reference_jsonl(records)
    assert encode_voice_events(recording) == _reference_jsonl(records)
    assert encode_voice_events(recording, 3, 7) == _reference_jsonl(records[3:7])
    assert voice_events_jsonl([]) == b"" == encode_voice_events(recording, 0, 0)


def test_a_record_with_other_keys_is_still_encoded_exactly():
    records = to_records(_recording())
    records[3] = {**records[3], "extra": {"k": "v"}}
    assert voice_events_jsonl(records) == _reference_jsonl(records)


def test_every_line_carries_the_listener_clock():
    records = to_records(_recording())
    advance = next(r for r in records if r["event_type"] == "timeline.virtual_advance")
    after = records[advance["sequence"] + 1]
    assert after["listener_offset_ns"] == after["monotonic_offset_ns"] + 3_000_000_000
    assert records[0]["listener_offset_ns"] == records[0]["monotonic_offset_ns"]


def test_a_recording_rebuilt_from_its_records_and_streams_is_the_same():
    live = _recording()
    records = json.loads("[" + voice_events_jsonl(to_records(live)).decode()
                         .strip().replace("\n", ",") + "]")
    rebuilt = recording_from_records(records, streams=_streams(live))
    assert [(e.sequence, e.offset_ns, e.listener_ns, e.type, e.turn_id, e.audio_start,
             e.audio_samples) for e in rebuilt.events] == \
        [(e.sequence, e.offset_ns, e.listener_ns, e.type, e.turn_id, e.audio_start,
          e.audio_samples) for e in live.events]
    for event in live.events:
        if event.audio_start >= 0:
            assert rebuilt.audio_of(event) == live.audio_of(event)
    # the listener follows the rebuilt events exactly as it followed the live ones
    for turn, playback in live.timeline.responses.items():
        again = rebuilt.timeline.responses[turn]
        assert [(c.start, c.heard, c.after_cancel) for c in again.chunks] == \
            [(c.start, c.heard, c.after_cancel) for c in playback.chunks]
        assert again.stall_samples == playback.stall_samples
        assert again.barge_in_ns == playback.barge_in_ns
    assert rebuilt.session_id == live.session_id and rebuilt.trace_id == live.trace_id
    assert abs(rebuilt.start_utc_ns - live.start_utc_ns) < 1000  # the strings hold microseconds


def test_version_1_records_get_the_listener_clock_from_the_advances():
    live = _recording()
    records = to_records(live)
    for record in records:
        del record["listener_offset_ns"]
    rebuilt = recording_from_records(records, streams=_streams(live))
    assert [e.listener_ns for e in rebuilt.events] == [e.listener_ns for e in live.events]


def test_streams_that_do_not_fit_the_events_are_refused():
    live = _recording()
    streams = _streams(live)
    streams[PRODUCT] = streams[PRODUCT][:-2]
    with pytest.raises(RecordingError, match="product stream"):
        recording_from_records(to_records(live), streams=streams)
    records = to_records(live)
    records[2]["event_type"] = "made.up"
    with pytest.raises(RecordingError, match="unknown event type"):
        recording_from_records(records, streams=_streams(live))


def test_the_streams_are_each_direction_in_arrival_order():
    live = _recording()
    user = b"".join(_pcm(2400, 10 + index) for index in range(5))
    assert live.streams[USER].pcm() == user
    assert live.streams[USER_CLEAN].pcm() == _pcm(2400, 1)
    assert live.streams[PRODUCT].num_samples == sum(960 + i for i in range(5)) + 480


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=4), st.floats(0, 1e7, allow_nan=False))
def test_any_text_and_offset_round_trips(texts, offset_ms):
    recording = _recording()
    for text in texts:
        recording.record(EventType.PRODUCT_TRANSCRIPT, ProductText(text=text), source="product",
                         direction="inbound", at_ns=recording.start_ns + int(offset_ms * 1e6))
    records = to_records(recording)
    encoded = encode_voice_events(recording)
    assert encoded == _reference_jsonl(records)
    decoded = [json.loads(line) for line in encoded.decode().split("\n") if line]
    assert [d["attributes"].get("text") for d in decoded[-len(texts):]] == texts


def test_a_product_clear_drops_its_unplayed_audio_and_says_how_much():
    recording = Recording(session_id="s", trace_id="0" * 32, root_span_id="r", clock_ns=lambda: 0)
    recording.record(EventType.PRODUCT_AUDIO, source="product", direction="inbound", at_ns=0,
                     turn_id="turn-000", audio=bytes(48_000))  # one second, from 0
    cleared = recording.record(EventType.PRODUCT_INTERRUPTION,
                               ProductInterruption.reported({"flush": True}), source="product",
                               direction="inbound", at_ns=400_000_000, turn_id="turn-000")
    assert cleared.attributes["dropped_ms"] == 600.0
    assert recording.timeline.cursor_ns == 400_000_000


def test_playback_says_when_the_product_audio_has_played():
    import asyncio

    from voicelab.runner._playback import PlaybackClock

    now = [0]
    recording = Recording(session_id="s", trace_id="0" * 32, root_span_id="r",
                          clock_ns=lambda: now[0])
    playback = PlaybackClock(recording)
    assert playback.played_at_ns(2400) is None  # not arrived yet
    recording.record(EventType.PRODUCT_AUDIO, source="product", direction="inbound",
                     at_ns=100_000_000, turn_id="turn-000", audio=bytes(9600))  # 200 ms
    assert playback.played_at_ns(2400) == 200_000_000  # 100 ms into a chunk placed at 100 ms
    assert playback.played_at_ns(4800) == 300_000_000
    recording.record(EventType.PRODUCT_INTERRUPTION, ProductInterruption.reported({"flush": True}),
                     source="product", direction="inbound", at_ns=150_000_000,
                     turn_id="turn-000")
    assert playback.played_at_ns(4800) == 150_000_000  # dropped: it never plays
    now[0] = 150_000_000
    asyncio.run(asyncio.wait_for(playback.until_played(4800), 1))


def test_a_recording_sent_to_another_process_arrives_whole():
    """Pickled for the scoring process: every event field, the streams and the trace; the
    listener is rebuilt from the events (not sent) and follows them as it did live."""
    import dataclasses
    import pickle

    live = _recording()
    live.events[-1].raw = {"type": "response.done"}
    arrived = pickle.loads(pickle.dumps(live))
    assert [dataclasses.astuple(e) for e in arrived.events] == \
        [dataclasses.astuple(e) for e in live.events]
    assert _streams(arrived) == _streams(live)
    assert (arrived.session_id, arrived.trace_id, arrived.root_span_id, arrived.start_ns,
            arrived.start_utc_ns, arrived.shift_ns) == \
        (live.session_id, live.trace_id, live.root_span_id, live.start_ns, live.start_utc_ns,
         live.shift_ns)
    for turn, playback in live.timeline.responses.items():
        again = arrived.timeline.responses[turn]
        assert [(c.start, c.heard, c.after_cancel) for c in again.chunks] == \
            [(c.start, c.heard, c.after_cancel) for c in playback.chunks]
        assert again.barge_in_ns == playback.barge_in_ns
    assert "listener" not in live.__getstate__()  # rebuilt, not sent


def test_a_pcm_stream_pickles_its_samples_out_of_band():
    """Protocol 5 with a buffer callback (the scoring process's channel): the stream is one
    buffer, joined once, not copied into the pickle; any other protocol carries the samples."""
    import pickle

    stream = PcmStream()
    chunks = [bytes([n, 0]) * 480 for n in range(1, 4)]
    for chunk in chunks:
        stream.append(chunk)
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(stream, protocol=5, buffer_callback=buffers.append)
    assert [b.raw().tobytes() for b in buffers] == [b"".join(chunks)] and len(data) < 200
    assert pickle.loads(data, buffers=[b.raw() for b in buffers]).pcm() == b"".join(chunks)
    stream.pcm()  # joined once read; later chunks stay apart until the next read
    stream.append(b"\x09\x00")
    buffers.clear()
    pickle.dumps(stream, protocol=5, buffer_callback=buffers.append)
    assert [b.raw().tobytes() for b in buffers] == [b"".join(chunks) + b"\x09\x00"]
    for protocol in (2, 4, 5):
        assert pickle.loads(pickle.dumps(stream, protocol=protocol)).pcm() == \
            b"".join(chunks) + b"\x09\x00"
