"""The fake product's reply planning, reply audio faults and SQLite state (no sockets)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from voicelab.audio import analyze_signal
from voicelab.doubles.product._fake_behaviour import (
    DEFAULT_OPENING,
    FakeBehaviour,
    Reminder,
    plan_reply,
    reminder_from_request,
    reply_audio,
)
from voicelab.doubles.product._fake_store import (
    FakeProductProbe,
    FakeStore,
    TemporaryDatabaseDir,
    read_outcome,
)


def test_default_texts_carry_the_seed_keywords():
    assert "daily plan" in DEFAULT_OPENING and "reminder" in DEFAULT_OPENING
    plan = plan_reply(FakeBehaviour(), 1, Reminder("Submit", "16:00"))
    for token in ("plan", "recorded", "reminder", "saved", "16:00"):
        assert token in plan.text
    assert (plan.saves_reminder, plan.records_plan, plan.completes) == (True, True, True)


@pytest.mark.parametrize(("request_data", "expected"), [
    ({"context": {"requested_reminder": "Submit the weekly summary at 16:00"}},
     Reminder("Submit the weekly summary", "16:00")),
    ({"requested_reminder": "Call the clinic at 9:05."}, Reminder("Call the clinic", "09:05")),
    ({"context": {"requested_reminder": "Water plants"}}, Reminder("Water plants", "11:11")),
    ({}, Reminder("Follow up on the daily plan", "11:11")),
])
def test_reminder_from_request(request_data, expected):
    assert reminder_from_request(request_data, fallback_time="11:11") == expected


def test_multi_turn_plans_and_claim_without_tool():
    behaviour = FakeBehaviour(complete_after_turns=2, replies=["First: {reminder_time}"])
    first = plan_reply(behaviour, 1, Reminder("x", "08:00"))
    second = plan_reply(behaviour, 2, Reminder("x", "08:00"))
    assert (first.text, first.saves_reminder, first.completes) == ("First: 08:00", False, False)
    assert (second.saves_reminder, second.completes) == (True, True)
    liar = plan_reply(FakeBehaviour(claim_without_tool=True), 1, Reminder("x", "08:00"))
    assert "saved" in liar.text
    assert (liar.saves_reminder, liar.records_plan, liar.completes) == (False, False, True)


def test_reply_audio_faults_show_in_signal_analysis():
    text = "Your daily plan is recorded."
    clean = analyze_signal(reply_audio(text, FakeBehaviour()))
    clipped = analyze_signal(reply_audio(text, FakeBehaviour(clip=True)))
    truncated = analyze_signal(reply_audio(text, FakeBehaviour(truncate=True)))
    silent = analyze_signal(reply_audio(text, FakeBehaviour(silence_ms=1000)))
    assert clean.clipped_sample_ratio == 0 and not clean.possible_truncation
    assert clipped.clipped_sample_ratio > 0.05
    assert truncated.possible_truncation
    assert truncated.duration_seconds < clean.duration_seconds
    # one second of inserted digital silence, within a sample of rounding
    assert silent.duration_seconds == pytest.approx(clean.duration_seconds + 1.0, abs=1e-3)
    assert silent.silence_ratio > clean.silence_ratio


def test_reply_audio_is_deterministic_per_voice_seed():
    first = reply_audio("Hello there.", FakeBehaviour(voice_seed=3)).to_bytes()
    assert first == reply_audio("Hello there.", FakeBehaviour(voice_seed=3)).to_bytes()
    assert first != reply_audio("Hello there.", FakeBehaviour(voice_seed=4)).to_bytes()


def test_store_and_outcome(tmp_path):
    path = tmp_path / "db.sqlite3"
    store = FakeStore(path)
    store.start_session("s1", "daily planning", {"session_id": "s1"})
    store.start_session("s2", "daily planning", {"session_id": "s2"})
    store.record_plan("s1", turn_index=1, topic="daily planning", plan_text="plan", audio_ms=900)
    store.save_reminder("s1", text="Submit the weekly summary", time="16:00")
    store.record_plan("s2", turn_index=1, topic="daily planning", plan_text="plan", audio_ms=900)
    store.close()
    assert read_outcome(path, "s1") == {
        "session_id": "s1", "follow_up_created": True, "report_fields_complete": True,
        "reminder_created": True, "reminder_time": "16:00"}
    partial = read_outcome(path, "s2")
    assert partial["reminder_created"] is False and partial["report_fields_complete"] is False
    assert read_outcome(path, "unknown") is None
    assert read_outcome(tmp_path / "missing.sqlite3", "s1") is None
    probe = FakeProductProbe({"database_path": str(path)})
    assert asyncio.run(probe.probe({"session_id": "s1"}))["reminder_time"] == "16:00"


def test_temporary_database_dir_lives_as_long_as_a_holder():
    directory = TemporaryDatabaseDir()
    path = directory.path
    probe = FakeProductProbe({"database_path": str(directory.database_path)},
                             keep_alive=directory)
    del directory
    gc.collect()
    assert path.is_dir()
    del probe
    gc.collect()
    assert not path.exists()
