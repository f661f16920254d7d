"""Azure AI Evaluation built-in evaluators: task adherence, groundedness and coherence.

How the redacted conversation is handed to each (azure-ai-evaluation 1.18):

* ``coherence``: ``conversation={"messages": [...]}``; the SDK scores each user->assistant
  exchange. We aggregate the exchanges by their *minimum*, not the SDK's default mean: one
  ungrounded or incoherent answer must not be averaged away by a fine greeting.
* ``groundedness``: the same conversation plus ``"context"``: the recorded tool calls and
  results, so every assistant claim is checked against the tool evidence.
* ``task_adherence``: agent-message form. ``query`` is a system message (the scenario) and every
  user turn; ``response`` is every assistant turn in order, each preceded by the tool calls and
  tool results recorded for it, so the judge sees which actions really happened.

Exchanges are normalized first: consecutive turns of one speaker are merged, and a
conversation the assistant opens gets a bracketed placeholder user turn, because the SDK pairs
the n-th user turn with the n-th assistant turn. The SDK is synchronous, so construction and
the call run in a daemon thread. Scores are higher-is-better; ``passed`` is
``score >= threshold``. Not-applicable, missing or non-finite scores are errors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypedDict

from pydantic import JsonValue

from ..artifacts import JudgeResult, Usage
from ..config import AzureEvaluator
from ..providers import LLMProvider
from ._evidence import RedactedEvidence
from ._judges import PreparedJudge, render_tool_evidence, run_in_daemon_thread

EVALUATOR_CLASSES = {"task_adherence": "TaskAdherenceEvaluator",
                     "groundedness": "GroundednessEvaluator",
                     "coherence": "CoherenceEvaluator"}
#: task_adherence scores 0 (material failure) or 1; the others score 1..5.
DEFAULT_THRESHOLDS = {"task_adherence": 1.0, "groundedness": 3.0, "coherence": 3.0}
OPENING_PLACEHOLDER = "[the call connects; the assistant speaks first]"
CONVERSATION_KINDS = frozenset({"coherence", "groundedness"})


def exchanges(evidence: RedactedEvidence) -> list[JsonValue]:
    """Alternating user/assistant messages, starting with the user."""
    merged: list[tuple[str, str]] = []  # (role, content)
    for turn in evidence.transcript:
        text = turn["text"].strip()
        if not text:
            continue
        if merged and merged[-1][0] == turn["role"]:
            merged[-1] = (merged[-1][0], f"{merged[-1][1]} {text}")
        else:
            merged.append((turn["role"], text))
    if merged and merged[0][0] == "assistant":
        merged.insert(0, ("user", OPENING_PLACEHOLDER))
    return [{"role": role, "content": content} for role, content in merged]


def _agent_messages(evidence: RedactedEvidence) -> tuple[list[JsonValue], list[JsonValue]]:
    scenario = evidence.scenario
    query: list[JsonValue] = [{
        "role": "system",
        "content": f"The assistant is a voice agent under test. Scenario {scenario['id']}: "
                   f"{scenario['description']}".strip()}]
    response: list[JsonValue] = []
    calls_by_turn: dict[str, list[dict[str, JsonValue]]] = {}
    for call in evidence.tool_calls:
        calls_by_turn.setdefault(str(call.get("turn_id")), []).append(call)
    placed: set[int] = set()
    for turn in evidence.transcript:
        if turn["role"] == "user":
            if turn["text"].strip():
                query.append({"role": "user", "content": [{"type": "text", "text": turn["text"]}]})
            continue
        for call in calls_by_turn.get(str(turn.get("turn_id")), []):
            placed.add(id(call))
            response += _tool_messages(call, len(placed))
        if turn["text"].strip():
            response.append({"role": "assistant",
                             "content": [{"type": "text", "text": turn["text"]}]})
    for call in evidence.tool_calls:
        if id(call) not in placed:
            placed.add(id(call))
            response += _tool_messages(call, len(placed))
    return query, response


def _tool_messages(call: dict[str, JsonValue], number: int) -> list[JsonValue]:
    call_id = str(call.get("call_id") or f"call_{number}")
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        arguments = {} if arguments is None else {"value": arguments}
    messages: list[JsonValue] = [{"role": "assistant", "content": [{
        "type": "tool_call", "tool_call_id": call_id, "name": str(call.get("name")),
        "arguments": arguments}]}]
    if call.get("has_result"):
        messages.append({"role": "tool", "tool_call_id": call_id, "content": [{
            "type": "tool_result", "tool_result": call.get("result")}]})
    return messages


def evaluator_inputs(kind: str, evidence: RedactedEvidence) -> dict[str, JsonValue]:
    """The keyword arguments the evaluator is called with (also what ``sent`` records)."""
    if kind == "coherence":
        return {"conversation": {"messages": exchanges(evidence)}}
    if kind == "groundedness":
        return {"conversation": {"messages": exchanges(evidence),
                                 "context": render_tool_evidence(evidence)}}
    query, response = _agent_messages(evidence)
    return {"query": query, "response": response}


class Interpretation(TypedDict):
    """What one evaluator's result says, as voicelab reads it."""

    score: float
    passed: bool
    rationale: str | None
    model_version: str | None


def interpret(kind: str, raw: dict[str, object], *, threshold: float) -> Interpretation:
    """score/passed/rationale/model_version from the SDK's result dict; ValueError if unusable."""
    status = str(raw.get(f"{kind}_status", "completed"))
    if status not in ("completed", ""):
        raise ValueError(f"{kind} was not applied (status {status!r}): "
                         f"{raw.get(f'{kind}_reason', '')}")
    score = raw.get(kind, raw.get(f"{kind}_score"))
    reason = raw.get(f"{kind}_reason")
    per_turn = raw.get("evaluation_per_turn")
    per_turn = per_turn if isinstance(per_turn, dict) else {}
    turn_scores = per_turn.get(kind)
    if kind in CONVERSATION_KINDS and isinstance(turn_scores, list) and turn_scores:
        # the worst exchange decides (the SDK reports the mean over exchanges)
        try:
            values = [float(v) for v in turn_scores]
        except (TypeError, ValueError):
            raise ValueError(f"{kind} returned a non-numeric exchange score") from None
        worst = min(range(len(values)), key=values.__getitem__)
        score = values[worst]
        reasons = per_turn.get(f"{kind}_reason")
        if isinstance(reasons, list) and worst < len(reasons):
            reason = f"worst of {len(values)} exchanges (#{worst + 1}): {reasons[worst]}"
    try:
        score = float(score)  # type: ignore[arg-type]  # a bad type is the error below
    except (TypeError, ValueError):
        raise ValueError(f"{kind} returned no numeric score ({score!r})") from None
    if not math.isfinite(score):
        raise ValueError(f"{kind} returned no usable score ({score!r}): the model's answer "
                         "could not be parsed")
    properties = raw.get(f"{kind}_properties")
    version = properties.get("model") if isinstance(properties, dict) else None
    return {"score": score, "passed": score >= threshold,
            "rationale": reason if isinstance(reason, str) else None,
            "model_version": version or None}


def _call_sdk(kind: str, model_config: Mapping[str, object], credential: object, threshold: float,
              inputs: Mapping[str, object]) -> dict[str, object]:
    from azure.ai.evaluation import (
        CoherenceEvaluator,
        GroundednessEvaluator,
        TaskAdherenceEvaluator,
    )

    evaluator_class = {"task_adherence": TaskAdherenceEvaluator,
                       "groundedness": GroundednessEvaluator,
                       "coherence": CoherenceEvaluator}[kind]
    evaluator = evaluator_class(dict(model_config), threshold=threshold, credential=credential)
    result = evaluator(**inputs)
    if not isinstance(result, dict):
        raise ValueError(f"{kind} returned {type(result).__name__}, not a result mapping")
    answer: dict[str, object] = dict(result)
    return answer


def prepare_azure_evaluator(evaluator: AzureEvaluator, *, provider: LLMProvider,
                            model_config: Mapping[str, object], credential: object,
                            evidence: RedactedEvidence) -> PreparedJudge:
    kind = evaluator.type
    threshold = (evaluator.threshold if evaluator.threshold is not None
                 else DEFAULT_THRESHOLDS[kind])
    inputs = evaluator_inputs(kind, evidence)
    sent = {"api": f"azure.ai.evaluation.{EVALUATOR_CLASSES[kind]}", **provider.describe(),
            "inputs": inputs}

    async def run() -> JudgeResult:
        raw = await run_in_daemon_thread(
            lambda: _call_sdk(kind, model_config, credential, threshold, inputs),
            name=f"voicelab-judge-{kind}")
        found = interpret(kind, raw, threshold=threshold)
        return JudgeResult(name=kind, kind="azure_evaluator", critical=evaluator.is_critical,
                           status="passed" if found["passed"] else "failed",
                           passed=found["passed"], score=found["score"], threshold=threshold,
                           rationale=found["rationale"], model=provider.model,
                           model_version=found["model_version"], sent=sent,
                           usage=[evaluator_usage(kind, raw, provider=provider.kind,
                                                  model=provider.model)])

    return PreparedJudge(kind, "azure_evaluator", evaluator.is_critical, provider.model, sent, run,
                         threshold=threshold, provider=provider.kind)


def evaluator_usage(kind: str, raw: dict[str, object], *, provider: str,
                    model: str | None) -> Usage:
    """An evaluator's request, with the tokens its result reports
    (``<kind>_prompt_tokens`` / ``<kind>_completion_tokens`` in newer SDKs); tokens it does not
    report are not known (None)."""
    def count(key: str) -> int | None:
        value = raw.get(f"{kind}_{key}")
        return value if isinstance(value, int) and not isinstance(value, bool) \
            and value >= 0 else None

    return Usage(component="judge", provider=provider, model=model, purpose=kind,
                 quantities={"input_token": count("prompt_tokens"),
                             "output_token": count("completion_tokens"), "request": 1})
