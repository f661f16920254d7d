"""Key entities compared however they are written or recognized: digits and number words,
cardinals and digit groups, recognizer homophones at a run's edges, clock times, words."""

from __future__ import annotations

import pytest

from voicelab.metrics import entity_value, numbers_in, occurs


@pytest.mark.parametrize("text", [
    "my account number is 4471", "it's 44-71", "4,471 please", "four four seven one",
    "forty four seventy one", "four thousand four hundred seventy one",
    "four thousand four hundred and seventy one",
    # what pocketsphinx wrote for piper saying "My account number is 4 4 7 1."
    "my account numbers for four seven one",
    "{pause: 1.2} 4 4 7 1",  # script markup is not what anyone said
])
def test_a_number_is_heard_however_it_is_written(text):
    assert occurs("4471", "number", text)


@pytest.mark.parametrize("text", [
    "four four one seven", "4417", "44 17", "my account number is", "four four seven",
    "four four seven one nine",  # a longer number is another number
    "for the four of us, seven won",  # homophones only beside a number word, and "won" is not
])
def test_another_number_is_not_the_entity(text):
    assert not occurs("4471", "number", text)


def test_what_a_text_says_instead_is_reported():
    assert numbers_in("your account number is four four one seven see you") == ["4417"]
    assert numbers_in("no numbers to go") == []


@pytest.mark.parametrize(("value", "expected"), [
    ("16:00", (16, 0)), ("4 pm", (16, 0)), ("4 p.m.", (16, 0)), ("04:00", (4, 0)),
    ("12:30", (12, 30)), ("9:15 am", (9, 15)), ("twenty five", None),
])
def test_a_time_value_is_the_clock_time_it_writes(value, expected):
    assert entity_value(value, "time") == expected


@pytest.mark.parametrize(("text", "heard"), [
    ("saved for 16:00", True), ("the reminder of state for sixteen zero zero", True),
    ("sixteen hundred", True), ("at four pm", True), ("four o'clock", True), ("4 p.m.", True),
    ("at four am", False), ("at six pm", False), ("seventeen hundred", False),
])
def test_a_time_is_heard_in_any_of_its_spoken_forms(text, heard):
    assert occurs("16:00", "time", text) is heard


def test_words_compare_without_case_punctuation_or_number_words():
    assert occurs("Tuesday", "date", "See you on TUESDAY.")
    assert occurs("March 3rd", "date", "on march third")
    assert occurs("Jordan Lee", "name", "this is jordan lee speaking")
    assert not occurs("Jordan Lee", "name", "this is jordan speaking")
    assert not occurs("Tuesday", "date", "see you on thursday")
