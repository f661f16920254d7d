"""Redaction of conversation evidence before any external judge call.

Three layers, in order:

1. Sensitive fields: values under keys named in ``sensitive_fields`` (case-insensitive, at any
   depth of tool arguments, tool results and the opaque run data; JSON strings are parsed and
   searched too) become ``replacement``, and those values (strings and numbers of at least
   :data:`MIN_SENSITIVE_LENGTH` characters) are also replaced wherever they appear in text, such
   as a transcript in which the assistant reads an account number back.
2. Secrets: every configured secret value becomes ``***`` and secret-named fields are masked,
   with the run's :class:`SecretScrubber`.
3. Patterns: every match of each regular expression in ``patterns`` becomes ``replacement``.

What this module returns is what judges receive and what ``JudgeResult.sent`` records. The same
rules, with :data:`PII_PATTERNS` in front of the configured patterns, redact the conversation's
words a bundle keeps when the run says ``retention: {transcripts: redacted}``
(:func:`transcript_redactor`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..artifacts import TranscriptTurn
from ..config import Redaction, SecretScrubber
from ._evidence import ConversationEvidence, RedactedEvidence, RedactedTurn

#: Shorter sensitive values are replaced only as field values, not as substrings of text.
MIN_SENSITIVE_LENGTH = 3

#: What a redacted transcript never keeps, whatever the run configures (docs/artifacts.md,
#: "Retention"): an e-mail address; a run of 7 to 19 digits (phone, card, account and social
#: security numbers), optionally after ``+`` or ``(``, its digits separated by at most two of
#: space, dot, dash and parentheses, and not part of a longer word or identifier (an ISO date
#: ``2026-12-02``, a clock time, ``turn-001`` or a session id's stamp stays).
PII_PATTERNS: tuple[str, ...] = (
    r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
    r"(?<![\w-])(?!\d{4}-\d\d-\d\d(?![\w-]))\+?\(?\d(?:[ ().-]{0,2}\d){6,18}(?![\w-])",
)


class Redactor:
    def __init__(self, redaction: Redaction, *, scrubber: SecretScrubber,
                 sensitive_values: Iterable[str] = ()):
        self.redaction = redaction
        self.scrubber = scrubber
        self._fields = {name.casefold() for name in redaction.sensitive_fields}
        self._patterns = [re.compile(p) for p in redaction.patterns]
        self._sensitive = frozenset(v for v in sensitive_values
                                    if len(v) >= MIN_SENSITIVE_LENGTH)
        values = sorted(self._sensitive, key=len, reverse=True)
        self._values = re.compile("|".join(re.escape(v) for v in values)) if values else None

    @property
    def replacement(self) -> str:
        return self.redaction.replacement

    @property
    def sensitive_fields(self) -> frozenset[str]:
        """The casefolded names of the fields whose values are replaced whole."""
        return frozenset(self._fields)

    @property
    def changes_nothing(self) -> bool:
        """True when nothing would be replaced: no secrets, fields, values or patterns."""
        return not (self._fields or self._patterns or self._values is not None
                    or self.scrubber.secret_values)

    @property
    def replaces_literals_only(self) -> bool:
        """True when only known values are replaced (secrets, sensitive values): no pattern."""
        return not self._patterns

    def with_secrets(self, values: Iterable[str]) -> Redactor:
        """A redactor that also masks ``values`` as secrets (met outside the configuration: a
        store URL's credentials)."""
        return Redactor(self.redaction, scrubber=self.scrubber.with_values(values),
                        sensitive_values=self._sensitive)

    def with_sensitive_values_from(self, *payloads: object) -> Redactor:
        """A redactor that also replaces, as substrings, the sensitive values ``payloads`` hold."""
        found: set[str] = set()
        for payload in payloads:
            found |= sensitive_values(payload, self._fields)
        return Redactor(self.redaction, scrubber=self.scrubber,
                        sensitive_values=self._sensitive | found)

    def text(self, text: str) -> str:
        if not text:
            return text
        if self._values is not None:
            text = self._values.sub(self.redaction.replacement, text)
        text = self.scrubber.scrub_text(text)
        for pattern in self._patterns:
            text = pattern.sub(self.redaction.replacement, text)
        return text

    def value(self, value: object) -> Any:
        """A redacted copy of any JSON-like value (a JSON string is redacted as JSON)."""
        if isinstance(value, str):
            parsed = _json_container(value)
            if parsed is not None:
                return json.dumps(self.value(parsed), ensure_ascii=False)
            return self.text(value)
        if isinstance(value, Mapping):
            cleaned: dict[str, Any] = {}
            for key, item in value.items():
                if str(key).casefold() in self._fields and item is not None:
                    cleaned[str(key)] = self.redaction.replacement
                else:
                    cleaned[str(key)] = self.value(item)
            return self.scrubber.scrub(cleaned)
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value

    def evidence(self, evidence: ConversationEvidence) -> RedactedEvidence:
        calls = [call.model_dump(exclude_none=True) for call in evidence.tool_calls]
        for call in calls:
            if call.get("arguments") is None and call.get("arguments_json"):
                call["arguments"] = _json_container(call["arguments_json"]) or call["arguments_json"]
            call.pop("arguments_json", None)
        redactor = self.with_sensitive_values_from(dict(evidence.data), calls)
        transcript = [_turn(turn, redactor)
                      for turn in sorted(evidence.transcript, key=lambda t: t.index)]
        scenario = evidence.scenario
        persona = evidence.persona
        return RedactedEvidence(
            scenario={"id": scenario.id, "description": redactor.text(scenario.description)},
            persona={"name": persona.name, "description": redactor.text(persona.description),
                     "goals": [redactor.text(goal) for goal in persona.goals]},
            transcript=transcript,
            tool_calls=[redactor.value(call) for call in calls],
            data=redactor.value(dict(evidence.data)),
        )


def _turn(turn: TranscriptTurn, redactor: Redactor) -> RedactedTurn:
    redacted: RedactedTurn = {"index": turn.index, "role": turn.role,
                              "text": redactor.text(turn.text)}
    if turn.interrupted:
        redacted["interrupted"] = True
    if turn.turn_id:
        redacted["turn_id"] = turn.turn_id
    return redacted


def transcript_redactor(redaction: Redaction | None = None, *,
                        scrubber: SecretScrubber | None = None) -> Redactor:
    """The redactor of the words a bundle keeps: :data:`PII_PATTERNS`, then the rules judges
    get (``redaction``: the run's ``quality_evaluation.redaction``: its sensitive fields, its
    patterns and its replacement), and ``scrubber``'s secrets."""
    rules = redaction or Redaction()
    return Redactor(rules.model_copy(update={"patterns": [*PII_PATTERNS, *rules.patterns]}),
                    scrubber=scrubber or SecretScrubber())


def sensitive_values(value: object, fields: set[str]) -> set[str]:
    """Every scalar held (at any depth) under a key whose casefolded name is in ``fields``."""
    found: set[str] = set()
    if isinstance(value, str):
        parsed = _json_container(value)
        return sensitive_values(parsed, fields) if parsed is not None else found
    if isinstance(value, Mapping):
        for key, item in value.items():
            if str(key).casefold() in fields:
                found |= _scalars(item)
            else:
                found |= sensitive_values(item, fields)
    elif isinstance(value, list | tuple):
        for item in value:
            found |= sensitive_values(item, fields)
    return found


def _scalars(value: object) -> set[str]:
    if isinstance(value, bool) or value is None:
        return set()
    if isinstance(value, str | int | float):
        return {str(value)}
    if isinstance(value, Mapping):
        return {s for item in value.values() for s in _scalars(item)}
    if isinstance(value, list | tuple):
        return {s for item in value for s in _scalars(item)}
    return set()


def _json_container(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None
