"""What verdicts and judges see of one trial: the evidence a verdict reads
(:class:`TrialEvidence`), the conversation judges see, and the redacted form of it that judges
receive (:mod:`._redaction` turns one into the other)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from pydantic import JsonValue

from ..artifacts import (
    EntityMetrics,
    MeasurementQuality,
    ProbeOutcome,
    ToolCallRecord,
    TranscriptTurn,
    TurnMetrics,
)
from ..config import EvalSpec, PersonaConfig, ScenarioConfig, ScriptConfig

#: The exit reason of a recorded real call (``voice-evaluator ingest``): it ended when its
#: recording did, and no simulation ends that way.
CALL_ENDED = "call_ended"


@dataclass(frozen=True)
class TrialEvidence:
    """Everything a deterministic verdict may read of one trial, in one typed object.

    A verdict declares which of these it reads (its ``needs``, :mod:`._verdict_registry`):
    ``transcript``, ``tool_calls``, ``ending`` (``exit_reason``), ``outcome`` (what the
    outcome probe read of the product's state), ``turn_metrics``, ``timing`` (``measurement``:
    the stated error of the clock stamps), ``probes`` (selectivity probes), ``entities``,
    ``script`` (with ``said_script_turns``), ``persona`` and ``expectations`` (the scenario).
    A recorded call (:attr:`recorded_call`) has no simulated ending, outcome probe, selectivity
    probes or script: a verdict reading one of those does not apply to it."""

    scenario: ScenarioConfig
    persona: PersonaConfig
    transcript: Sequence[TranscriptTurn]
    exit_reason: str
    tool_calls: Sequence[ToolCallRecord] = ()
    outcome_status: str = "unavailable"
    outcome: Mapping[str, JsonValue] | None = None
    outcome_error: str | None = None
    turn_metrics: Sequence[TurnMetrics] = ()
    probes: Sequence[ProbeOutcome] = ()
    #: the trial's measurement quality (``None``: not judged)
    measurement: MeasurementQuality | None = None
    entities: EntityMetrics | None = None
    #: the script a scripted persona followed (``None`` for any other persona)
    script: ScriptConfig | None = None
    #: the indices of the script turns the user said
    said_script_turns: Collection[int] = ()
    #: when the call connected (ms on the listener timeline, as ``TurnMetrics``'
    #: ``speech_start_ms``; ``None``: not recorded)
    connected_ms: float | None = None

    @property
    def spec(self) -> EvalSpec:
        """The scenario's ``eval_spec``: what most verdicts are configured by."""
        return self.scenario.eval_spec

    @property
    def assistant_turns(self) -> list[TranscriptTurn]:
        return [turn for turn in self.transcript if turn.role == "assistant"]

    @property
    def recorded_call(self) -> bool:
        """The trial is a recorded real call (ingested), not a simulation."""
        return self.exit_reason == CALL_ENDED


@dataclass(frozen=True)
class ConversationEvidence:
    """What judges see of one trial (before redaction)."""

    transcript: list[TranscriptTurn]
    tool_calls: list[ToolCallRecord]
    scenario: ScenarioConfig
    persona: PersonaConfig
    data: Mapping[str, Any] = field(default_factory=dict)


class RedactedScenario(TypedDict):
    id: str
    description: str


class RedactedPersona(TypedDict):
    name: str
    description: str
    goals: list[str]


class RedactedTurn(TypedDict):
    """One transcript turn as a judge reads it (``interrupted`` and ``turn_id`` only when set)."""

    index: int
    role: str
    text: str
    interrupted: NotRequired[bool]
    turn_id: NotRequired[str]


@dataclass(frozen=True)
class RedactedEvidence:
    """The judge-facing, redacted form of one conversation."""

    scenario: RedactedScenario
    persona: RedactedPersona
    transcript: list[RedactedTurn]
    tool_calls: list[dict[str, JsonValue]]
    data: dict[str, JsonValue] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"scenario": self.scenario, "persona": self.persona,
                "transcript": self.transcript, "tool_calls": self.tool_calls, "data": self.data}
