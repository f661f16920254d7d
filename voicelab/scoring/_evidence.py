"""What judges see of one trial: its conversation as evidence, and the redacted form of it
that judges receive (:mod:`._redaction` turns one into the other)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..artifacts import ToolCallRecord, TranscriptTurn
from ..config import PersonaConfig, ScenarioConfig


@dataclass(frozen=True)
class ConversationEvidence:
    """What judges see of one trial (before redaction)."""

    transcript: list[TranscriptTurn]
    tool_calls: list[ToolCallRecord]
    scenario: ScenarioConfig
    persona: PersonaConfig
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RedactedEvidence:
    """The judge-facing, redacted form of one conversation."""

    scenario: dict[str, Any]
    persona: dict[str, Any]
    transcript: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "persona": self.persona,
                "transcript": self.transcript, "tool_calls": self.tool_calls, "data": self.data}
