"""Every voice-event record a reader takes from a bundle is checked: the whole-file check
(column by column) never accepts what the record-by-record check refuses, and a refusal names
the member, the line and the key."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicelab.artifacts import (
    MAX_TIMELINE_NS,
    ArtifactVersionError,
    BundleMemberError,
    check_event_records,
    read_voice_events,
)
from voicelab.artifacts._event_records import _check_record

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "trial-001/voice-events.jsonl"


def _records() -> list[dict[str, object]]:
    start = {"contract_version": "3.0", "event_id": "e0", "sequence": 0, "session_id": "s",
             "turn_id": None, "timestamp_utc": "2026-12-01T07:32:44.384772Z",
             "monotonic_offset_ns": 0, "listener_offset_ns": 0, "offset_ms": 0.0,
             "source": "runner", "direction": "internal", "event_type": "trial.started",
             "speaker_role": None, "pcm": None, "trace": None, "attributes": {"seed": 42}}
    chunk = {**start, "event_id": "e1", "sequence": 1, "turn_id": "turn-001",
             "monotonic_offset_ns": 20_000_000, "listener_offset_ns": 20_000_000,
             "offset_ms": 20.0, "source": "evaluator", "direction": "outbound",
             "event_type": "user.audio_chunk", "speaker_role": "user",
             "pcm": {"encoding": "pcm_s16le", "sample_rate_hz": 24000, "channels": 1,
                     "byte_count": 960, "duration_ms": 20.0}, "attributes": {}}
    advance = {**start, "event_id": "e2", "sequence": 2, "monotonic_offset_ns": 21_000_000,
               "listener_offset_ns": 21_000_000, "event_type": "timeline.virtual_advance",
               "attributes": {"advance_ns": 1_000_000}}
    return [start, chunk, advance]


def _refuses_record_by_record(records: list[dict[str, object]]) -> bool:
    listener = None
    try:
        for line, record in enumerate(records, start=1):
            listener = _check_record(record, source=SOURCE, line=line, listener=listener)
    except (BundleMemberError, ArtifactVersionError):
        return True
    return False


def test_the_records_voicelab_writes_pass():
    check_event_records(_records(), source=SOURCE)
    for bundle in ("bundle-1.0", "bundle-2.0"):
        for path in sorted((ROOT / "tests" / "fixtures" / bundle).rglob("voice-events.jsonl")):
            assert read_voice_events(path)


def test_a_1_0_file_has_no_listener_offsets_and_optional_fields_may_be_left_out():
    records = [{k: v for k, v in r.items() if k not in ("listener_offset_ns", "trace", "pcm")}
               for r in _records()]
    check_event_records(records, source=SOURCE)


BAD = [
    (lambda r: r[1].pop("sequence"), "line 2: sequence: missing"),
    (lambda r: r[1].update(monotonic_offset_ns="20"), "line 2: monotonic_offset_ns: must be"),
    (lambda r: r[1].update(monotonic_offset_ns=True), "line 2: monotonic_offset_ns: must be"),
    (lambda r: r[2].update(monotonic_offset_ns=MAX_TIMELINE_NS + 1),
     "line 3: monotonic_offset_ns: .* at most 3,600 s"),
    (lambda r: r[1].pop("listener_offset_ns"), "line 2: listener_offset_ns: in some records"),
    (lambda r: r[0].update(timestamp_utc="noon"), "line 1: timestamp_utc: 'noon' is no ISO"),
    (lambda r: r[1].update(turn_id=7), "line 2: turn_id: must be text or null"),
    (lambda r: r[1].update(event_type=None), "line 2: event_type: must be text"),
    (lambda r: r[1].update(pcm={}), "line 2: pcm.byte_count: must be a whole number"),
    (lambda r: r[1]["pcm"].update(byte_count=-2), r"line 2: pcm.byte_count: -2 is outside"),
    (lambda r: r[1]["pcm"].update(duration_ms="20"), "line 2: pcm.duration_ms: must be"),
    (lambda r: r[2]["attributes"].update(advance_ns=10 ** 30),
     "line 3: attributes.advance_ns: .* at most 3,600 s"),
    (lambda r: r[2].update(attributes=[]), "line 3: attributes: must be an object or null"),
    (lambda r: r[1].update(sequence=-1), "line 2: sequence: -1 is outside"),
    (lambda r: r.__setitem__(1, ["not", "an", "object"]), "line 2: expected a JSON object"),
]


@pytest.mark.parametrize(("damage", "message"), BAD, ids=[m for _, m in BAD])
def test_a_wrong_record_is_refused_naming_its_line_and_key(damage, message):
    records = _records()
    damage(records)
    with pytest.raises(BundleMemberError, match=f"^{SOURCE}: {message}"):
        check_event_records(records, source=SOURCE)


def test_the_line_numbers_given_are_the_ones_named():
    records = _records()
    records[1]["sequence"] = "1"
    with pytest.raises(BundleMemberError, match="line 7: sequence"):
        check_event_records(records, source=SOURCE, lines=[4, 7, 9])


def test_a_newer_record_is_refused_as_a_newer_bundle():
    records = _records()
    records[2]["contract_version"] = "9.0"
    with pytest.raises(ArtifactVersionError, match="line 3: schema version 9.0 is newer"):
        check_event_records(records, source=SOURCE)


def test_audio_adding_up_to_more_than_a_stream_holds_is_refused():
    records = _records()
    records += [{**copy.deepcopy(records[1]), "sequence": 3 + n,
                 "pcm": {**records[1]["pcm"], "byte_count": 200 * 1024 * 1024}}
                for n in range(2)]
    with pytest.raises(BundleMemberError, match="line 5: pcm.byte_count: the user.audio_chunk "
                                                "events add up to"):
        check_event_records(records, source=SOURCE)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=2)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=4)
#: values at the edges of what the check allows, drawn as often as the rest
EDGES: st.SearchStrategy[object] = st.sampled_from([-1, 0, 2 ** 63, MAX_TIMELINE_NS, MAX_TIMELINE_NS + 1,
                         -MAX_TIMELINE_NS - 1, 10 ** 40, 1.5, True, "", "3.0", "9.0",
                         "2026-12-01T07:32:44Z", None, {}, [], {"byte_count": 1}])
FIELDS = sorted(_records()[1]) + ["byte_count", "duration_ms", "advance_ns"]


@settings(max_examples=600, deadline=None)
@given(index=st.integers(0, 2), field=st.sampled_from(FIELDS), value=EDGES | JSON,
       remove=st.booleans())
def test_the_whole_file_check_never_accepts_what_a_record_check_refuses(index, field, value,
                                                                       remove):
    records = _records()
    target = records[index]
    if field in ("byte_count", "duration_ms"):
        target = records[1]["pcm"]
    elif field == "advance_ns":
        target = records[2]["attributes"]
    if remove:
        target.pop(field, None)
    else:
        target[field] = value
    refused = _refuses_record_by_record(records)
    try:
        check_event_records(records, source=SOURCE)
    except (BundleMemberError, ArtifactVersionError):
        assert refused, (field, value, remove)
    else:
        assert not refused, (field, value, remove)
