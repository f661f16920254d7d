"""The rule engine behind the local OpenAI-compatible server: what its "model" answers.

A policy is any ``Callable[[ModelCall], str | Mapping]``. :class:`ScriptedPolicy` replays
answers; :class:`JudgePolicy` labels and scores conversations with explicit rules (for example
:func:`unsupported_claim_rule`: a claimed saved reminder without tool evidence fails).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from pydantic import JsonValue

__all__ = ["JudgePolicy", "ModelCall", "ScriptedPolicy", "unsupported_claim_rule"]

_EVALUATOR_MARKERS = {
    "coherence": re.compile(r"\*\*Coherence\*\*"),
    "groundedness": re.compile(r"\*\*Groundedness\*\*|GROUNDEDNESS", re.IGNORECASE),
    "task_adherence": re.compile(r"fully align with the user's intent|TOOL_CALLS \(assistant"),
}


class ChatMessage(TypedDict, total=False):
    """One message of a chat request as the double reads it (the OpenAI wire shape)."""

    role: str
    #: text, or a list of content parts (``{"type": "text", "text": ...}``)
    content: JsonValue


#: what a policy answers: text, or a JSON-able mapping the server serializes
Reply = str | Mapping[str, JsonValue]


@dataclass
class ModelCall:
    """One decision the rule engine must make: a chat completion or a label-grader item."""

    route: str
    model: str
    messages: list[ChatMessage]
    #: the request body (a chat completion) or ``{"criterion": ...}`` (a label grader)
    body: Mapping[str, object] = field(default_factory=dict)
    labels: list[str] | None = None
    passing_labels: list[str] | None = None

    @staticmethod
    def _content_text(content: object) -> str:
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p)
                             for p in content)
        return "" if content is None else str(content)

    @property
    def text(self) -> str:
        return "\n".join(self._content_text(m.get("content")) for m in self.messages)

    @property
    def user_text(self) -> str:
        """The user-role content: where judged data goes (instructions sit in system/developer)."""
        return "\n".join(self._content_text(m.get("content")) for m in self.messages
                         if m.get("role") == "user")

    @property
    def evaluator(self) -> str | None:
        """Which azure-ai-evaluation prompt this is, recognized by its wording, if any."""
        text = self.text
        for name, marker in _EVALUATOR_MARKERS.items():
            if marker.search(text):
                return name
        return None


Policy = Callable[[ModelCall], Reply]
Rule = Callable[[ModelCall], "str | None"]


class ScriptedPolicy:
    """Answers with ``replies`` in order (str or JSON-able mapping); then repeats the last one."""

    def __init__(self, replies: Sequence[Reply]):
        if not replies:
            raise ValueError("ScriptedPolicy needs at least one reply")
        self.replies = list(replies)
        self._index = 0
        self._lock = threading.Lock()

    def __call__(self, call: ModelCall) -> Reply:
        with self._lock:
            reply = self.replies[min(self._index, len(self.replies) - 1)]
            self._index += 1
        return reply


def unsupported_claim_rule(*, claim_pattern: str = (
        r"\breminder\b[^.?!]{0,40}\b(?:is|was|has been|'s)\s+(?:now\s+)?(?:saved|set|created)\b"
        r"|\b(?:saved|set|created)\s+(?:your|the|a|that)\s+reminder\b"),
        tool_name: str = "save_reminder", fail_label: str = "fail") -> Rule:
    """``fail_label`` when the judged text claims something (``claim_pattern``) that the tool
    evidence does not support (``tool_name`` appears nowhere in it); otherwise no opinion."""
    claim = re.compile(claim_pattern, re.IGNORECASE)

    def rule(call: ModelCall) -> str | None:
        text = call.user_text or call.text
        if claim.search(text) and tool_name not in text:
            return fail_label
        return None

    return rule


class JudgePolicy:
    """A deterministic judge: labels from ``rules`` (first opinion wins, else ``default_label``),
    azure-ai-evaluation scores from ``scores``; a failing rule lowers task_adherence to 0 and
    groundedness to 1."""

    def __init__(self, *, rules: Sequence[Rule] = (), default_label: str = "pass",
                 scores: Mapping[str, float] | None = None, rationale: str = "rule engine"):
        self.rules = list(rules)
        self.default_label = default_label
        self.scores = {"coherence": 4, "groundedness": 5, "task_adherence": 1, **(scores or {})}
        self.rationale = rationale

    def label(self, call: ModelCall) -> tuple[str, str]:
        for rule in self.rules:
            label = rule(call)
            if label is not None:
                return label, f"{self.rationale}: rule {getattr(rule, '__name__', 'rule')} fired"
        return self.default_label, f"{self.rationale}: no rule fired"

    def __call__(self, call: ModelCall) -> Reply:
        label, why = self.label(call)
        evaluator = call.evaluator
        if evaluator is not None:
            score = self.scores[evaluator]
            if label != self.default_label:
                score = {"task_adherence": 0, "groundedness": 1}.get(evaluator, score)
            return {"reason": f"Let's think step by step: {why}", "score": score,
                    "status": "completed"}
        return {"label": label, "rationale": why}
