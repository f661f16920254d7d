"""Custom judges through chat completions (generic OpenAI-compatible provider) and the
evaluate_quality semantics, against the local server over real HTTP."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from voicelab.artifacts._models import ToolCallRecord, TranscriptTurn
from voicelab.config import (
    PersonaConfig,
    Providers,
    QualityEvaluation,
    ScenarioConfig,
    SecretScrubber,
)
from voicelab.doubles.openai import JudgePolicy, OpenAIServer, unsupported_claim_rule
from voicelab.scoring._quality import ConversationEvidence, evaluate_quality, judges_pass

API_KEY = "sk-judge-KEY-000111"
SECRET = "super-SECRET-token-42"
CRITERIA = ("The assistant must not claim that a reminder was saved unless the recorded tool "
            "evidence supports that claim.")


def _evidence(*, saved: bool) -> ConversationEvidence:
    calls = [ToolCallRecord(call_id="c1", name="save_reminder",
                            arguments={"time": "17:00", "account_number": "ACC-778899"},
                            result={"ok": True}, has_result=True, turn_id="a2")] if saved else []
    return ConversationEvidence(
        transcript=[
            TranscriptTurn(turn_id="a1", index=0, role="assistant", text="Hi, what can I do?"),
            TranscriptTurn(turn_id="u1", index=1, role="user",
                           text=f"Remind me at five. My code is {SECRET}."),
            TranscriptTurn(turn_id="a2", index=2, role="assistant",
                           text="Done, your reminder was saved for account ACC-778899."),
        ],
        tool_calls=calls, scenario=ScenarioConfig(id="reminder", description="Set a reminder"),
        persona=PersonaConfig(name="Dana"), data={"account_number": "ACC-778899", "city": "Oslo"})


def _quality(**extra) -> QualityEvaluation:
    return QualityEvaluation.model_validate({
        "timeout_seconds": 10,
        "custom_judges": [{"name": "no_unsupported_commitments", "criteria": CRITERIA,
                           "is_critical": True},
                          {"name": "polite", "criteria": "The assistant is polite."}],
        "redaction": {"sensitive_fields": ["account_number"]}, **extra})


def _providers(server: OpenAIServer, **extra) -> Providers:
    return Providers.model_validate({"openai": {"base_url": server.base_url, "api_key": API_KEY,
                                                "model": "judge-model", "temperature": 0,
                                                "seed": 7, **extra}})


def _evaluate(quality, providers, evidence, **kwargs):
    return asyncio.run(asyncio.wait_for(evaluate_quality(
        quality, providers, evidence, scrubber=SecretScrubber([API_KEY, SECRET]), environ={},
        **kwargs), 30))


def test_critical_judge_failure_fails_the_gate_and_advisory_never_does():
    policy = JudgePolicy(rules=[unsupported_claim_rule()])
    with OpenAIServer(policy, api_key=API_KEY, model_version="judge-2025-01") as server:
        unsupported = _evaluate(_quality(), _providers(server), _evidence(saved=False))
        supported = _evaluate(_quality(), _providers(server), _evidence(saved=True))
        bodies = [r.body for r in server.requests_for("chat")]
    critical, advisory = unsupported
    assert (critical.name, critical.status, critical.passed, critical.label) == (
        "no_unsupported_commitments", "failed", False, "fail")
    assert critical.critical and not advisory.critical
    assert (critical.model, critical.model_version) == ("judge-model", "judge-2025-01")
    assert "rule" in critical.rationale
    assert not judges_pass(unsupported)
    assert [r.status for r in supported] == ["passed", "passed"] and judges_pass(supported)
    assert (bodies[0]["temperature"], bodies[0]["seed"]) == (0, 7)
    assert bodies[0]["response_format"] == {"type": "json_object"}


def test_advisory_failure_does_not_gate():
    policy = JudgePolicy(rules=[unsupported_claim_rule()])
    quality = _quality(custom_judges=[{"name": "claims", "criteria": CRITERIA,
                                       "is_critical": False}])
    with OpenAIServer(policy, api_key=API_KEY) as server:
        results = _evaluate(quality, _providers(server), _evidence(saved=False))
    assert results[0].status == "failed" and judges_pass(results)


@pytest.mark.parametrize("fault", ["http_500", "malformed_json", "garbled_reply"])
def test_judge_faults_are_errors_never_passes(fault):
    quality = _quality(custom_judges=[{"name": "claims", "criteria": CRITERIA,
                                       "is_critical": True}])
    with OpenAIServer(JudgePolicy(), api_key=API_KEY) as server:
        server.add_fault(fault, times=3)
        [result] = _evaluate(quality, _providers(server), _evidence(saved=True))
    assert (result.status, result.passed, result.critical) == ("error", False, True)
    assert result.error and API_KEY not in result.error
    assert result.sent["messages"][1]["role"] == "user"
    assert not judges_pass([result])


def test_a_slow_judge_times_out_as_an_error():
    quality = _quality(timeout_seconds=0.5)
    with OpenAIServer(JudgePolicy(), api_key=API_KEY) as server:
        # the slow reply is a minute away (the server drops it when it stops)
        server.add_fault("slow", times=1, delay_seconds=60)
        results = _evaluate(quality, _providers(server), _evidence(saved=True))
        received, answered = len(server.requests), server.usage.requests
    slow = [r for r in results if r.status == "error"]
    assert len(slow) == 1 and slow[0].error == "timed out after 0.5 s"
    # the server's own record, not a clock: both judges asked, and the evaluation returned
    # while the slow request was still unanswered (the judge was cut at its timeout, not waited
    # for)
    assert (received, answered) == (2, 1)


def test_missing_credential_or_package_makes_every_judge_an_error(monkeypatch):
    quality = _quality()
    no_key = Providers.model_validate({"openai": {"base_url": "http://127.0.0.1:9/v1",
                                                  "model": "judge-model"}})
    results = _evaluate(quality, no_key, _evidence(saved=True))
    assert [r.status for r in results] == ["error", "error"]
    assert "OPENAI_API_KEY" in results[0].error and results[0].critical
    monkeypatch.setitem(sys.modules, "openai", None)
    with_key = Providers.model_validate({"openai": {"base_url": "http://127.0.0.1:9/v1",
                                                    "model": "judge-model", "api_key": "k"}})
    results = _evaluate(quality, with_key, _evidence(saved=True))
    assert results[0].status == "error"
    assert results[0].error.endswith("needs the 'openai' package: pip install 'voicelab[azure]'")
    nothing = _evaluate(QualityEvaluation(), with_key, _evidence(saved=True))
    assert nothing == []


def test_secrets_and_sensitive_fields_never_reach_the_server():
    quality = _quality(redaction={"sensitive_fields": ["account_number"],
                                  "patterns": [r"\bOslo\b"], "replacement": "[HIDDEN]"})
    with OpenAIServer(JudgePolicy(), api_key=API_KEY) as server:
        results = _evaluate(quality, _providers(server), _evidence(saved=True))
        received = server.received_text()
        first_body = server.requests_for("chat")[0].body
    for forbidden in (SECRET, "ACC-778899", "Oslo"):
        assert forbidden not in received, forbidden
    assert "[HIDDEN]" in received and "***" in received
    sent_messages = {json.dumps(r.sent["messages"]) for r in results}
    assert json.dumps(first_body["messages"]) in sent_messages, "sent is what the judge received"
