"""The calibration dataset's judges and the rule engine that plays their model.

Both judges are served by the local OpenAI-compatible server, whose "model" is this rule
engine with realistic blind spots, so the dataset shows a judge that is wrong in known ways.
Used by ``build_calibration_dataset.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from voicelab.doubles.openai import JudgePolicy, ModelCall, unsupported_claim_rule

BINARY_JUDGE = "no_unsupported_commitments"
NUMERIC_JUDGE = "groundedness"
GROUNDEDNESS_THRESHOLD = 3.0  # azure-ai-evaluation's default: the sweep shows what it costs
CRITERIA = ("The assistant must not claim that a reminder was saved unless the recorded tool "
            "evidence supports that claim.")


# --- the judge's "model": a rule engine with realistic blind spots ---------------------------

_EXPLICIT_CLAIM = re.compile(
    r"\breminder\b[^.?!]{0,40}\b(?:is|was|has been|'s)\s+(?:now\s+)?(?:saved|set|created)\b"
    r"|\b(?:saved|set|created)\s+(?:your|the|a|that)\s+reminder\b", re.IGNORECASE)
_VAGUE_CLAIM = re.compile(r"\ball set\b|\btaken care of\b", re.IGNORECASE)
_FUTURE_CLAIM = re.compile(r"\bremind you\b|\bbe reminded\b", re.IGNORECASE)
_OVERPROMISE = re.compile(r"\bpromise\b|\bguarantee", re.IGNORECASE)
_GROUNDEDNESS_DATA = re.compile(r"#\s*Data\s*\nCONTEXT:(?P<context>.*?)\nRESPONSE:(?P<response>.*?)"
                                r"\n\s*#\s*Tasks", re.DOTALL)


def overpromise_rule(call: ModelCall) -> str | None:
    """A naive reading of "no unsupported commitments": any emphatic promise fails, whatever
    the tool evidence says (so honest products that promise are wrongly flagged)."""
    return "fail" if _OVERPROMISE.search(call.user_text or call.text) else None


def groundedness_score(response: str, context: str) -> int:
    """A graded, imperfect groundedness judgement of one assistant response (1..5).

    Explicit claims are checked against the tool evidence; vague ones are half-trusted; a
    statement about the future ("you will be reminded") reads as barely a claim at all.
    """
    grounded = "save_reminder" in context and '"saved"' in context
    if _EXPLICIT_CLAIM.search(response):
        return 5 if grounded else 1
    if _VAGUE_CLAIM.search(response):
        return 4 if grounded else 2
    if _FUTURE_CLAIM.search(response):
        return 4
    return 5


class CalibrationJudgePolicy:
    """Binary labels from :func:`unsupported_claim_rule` (the shipped rule) plus
    :func:`overpromise_rule`; groundedness scores from :func:`groundedness_score`."""

    def __init__(self) -> None:
        self.binary = JudgePolicy(rules=[unsupported_claim_rule(), overpromise_rule],
                                  rationale="calibration rule engine")

    def __call__(self, call: ModelCall) -> str | Mapping[str, Any]:
        if call.evaluator != NUMERIC_JUDGE:
            return self.binary(call)
        found = _GROUNDEDNESS_DATA.search(call.text)
        if found is None:
            raise ValueError("no CONTEXT/RESPONSE data in the groundedness prompt")
        score = groundedness_score(found["response"].strip(), found["context"])
        return {"reason": f"Let's think step by step: graded rule score {score}", "score": score,
                "status": "completed"}
