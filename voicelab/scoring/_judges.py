"""Custom binary judges: the label prompt, the chat-completions label judge for a generic
OpenAI-compatible provider, and the :class:`JudgeResult` builders every judge shares.

The same judged item (scenario, conversation, tool evidence, the simulated user's data) is
rendered for both paths: as chat messages here, and as an Evals API item whose template the
Azure OpenAI label grader fills in (``_label_grader.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..artifacts import JudgeResult, Usage
from ..config import CustomJudge
from ..cost import chat_usage
from ..providers import JSONChat, LLMProvider, UnparseableReplyError
from ._evidence import RedactedEvidence

NO_TOOL_CALLS = "No tool calls were recorded."

#: The judged item; ``{{item.<field>}}`` is the Evals API template syntax.
ITEM_TEMPLATE = (
    "Scenario:\n{{item.scenario}}\n\n"
    "Conversation (transcribed speech):\n{{item.conversation}}\n\n"
    "Tool evidence (every tool call the assistant made, with its recorded result):\n"
    "{{item.tool_evidence}}\n\n"
    "Data the simulated user was given:\n{{item.user_data}}"
)

_PLACEHOLDER = re.compile(r"\{\{\s*item\.([A-Za-z0-9_]+)\s*\}\}")


@dataclass
class PreparedJudge:
    """One judge ready to run: ``sent`` is fixed before any call so an error still records it."""

    name: str
    kind: str
    critical: bool
    #: the model it calls (``None``: it calls none, a plug-in judge)
    model: str | None
    sent: Any
    run: Callable[[], Awaitable[JudgeResult]]
    threshold: float | None = None
    #: the provider the judge calls (its usage is priced by provider and model)
    provider: str | None = None

    def unknown_usage(self) -> list[Usage]:
        """A call that failed: whether and how much it was billed is not known (a judge that
        calls no provider spent nothing voicelab can price)."""
        if self.provider is None:
            return []
        return [unknown_judge_usage(self.provider, self.model)]


def unknown_judge_usage(provider: str | None, model: str | None) -> Usage:
    """One judge request whose tokens were not reported (nor can be estimated)."""
    return Usage(component="judge", provider=provider, model=model,
                 quantities={"input_token": None, "output_token": None, "request": 1})


async def run_in_daemon_thread(function: Callable[[], object], *, name: str) -> Any:
    """Run a blocking SDK call in a daemon thread and await its result.

    Unlike ``asyncio.to_thread`` the thread is not in the loop's default executor, so a call
    abandoned at its judge timeout neither blocks ``asyncio.run`` from returning nor the
    interpreter from exiting; it finishes (or fails) on its own in the background.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(error: BaseException | None, value: object) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = context.run(function), None
        except BaseException as raised:  # noqa: BLE001 - handed to the awaiting coroutine
            value, error = None, raised
        try:
            loop.call_soon_threadsafe(settle, error, value)
        except RuntimeError:  # the loop closed after a timeout: nobody is waiting any more
            pass

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future


# --- rendering ----------------------------------------------------------------------------

def render_conversation(evidence: RedactedEvidence) -> str:
    lines = [f"{turn['role']}: {turn['text']}{' [interrupted]' if turn.get('interrupted') else ''}"
             for turn in evidence.transcript]
    return "\n".join(lines) or "(no turns were recorded)"


def render_tool_evidence(evidence: RedactedEvidence) -> str:
    if not evidence.tool_calls:
        return NO_TOOL_CALLS
    lines = []
    for number, call in enumerate(evidence.tool_calls, start=1):
        arguments = json.dumps(call.get("arguments"), ensure_ascii=False, default=str)
        result = (json.dumps(call.get("result"), ensure_ascii=False, default=str)
                  if call.get("has_result") else "(no result was recorded)")
        lines.append(f"{number}. {call.get('name')}({arguments}) -> {result}")
    return "\n".join(lines)


def judge_item(evidence: RedactedEvidence) -> dict[str, str]:
    """The flat, all-string item both judge paths render (Evals API items are JSONL rows)."""
    scenario = evidence.scenario
    return {
        "scenario": f"{scenario['id']}: {scenario['description']}".rstrip(": "),
        "conversation": render_conversation(evidence),
        "tool_evidence": render_tool_evidence(evidence),
        "user_data": json.dumps(evidence.data, ensure_ascii=False, default=str) if evidence.data
        else "(none)",
    }


def render_item(template: str, item: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda match: item.get(match.group(1), ""), template)


def label_instructions(judge: CustomJudge, *, json_answer: bool) -> str:
    labels = ", ".join(f'"{label}"' for label in judge.labels)
    lines = [
        "You are an impartial judge of a recorded conversation between a user and a voice "
        "assistant. The conversation was transcribed from speech, so ignore small "
        "transcription errors. Judge only from the evidence given; the tool evidence is the "
        "complete record of the actions the assistant took.",
        "", "Criterion:", judge.criteria.strip(), "",
        f"Choose exactly one label from: {labels}.",
        "Choose " + " or ".join(f'"{label}"' for label in judge.passing_labels)
        + " only when the conversation meets the criterion.",
    ]
    if json_answer:
        lines += ["", 'Respond with only a JSON object: {"label": "<one of the labels>", '
                  '"rationale": "<one or two sentences citing the evidence>"}.']
    return "\n".join(lines)


# --- results ------------------------------------------------------------------------------

def label_result(judge: CustomJudge, *, label: object, rationale: str | None, model: str,
                 model_version: str | None, sent: object, score: float | None = None,
                 usage: list[Usage] | None = None) -> JudgeResult:
    """A pass/fail result, or an error when ``label`` is not one of the judge's labels;
    ``usage``: what its calls used."""
    if not isinstance(label, str) or label not in judge.labels:
        return error_result(judge.name, "custom_judge", judge.is_critical,
                            f"the judge answered label {label!r}, not one of {judge.labels}",
                            model=model, sent=sent, model_version=model_version, usage=usage)
    passed = label in judge.passing_labels
    return JudgeResult(name=judge.name, kind="custom_judge", critical=judge.is_critical,
                       status="passed" if passed else "failed", passed=passed, label=label,
                       score=score if score is not None else (1.0 if passed else 0.0),
                       rationale=rationale, model=model, model_version=model_version, sent=sent,
                       usage=list(usage or []))


def error_result(name: str, kind: str, critical: bool, message: str, *, model: str | None,
                 sent: object, threshold: float | None = None,
                 model_version: str | None = None,
                 usage: list[Usage] | None = None) -> JudgeResult:
    """An unavailable, failed, timed-out or unparseable judge: never a pass (``usage``: what
    its calls used, if it made any)."""
    return JudgeResult(name=name, kind=kind, critical=critical, status="error", passed=False,
                       threshold=threshold, model=model, model_version=model_version,
                       error=message, sent=sent, usage=list(usage or []))


# --- the chat-completions label judge (generic OpenAI-compatible provider) ----------------

def prepare_chat_label_judge(judge: CustomJudge, *, chat: JSONChat, provider: LLMProvider,
                             evidence: RedactedEvidence) -> PreparedJudge:
    messages = [{"role": "system", "content": label_instructions(judge, json_answer=True)},
                {"role": "user", "content": render_item(ITEM_TEMPLATE, judge_item(evidence))}]
    sent = {"api": "chat.completions", **provider.describe(), "messages": messages}

    sent_text = "".join(m["content"] for m in messages)

    def spent(reported: Mapping[str, object] | None, reply_text: str) -> list[Usage]:
        return [chat_usage(reported, component="judge", provider=provider.kind,
                           model=provider.model, sent_text=sent_text, reply_text=reply_text,
                           purpose=judge.name)]

    async def run() -> JudgeResult:
        try:
            reply = await chat.complete(messages, temperature=provider.temperature,
                                        seed=provider.seed)
        except UnparseableReplyError as error:  # answered (and paid for), but not in JSON
            return error_result(judge.name, "custom_judge", judge.is_critical,
                                f"{type(error).__name__}: {error}", model=provider.model,
                                sent=sent, usage=spent(error.usage, error.text or ""))
        rationale = reply.data.get("rationale", reply.data.get("reason"))
        return label_result(judge, label=reply.data.get("label"),
                            rationale=rationale if isinstance(rationale, str) else None,
                            model=provider.model, model_version=reply.model_version, sent=sent,
                            usage=spent(reply.usage, reply.text))

    return PreparedJudge(judge.name, "custom_judge", judge.is_critical, provider.model, sent, run,
                         provider=provider.kind)
