"""The local OpenAI-compatible server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import openai
import pytest

from voicelab.doubles.openai import (
    JudgePolicy,
    ModelCall,
    OpenAIServer,
    ScriptedPolicy,
    unsupported_claim_rule,
)


def test_chat_completions_on_openai_and_azure_paths_are_recorded():
    policy = ScriptedPolicy(["first", {"reply": "second"}])
    with OpenAIServer(policy, model_version="gpt-local-2025") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        reply = client.chat.completions.create(
            model="m1", messages=[{"role": "user", "content": "hello"}], seed=11,
            temperature=0.3, response_format={"type": "json_object"})
        assert reply.choices[0].message.content == "first"
        assert reply.model == "gpt-local-2025" and reply.usage.total_tokens > 0
        azure = openai.AzureOpenAI(azure_endpoint=server.azure_endpoint, api_key="k",
                                   api_version="2025-04-01-preview", max_retries=0)
        reply = azure.chat.completions.create(model="my-deployment",
                                              messages=[{"role": "user", "content": "x"}])
        assert json.loads(reply.choices[0].message.content) == {"reply": "second"}
        first, second = server.requests
        assert (first.path, first.route, first.body["seed"], first.body["temperature"]) == (
            "/v1/chat/completions", "chat", 11, 0.3)
        assert second.deployment == "my-deployment"
        assert second.query == {"api-version": "2025-04-01-preview"}
        assert [call.model for call in server.calls] == ["m1", "my-deployment"]
        assert "hello" in server.received_text()


def test_faults_apply_in_order_and_per_route():
    with OpenAIServer(ScriptedPolicy(["ok"]), retry_after_ms=5) as server:
        url = f"{server.base_url}/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        server.add_fault("http_500", times=2, route="chat")
        server.add_fault("malformed_json", route="chat")
        server.add_fault("http_500", route="evals")
        with httpx.Client(timeout=5) as http:
            statuses = [http.post(url, json=body) for _ in range(2)]
            assert [r.status_code for r in statuses] == [500, 500]
            assert statuses[0].headers["retry-after-ms"] == "5"
            broken = http.post(url, json=body)
            assert broken.status_code == 200
            with pytest.raises(ValueError):
                broken.json()
            assert http.post(url, json=body).json()["choices"][0]["message"]["content"] == "ok"
            assert http.post(f"{server.base_url}/evals", json={}).status_code == 500
            server.add_fault("garbled_reply")
            garbled = http.post(url, json=body).json()["choices"][0]["message"]["content"]
            assert "not the JSON" in garbled
            server.add_fault("slow", delay_seconds=3)
            with pytest.raises(httpx.ReadTimeout):  # the reply is 3 s away: only 0.3 s ends it
                http.post(url, json=body, timeout=0.3)
        assert len(server.requests) == 7


def test_response_format_rejection_and_authorization():
    async def scenario() -> None:
        async with OpenAIServer(ScriptedPolicy(["ok"]), api_key="sk-local",
                                accept_response_format=False) as server:
            async with httpx.AsyncClient(timeout=5) as http:
                url = f"{server.base_url}/chat/completions"
                body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
                denied = await http.post(url, json=body)
                assert denied.status_code == 401
                headers = {"Authorization": "Bearer sk-local"}
                rejected = await http.post(url, json={**body, "response_format": {
                    "type": "json_object"}}, headers=headers)
                assert rejected.status_code == 400
                assert rejected.json()["error"]["param"] == "response_format"
                accepted = await http.post(url, json=body, headers={"api-key": "sk-local"})
                assert accepted.status_code == 200

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_evals_api_label_grading_round_trip():
    policy = JudgePolicy(rules=[unsupported_claim_rule()])
    with OpenAIServer(policy) as server, httpx.Client(base_url=server.azure_endpoint,
                                                      timeout=5) as http:
        criterion = {"type": "label_model", "name": "claims", "model": "dep",
                     "labels": ["pass", "fail"], "passing_labels": ["pass"],
                     "input": [{"role": "developer", "content": "criterion"},
                               {"role": "user", "content": "Conversation:\n{{item.conversation}}"}]}
        created = http.post("/openai/evals", params={"api-version": "2025-04-01-preview"},
                            json={"data_source_config": {"type": "custom", "item_schema": {}},
                                  "testing_criteria": [criterion]}).json()
        criterion_id = created["testing_criteria"][0]["id"]
        content = [{"item": {"conversation": "assistant: Your reminder is saved."}},
                   {"item": {"conversation": "assistant: I called save_reminder; your "
                                             "reminder is saved."}}]
        run = http.post(f"/openai/evals/{created['id']}/runs", json={
            "name": "r", "data_source": {"type": "jsonl", "source": {
                "type": "file_content", "content": content}}}).json()
        deadline = time.monotonic() + 5
        while run["status"] in ("queued", "in_progress") and time.monotonic() < deadline:
            time.sleep(0.02)
            run = http.get(f"/openai/evals/{created['id']}/runs/{run['id']}").json()
        assert run["status"] == "completed"
        assert run["per_testing_criteria_results"] == [
            {"testing_criteria": criterion_id, "passed": 1, "failed": 1}]
        items = http.get(f"/v1/evals/{created['id']}/runs/{run['id']}/output_items",
                         params={"limit": 1}).json()
        assert items["has_more"] is True and len(items["data"]) == 1
        first = items["data"][0]["results"][0]
        assert (first["name"], first["passed"]) == (criterion_id, False)
        assert json.loads(first["sample"]["output"][0]["content"])["result"] == "fail"
        rest = http.get(f"/v1/evals/{created['id']}/runs/{run['id']}/output_items",
                        params={"after": items["last_id"]}).json()
        assert rest["data"][0]["results"][0]["passed"] is True
    rendered = server.calls[0]
    assert rendered.route == "label_grader" and rendered.labels == ["pass", "fail"]
    assert rendered.messages[1]["content"] == "Conversation:\nassistant: Your reminder is saved."


def test_judge_policy_recognizes_azure_evaluator_prompts():
    policy = JudgePolicy(scores={"coherence": 2})
    call = ModelCall("chat", "m", [{"role": "user", "content": "# Definition\n**Coherence** ..."}])
    assert call.evaluator == "coherence"
    assert policy(call) == {"reason": "Let's think step by step: rule engine: no rule fired",
                            "score": 2, "status": "completed"}
    plain = ModelCall("chat", "m", [{"role": "user", "content": "judge this"}])
    assert plain.evaluator is None and policy(plain)["label"] == "pass"
