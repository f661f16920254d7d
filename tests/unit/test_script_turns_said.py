"""``script_turns_said`` on its own: which lines count, how an unsaid one is named, and when
nothing could have matched a line's keywords."""

from __future__ import annotations

from voicelab.config import ScriptConfig
from voicelab.scoring import script_turns_said_verdict

SCRIPT = ScriptConfig.model_validate({"turns": [
    {"trigger": "the plan prompt", "response": "Record my plan.", "keywords": ["plan"]},
    {"response": "And the code?", "keywords": ["code"]},
    {"response": "Say it again.", "keywords": ["again"], "optional": True}]})


def test_only_required_lines_count_and_an_unsaid_one_is_named():
    passed = script_turns_said_verdict(SCRIPT, {0, 1})
    assert (passed.status, passed.observed) == ("passed", "2 of 2")
    failed = script_turns_said_verdict(SCRIPT, {0})
    assert failed.status == "failed" and failed.critical
    assert failed.why == ("never said (no product response matched its keywords): turns[1]: "
                          "'And the code?', keywords code")


def test_a_call_without_the_products_words_cannot_match_keywords():
    undecided = script_turns_said_verdict(SCRIPT, set(), product_words=False)
    assert undecided.status == "inconclusive" and "no transcripts on the wire" in undecided.why
    assert "turns[0] (trigger 'the plan prompt')" in undecided.why
    # a line without keywords fits any response: unsaid, it is a failure all the same
    plain = ScriptConfig.model_validate({"turns": [{"response": "Hello."}]})
    assert script_turns_said_verdict(plain, set(), product_words=False).status == "failed"
