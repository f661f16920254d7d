"""azure-ai-evaluation against the local server: the three built-in evaluators and the Azure
OpenAI label grader through evaluate() and the Evals API."""

from __future__ import annotations

import asyncio
import threading
import time

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

API_KEY = "sk-azure-KEY-998877"
TOKEN = "entra-token-for-tests-123"
CRITERIA = ("The assistant must not claim that a reminder was saved unless the recorded tool "
            "evidence supports that claim.")

pytest.importorskip("azure.ai.evaluation")


class StaticTokenCredential:
    """A TokenCredential stand-in for Entra ID (unreachable offline) issuing one fixed token."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs):
        from azure.core.credentials import AccessToken

        self.scopes.append(scopes)
        return AccessToken(TOKEN, int(time.time()) + 3600)


def _evidence(*, saved: bool) -> ConversationEvidence:
    calls = [ToolCallRecord(call_id="call-1", name="save_reminder",
                            arguments={"time": "17:00", "phone": "555-0101-22"},
                            result={"saved": True, "id": "r-9"}, has_result=True,
                            turn_id="a2")] if saved else []
    return ConversationEvidence(
        transcript=[
            TranscriptTurn(turn_id="a1", index=0, role="assistant", text="Hello, how can I help?"),
            TranscriptTurn(turn_id="u1", index=1, role="user", text="Remind me to call at five."),
            TranscriptTurn(turn_id="a2", index=2, role="assistant",
                           text="Done, your reminder was saved for five."),
            TranscriptTurn(turn_id="u2", index=3, role="user", text="Thanks."),
            TranscriptTurn(turn_id="a3", index=4, role="assistant", text="You're welcome."),
        ],
        tool_calls=calls, scenario=ScenarioConfig(id="reminder", description="Set a reminder"),
        persona=PersonaConfig(name="Dana"), data={"phone": "555-0101-22"})


def _evaluate(quality, providers, evidence, **kwargs):
    return asyncio.run(asyncio.wait_for(evaluate_quality(
        quality, providers, evidence, scrubber=SecretScrubber([API_KEY]), environ={}, **kwargs),
        60))


EVALUATORS = {"azure_evaluators": [{"type": "task_adherence", "is_critical": True},
                                   {"type": "groundedness", "threshold": 4},
                                   {"type": "coherence", "threshold": 3}],
              "redaction": {"sensitive_fields": ["phone"]}}


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
def test_each_azure_evaluator_type_against_the_local_server(kind):
    policy = JudgePolicy(rules=[unsupported_claim_rule()], scores={"coherence": 4,
                                                                   "groundedness": 5})
    quality = QualityEvaluation.model_validate({"timeout_seconds": 30, **EVALUATORS})
    with OpenAIServer(policy, api_key=API_KEY, model_version="judge-model-2025") as server:
        providers = Providers.model_validate(
            {"openai": {"base_url": server.base_url, "api_key": API_KEY, "model": "judge"}}
            if kind == "openai" else
            {"azure_openai": {"endpoint": server.azure_endpoint, "model": "judge-dep",
                              "auth": "api_key", "api_key": API_KEY}})
        unsupported = _evaluate(quality, providers, _evidence(saved=False))
        supported = _evaluate(quality, providers, _evidence(saved=True))
        requests = server.requests_for("chat")
        received = server.received_text()
    task, grounded, coherent = unsupported
    assert [r.kind for r in unsupported] == ["azure_evaluator"] * 3
    assert (task.name, task.score, task.threshold, task.status) == (
        "task_adherence", 0.0, 1.0, "failed")
    # Groundedness scores the three user->assistant exchanges 5, 1 (the claim without tool
    # evidence), 5; the SDK's mean (11/3) would hide the unsupported claim: the worst decides.
    assert grounded.score == 1.0 and grounded.status == "failed"
    assert "worst of 3 exchanges (#2)" in grounded.rationale
    assert (coherent.score, coherent.status, coherent.passed) == (4.0, "passed", True)
    assert all(r.model_version == "judge-model-2025" for r in unsupported)
    assert not judges_pass(unsupported), "a critical task_adherence failure gates the trial"
    assert [r.status for r in supported] == ["passed", "passed", "passed"]
    assert "save_reminder" in str(supported[0].sent["inputs"]["response"])
    assert "555-0101-22" not in received
    paths = {r.path for r in requests}
    assert paths == ({"/v1/chat/completions"} if kind == "openai"
                     else {"/openai/deployments/judge-dep/chat/completions"})


def test_unparseable_or_failing_evaluators_are_errors():
    quality = QualityEvaluation.model_validate({
        "timeout_seconds": 1, "azure_evaluators": [{"type": "coherence", "is_critical": True}]})
    with OpenAIServer(JudgePolicy(), api_key=API_KEY) as server:
        providers = Providers.model_validate({"openai": {
            "base_url": server.base_url, "api_key": API_KEY, "model": "judge"}})
        server.add_fault("garbled_reply", times=3)
        [garbled] = _evaluate(quality, providers, _evidence(saved=True))
        server.clear_faults()
        server.add_fault("http_500", times=100)
        before = set(threading.enumerate())
        [failing] = _evaluate(quality, providers, _evidence(saved=True))
        abandoned = [t for t in set(threading.enumerate()) - before
                     if t.name == "voicelab-judge-coherence" and t.is_alive()]
    assert (garbled.status, garbled.passed) == ("error", False)
    assert garbled.error.startswith("JSONDecodeError")
    assert (failing.status, failing.passed, failing.error) == ("error", False,
                                                               "timed out after 1 s")
    # an ordering, not a clock: the SDK retries the 100 failures for over a minute, and the
    # evaluation returned while that abandoned call was still running in its daemon thread
    # (nothing waited for it)
    assert len(abandoned) == 1


def test_label_grader_service_error_is_an_error():
    quality = QualityEvaluation.model_validate({"timeout_seconds": 20, "custom_judges": [
        {"name": "claims", "criteria": CRITERIA, "is_critical": True}]})
    with OpenAIServer(JudgePolicy(), api_key=API_KEY) as server:
        server.add_fault("http_500", times=10, route="evals")
        providers = Providers.model_validate({"azure_openai": {
            "endpoint": server.azure_endpoint, "model": "judge-dep", "auth": "api_key",
            "api_key": API_KEY}})
        [result] = _evaluate(quality, providers, _evidence(saved=True))
        assert server.requests_for("evals"), "the grader reached the Evals API"
    assert (result.status, result.passed, result.critical) == ("error", False, True)
    assert API_KEY not in result.error


@pytest.mark.slow
def test_label_grader_through_evaluate_with_default_credential():
    """evaluate() polls its Evals run after ~4.5 s, so this takes about 5 s."""
    credential = StaticTokenCredential()
    quality = QualityEvaluation.model_validate({
        "timeout_seconds": 30,
        "custom_judges": [{"name": "no_unsupported_commitments", "criteria": CRITERIA,
                           "is_critical": True},
                          {"name": "mentions_time", "criteria": "The assistant confirms a time.",
                           "labels": ["yes", "no"], "passing_labels": ["yes"]}],
        "azure_evaluators": [{"type": "coherence"}],
        "redaction": {"sensitive_fields": ["phone"]}})
    policy = JudgePolicy(rules=[lambda call: "yes" if call.labels == ["yes", "no"] else None,
                                unsupported_claim_rule()])
    with OpenAIServer(policy, bearer_token=TOKEN, model_version="gpt-judge-2025") as server:
        providers = Providers.model_validate({"azure_openai": {
            "endpoint": server.azure_endpoint, "model": "judge-dep",
            "auth": "default_credential"}})
        results = _evaluate(quality, providers, _evidence(saved=False), credential=credential)
        evals = server.requests_for("evals")
        grader_calls = [c for c in server.calls if c.route == "label_grader"]
        received = server.received_text()
    claims, time_judge, coherence = results
    assert (claims.status, claims.label, claims.passed, claims.critical) == (
        "failed", "fail", False, True)
    assert (time_judge.status, time_judge.label) == ("passed", "yes")
    assert claims.model == "judge-dep" and claims.model_version == "gpt-judge-2025"
    assert claims.rationale and coherence.status == "passed"
    assert not judges_pass(results)
    assert {(r.method, r.path.split("/")[2]) for r in evals} == {("POST", "evals"),
                                                                 ("GET", "evals")}
    assert all(r.query.get("api-version") for r in evals)
    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in server.requests)
    # azure-ai-evaluation asks for its own scope (https://ai.azure.com/.default in 1.18).
    assert credential.scopes and all(str(getattr(scope[0], "value", scope[0])).endswith(
        "/.default") for scope in credential.scopes)
    sent_conversation = claims.sent["item"]["conversation"]
    assert "reminder was saved" in sent_conversation
    rendered = [c for c in grader_calls if c.labels == ["pass", "fail"]][0]
    assert sent_conversation in rendered.messages[1]["content"]
    assert "555-0101-22" not in received
