"""The demo agent's rules: spoken times, intents and dialogue decisions (pure functions)."""

from __future__ import annotations

import pytest

from voicelab.doubles.demo_agent import parse_spoken_time, spoken_time
from voicelab.doubles.demo_agent._rules import (
    DEFAULT_REMINDER_TEXT,
    REPEAT_TEXT,
    DialogueState,
    RequestedReminder,
    decide,
    reminder_from_request,
    topic_from_request,
    understand,
    words_of,
)

REQUEST_AT_1600 = RequestedReminder("Submit the weekly summary", "16:00")
REQUEST_WITHOUT_TIME = RequestedReminder("Submit the weekly summary", None)


@pytest.mark.parametrize(("text", "expected_time", "expected_words"), [
    ("set a reminder for four p m", "16:00", "four p m"),
    ("remind me at four pm please", "16:00", "four pm"),
    ("at 4 p.m.", "16:00", "4 p m"),
    ("set a reminder at sixteen hundred", "16:00", "sixteen hundred"),
    ("sixteen hundred hours", "16:00", "sixteen hundred hours"),
    ("at four o'clock", "16:00", "four o'clock"),
    ("four oclock", "16:00", "four oclock"),
    ("remind me at four", "16:00", "four"),
    ("four thirty in the afternoon", "16:30", "four thirty in the afternoon"),
    ("sixteen thirty", "16:30", "sixteen thirty"),
    ("sixteen forty five", "16:45", "sixteen forty five"),
    ("half past four", "16:30", "half past four"),
    ("quarter past nine a m", "09:15", "quarter past nine a m"),
    ("quarter to five", "16:45", "quarter to five"),
    ("nine in the morning", "09:00", "nine in the morning"),
    ("eleven a m", "11:00", "eleven a m"),
    ("twelve thirty p m", "12:30", "twelve thirty p m"),
    ("twelve a m", "00:00", "twelve a m"),
    ("seven in the evening", "19:00", "seven in the evening"),
    ("oh nine hundred", "09:00", "oh nine hundred"),
    ("oh nine thirty", "09:30", "oh nine thirty"),
    ("ten oh five", "10:05", "ten oh five"),
    ("at nine", "09:00", "nine"),  # after seven, no afternoon assumption
    ("noon", "12:00", "noon"),
    ("at midnight", "00:00", "midnight"),
    ("Submit the weekly summary at 16:00", "16:00", "16:00"),
    ("Remind me at 4:30 PM.", "16:30", "4:30 pm"),
])
def test_spoken_times_are_parsed(text, expected_time, expected_words):
    found = parse_spoken_time(text)
    assert found is not None, text
    assert (found.time, found.words) == (expected_time, expected_words)


@pytest.mark.parametrize("text", [
    "",
    "please record my plan for today",
    "one two three four five",  # counting is not a time
    "i am at work",
    "for p m",  # a misrecognized "four" stays misrecognized
    "it's a reminder and sixty and",
    "ten fifteen",  # a bare number pair is not a time without an anchor
    "sixteen p m",  # contradictory
    "quarter past",
    "half to five",
    "25:00",
])
def test_no_time_is_invented(text):
    assert parse_spoken_time(text) is None


def test_every_time_the_agent_says_reads_back_to_itself():
    mismatches = []
    for hour in range(24):
        for minute in range(60):
            clock = f"{hour:02d}:{minute:02d}"
            said = spoken_time(clock)
            found = parse_spoken_time(f"I saved the reminder for {said}.")
            if found is None or found.time != clock or found.words != said:
                mismatches.append((clock, said, found))
    assert mismatches == []


@pytest.mark.parametrize(("clock", "said"), [
    ("16:00", "sixteen hundred"), ("16:30", "sixteen thirty"), ("09:05", "oh nine oh five"),
    ("00:00", "zero hundred"), ("10:30", "ten thirty hours"), ("23:59", "twenty three fifty nine"),
])
def test_spoken_time_uses_military_words(clock, said):
    assert spoken_time(clock) == said


def test_words_of_splits_recognizer_and_written_text():
    assert words_of("Set it for 4 p.m., please!") == ["set", "it", "for", "4", "p", "m", "please"]
    assert words_of("It\u2019s four o'clock") == ["it's", "four", "o'clock"]


def test_request_reminder_and_topic_come_from_top_level_or_context():
    nested = {"context": {"topic": "daily planning",
                          "requested_reminder": "Submit the weekly summary at 16:00"}}
    assert reminder_from_request(nested) == REQUEST_AT_1600
    assert topic_from_request(nested) == "daily planning"
    top = {"requested_reminder": "Call Sam at four p m", "topic": "calls"}
    assert reminder_from_request(top) == RequestedReminder("Call Sam", "16:00")
    assert topic_from_request(top) == "calls"
    assert reminder_from_request({"requested_reminder": "Call Sam"}) == RequestedReminder(
        "Call Sam", None)
    assert reminder_from_request({}) == RequestedReminder(DEFAULT_REMINDER_TEXT, None)
    assert topic_from_request({"context": {"topic": "  "}}) == "daily planning"


def test_intents_take_the_recognizer_literally():
    understood = understand("please record my plan for today set a reminder at sixteen hundred")
    assert understood.mentions_plan and understood.mentions_reminder
    assert understood.time is not None and understood.time.time == "16:00"
    misheard = understand("please record my daily planet and center reminder for for p m")
    assert not misheard.mentions_plan  # "planet" is not a plan
    assert misheard.mentions_reminder and misheard.time is None
    assert not understand("good morning").useful


def test_plan_and_spoken_time_complete_in_one_turn():
    decision = decide(DialogueState(), understand(
        "record my plan for today set a reminder at four o'clock"), requested=REQUEST_AT_1600)
    assert decision.record_plan and decision.completes
    assert decision.reminder is not None
    assert (decision.reminder.time, decision.reminder.time_source,
            decision.reminder.time_heard) == ("16:00", "speech", "four o'clock")
    assert decision.reminder.text == "Submit the weekly summary"
    assert decision.reply_text == ("I recorded your daily plan, and I saved the reminder for "
                                   "sixteen hundred.")


def test_spoken_time_wins_over_the_requested_one():
    decision = decide(DialogueState(), understand("plan done remind me at nine a m"),
                      requested=REQUEST_AT_1600)
    assert decision.reminder is not None
    assert (decision.reminder.time, decision.reminder.time_source) == ("09:00", "speech")
    assert "oh nine hundred" in decision.reply_text


def test_reminder_without_a_spoken_time_falls_back_to_the_request():
    decision = decide(DialogueState(), understand("set a reminder please"),
                      requested=REQUEST_AT_1600)
    assert decision.reminder is not None
    assert (decision.reminder.time, decision.reminder.time_source,
            decision.reminder.time_heard) == ("16:00", "request", None)
    assert not decision.record_plan and not decision.completes
    assert decision.reply_text == ("I saved the reminder for sixteen hundred. "
                                   "What is your daily plan?")


def test_without_any_time_the_agent_asks_and_uses_the_answer():
    first = decide(DialogueState(), understand("my plan is ready remind me"),
                   requested=REQUEST_WITHOUT_TIME)
    assert first.reminder is None and first.record_plan
    assert first.state.awaiting_time and not first.completes
    assert first.reply_text.endswith("What time should I set the reminder for?")
    second = decide(first.state, understand("at half past four"),
                    requested=REQUEST_WITHOUT_TIME)
    assert second.reminder is not None and second.reminder.time == "16:30"
    assert not second.record_plan and second.completes
    assert second.reply_text == "I saved the reminder for sixteen thirty."


def test_a_time_alone_is_not_a_reminder_unless_one_was_asked_for():
    decision = decide(DialogueState(), understand("at four o'clock"), requested=REQUEST_AT_1600)
    assert decision.reminder is None
    assert decision.reply_text == REPEAT_TEXT


def test_nothing_useful_asks_to_repeat_and_keeps_the_state():
    state = DialogueState(plan_recorded=True)
    decision = decide(state, understand("the weather is nice"), requested=REQUEST_AT_1600)
    assert decision.reply_text == REPEAT_TEXT
    assert "daily plan" in REPEAT_TEXT and "again" in REPEAT_TEXT
    assert decision.state == state
    assert not decision.record_plan and decision.reminder is None
    assert decide(state, understand(""), requested=REQUEST_AT_1600).reply_text == REPEAT_TEXT


def test_plan_only_asks_for_the_reminder_and_completes_later():
    first = decide(DialogueState(), understand("here is my plan for today"),
                   requested=REQUEST_AT_1600)
    assert first.reply_text == "I recorded your daily plan. Which reminder do you want saved?"
    second = decide(first.state, understand("set a reminder at sixteen hundred"),
                    requested=REQUEST_AT_1600)
    assert second.completes and not second.record_plan
