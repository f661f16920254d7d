"""The trial timeline's records and their voice-events.jsonl bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicelab.runner._timeline import Timeline, pcm_metadata, voice_events_jsonl


def _reference_jsonl(records: list[dict]) -> bytes:
    lines = [json.dumps(r, ensure_ascii=False, default=str, separators=(",", ":"))
             for r in records]
    return ("\n".join(lines) + ("\n" if lines else "")).encode()


def _timeline() -> Timeline:
    ticks = iter(range(0, 10**12, 7_654_321))
    timeline = Timeline(session_id="sess-ü-001", trace_id="0af7651916cd43dd8448eb211c80319c",
                        root_span_id="b7ad6b7169203331", clock_ns=lambda: next(ticks))
    timeline.record("trial.started", source="runner", direction="internal", trial=1,
                    span_id="b7ad6b7169203331")
    timeline.record("user.turn_started", source="persona", direction="outbound",
                    turn_id="turn-001", speaker_role="user", text='Grüße "quoted" \\ \n line',
                    metadata={"nested": [1, 2.5, None, True]})
    for index in range(5):
        timeline.record("user.audio_chunk", source="evaluator", direction="outbound",
                        turn_id="turn-001", speaker_role="user", pcm=pcm_metadata(4800),
                        chunk_index=index)
    for _ in range(5):
        timeline.record("product.audio_chunk", source="product", direction="inbound",
                        turn_id="turn-001", speaker_role="assistant", pcm=pcm_metadata(1921))
    timeline.record("product.transcript", source="product", direction="inbound",
                    turn_id="turn-001", speaker_role="assistant", text="Done — 16:00 ✓")
    timeline.record("outcome.probed", source="probe", direction="internal", error=None,
                    odd=b"bytes are written with str()")
    return timeline


def test_jsonl_is_byte_identical_to_json_dumps_of_each_record():
    records = _timeline().to_records()
    assert voice_events_jsonl(records) == _reference_jsonl(records)
    assert voice_events_jsonl([]) == b""


def test_a_record_with_other_keys_is_still_encoded_exactly():
    records = _timeline().to_records()
    records[3] = {**records[3], "extra": {"k": "v"}}
    assert voice_events_jsonl(records) == _reference_jsonl(records)


@given(st.lists(st.text(), min_size=1, max_size=4), st.floats(0, 1e7, allow_nan=False))
def test_any_text_and_offset_round_trips(texts, offset_ms):
    timeline = _timeline()
    for text in texts:
        timeline.record("product.transcript", source="product", direction="inbound",
                        turn_id=text, text=text)
    records = timeline.to_records()
    records[-1]["offset_ms"] = round(offset_ms, 3)
    assert voice_events_jsonl(records) == _reference_jsonl(records)
    assert len(voice_events_jsonl(records).splitlines()) == len(records)


@pytest.mark.parametrize("offset_ns", [0, 999, 1_000, 999_999_999, 1_000_000_000,
                                       86_399_999_999_000, 3_600_123_456_789])
def test_utc_timestamps_match_datetime(offset_ns):
    timeline = Timeline(session_id="s", trace_id="0" * 32, root_span_id="1" * 16)
    timeline.start_utc_ns = 1_796_000_000_123_456_789
    expected = datetime.fromtimestamp((timeline.start_utc_ns + offset_ns) // 1000 / 1e6, tz=UTC)
    assert timeline.utc_iso(offset_ns) == \
        expected.isoformat(timespec="microseconds").replace("+00:00", "Z")
