"""Redaction before judge calls: sensitive fields, secrets and patterns."""

from __future__ import annotations

import json

from voicelab.artifacts._models import ToolCallRecord, TranscriptTurn
from voicelab.config import PersonaConfig, Redaction, ScenarioConfig, SecretScrubber
from voicelab.scoring._quality import ConversationEvidence
from voicelab.scoring._redaction import Redactor


def _evidence() -> ConversationEvidence:
    return ConversationEvidence(
        transcript=[
            TranscriptTurn(turn_id="u1", index=1, role="user",
                           text="My card is 4111-1111 and the code is sk-live-SECRET99"),
            TranscriptTurn(turn_id="a1", index=0, role="assistant", text="Hello!"),
            TranscriptTurn(turn_id="a2", index=2, role="assistant",
                           text="Account 887766 is verified, email pat@example.com"),
        ],
        tool_calls=[
            ToolCallRecord(call_id="c1", name="verify", arguments=None,
                           arguments_json=json.dumps({"Account_Number": 887766, "note": "x"}),
                           result=json.dumps({"status": "ok", "account_number": "887766"}),
                           has_result=True, turn_id="a2"),
        ],
        scenario=ScenarioConfig(id="s1", description="Verify account 887766"),
        persona=PersonaConfig(name="Pat", goals=["give account 887766"]),
        data={"account_number": "887766", "nested": {"pin": 4321, "city": "Oslo"},
              "api_token": "tok-abc123"},
    )


def test_sensitive_fields_secrets_and_patterns_are_replaced_everywhere():
    redaction = Redaction(patterns=[r"[\w.]+@[\w.]+", r"\d{4}-\d{4}"],
                          sensitive_fields=["account_number", "PIN"], replacement="<X>")
    redactor = Redactor(redaction, scrubber=SecretScrubber(["sk-live-SECRET99"]))
    redacted = redactor.evidence(_evidence())
    sent = json.dumps(redacted.as_dict())
    for forbidden in ("887766", "4321", "sk-live-SECRET99", "pat@example.com", "4111-1111",
                      "tok-abc123"):
        assert forbidden not in sent, forbidden
    assert [turn["index"] for turn in redacted.transcript] == [0, 1, 2]
    assert redacted.transcript[1]["text"] == "My card is <X> and the code is ***"
    assert redacted.transcript[2]["text"] == "Account <X> is verified, email <X>"
    call = redacted.tool_calls[0]
    assert call["arguments"] == {"Account_Number": "<X>", "note": "x"}
    assert json.loads(call["result"]) == {"status": "ok", "account_number": "<X>"}
    assert "arguments_json" not in call
    assert redacted.data["nested"] == {"pin": "<X>", "city": "Oslo"}
    assert redacted.data["api_token"] == "***"
    assert redacted.scenario["description"] == "Verify account <X>"
    assert redacted.persona["goals"] == ["give account <X>"]


def test_no_configuration_keeps_text_but_still_scrubs_secrets():
    redactor = Redactor(Redaction(), scrubber=SecretScrubber(["sk-live-SECRET99"]))
    redacted = redactor.evidence(_evidence())
    assert "887766" in redacted.transcript[2]["text"]
    assert redacted.transcript[1]["text"].endswith("the code is ***")


def test_short_sensitive_values_are_replaced_as_fields_only():
    redactor = Redactor(Redaction(sensitive_fields=["age"]), scrubber=SecretScrubber())
    evidence = ConversationEvidence(
        transcript=[TranscriptTurn(turn_id="u", index=0, role="user", text="I am 42, 42 years")],
        tool_calls=[], scenario=ScenarioConfig(id="s"), persona=PersonaConfig(name="p"),
        data={"age": 42})
    redacted = redactor.evidence(evidence)
    assert redacted.data == {"age": "[REDACTED]"}
    assert redacted.transcript[0]["text"] == "I am 42, 42 years"
