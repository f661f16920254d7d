"""Versioned artifact models. Every JSON file in a bundle carries ``schema_version``.

Adding an optional field keeps the version; renaming or changing a meaning bumps it. Readers
refuse a newer major version with a clear message (see ``_reader.py``).

2.0: one recording per trial. ``trial-report.session_id`` is the session id the trial presented
to the product (unique per run and trial); every voice event carries ``listener_offset_ns``; the
bundle keeps each direction's audio in arrival order (``user-sent.wav``,
``product-received.wav``) so it can be re-scored; ``voice-metrics.json`` turns have a fixed set
of fields (the speech metrics are null when not computed). 1.0 bundles are still read.

3.0: one name for the user's side. The user's channel on the listener timeline is ``user.wav``
(it was ``technician.wav``; readers look for both, see ``LEGACY_NAMES``); the end of the call is
kept once, in the events: ``trial.ended`` holds the execution ``failures``, ``user_turns`` and
``product_responses``, ``outcome.probed`` the probe's ``outcome``, and ``rescore`` reads them
there (a 2.0 bundle keeps them in its trial report only). Re-scoring a 2.0 bundle rewrites its
derived files in the 3.0 layout: ``technician.wav`` becomes ``user.wav``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ._cost_models import TrialCost, Usage

SCHEMA_VERSION = "3.0"
#: Every major version this voicelab reads (older bundles stay readable).
READABLE_MAJORS = (1, 2, 3)


class ArtifactModel(BaseModel):
    model_config = ConfigDict(extra="allow")


class Versioned(ArtifactModel):
    schema_version: str = SCHEMA_VERSION


# --- conversation evidence --------------------------------------------------------------------

class TranscriptTurn(ArtifactModel):
    turn_id: str
    index: int
    role: Literal["user", "assistant"]
    text: str = ""
    source: str | None = None
    status: str | None = None
    interrupted: bool = False
    started_offset_ms: float | None = None
    ended_offset_ms: float | None = None
    heard_as: str | None = Field(None, description="user turns: what the product recognized")
    text_source: str | None = Field(
        None, description="assistant turns: where ``text`` came from: ``wire`` (the product's "
                          "own transcript) or ``asr:<engine>`` (its received audio recognized "
                          "locally); null: no text")


class Transcript(Versioned):
    session_id: str
    turns: list[TranscriptTurn] = Field(default_factory=list)


class ToolCallRecord(ArtifactModel):
    call_id: str | None = None
    name: str
    arguments: object = None
    arguments_json: str | None = None
    result: object = None
    has_result: bool = False
    turn_id: str | None = None
    offset_ms: float | None = None
    result_offset_ms: float | None = None


class ToolCalls(Versioned):
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)


class RawEndpointEvent(ArtifactModel):
    sequence: int
    received_offset_ns: int
    type: str
    raw: object = None


class RawEndpointEvents(Versioned):
    adapter: str
    events: list[RawEndpointEvent] = Field(default_factory=list)


# --- scoring ----------------------------------------------------------------------------------

#: One deterministic verdict of a trial: its name, whether it passed, and why.
class Verdict(ArtifactModel):
    name: str
    passed: bool
    critical: bool = True
    #: ``inconclusive``: there was nothing to judge (no transcript, no barge-in, no audio);
    #: never a pass (a critical inconclusive verdict fails the trial). ``not_applicable``: the
    #: verdict needs a simulated call and this one was recorded (an ingested call's
    #: ``expected_exit`` or outcome): it neither passes nor fails the trial
    status: Literal["passed", "failed", "inconclusive", "not_applicable"] = "failed"
    why: str = ""
    expected: object = None
    observed: object = None

    @model_validator(mode="after")
    def _status_agrees(self) -> Verdict:
        if self.passed:
            self.status = "passed"
        elif self.status == "passed":
            self.status = "failed"
        return self


#: One judge's result in a trial report: its score, whether it passed, its reasons.
class JudgeResult(ArtifactModel):
    name: str
    #: ``plugin``: a judge a registered class runs (``quality_evaluation.judges``)
    kind: Literal["custom_judge", "azure_evaluator", "plugin"]
    critical: bool = False
    status: Literal["passed", "failed", "error"]
    passed: bool = False
    label: str | None = None
    score: float | None = None
    threshold: float | None = None
    rationale: str | None = None
    model: str | None = None
    model_version: str | None = None
    error: str | None = None
    sent: object = Field(None, description="the redacted payload the judge received")
    #: what the judge's calls used (docs/cost.md); empty: it made none (or a bundle written
    #: before usage was kept)
    usage: list[Usage] = Field(default_factory=list)


class ExecutionFailure(ArtifactModel):
    kind: Literal["endpoint", "persona", "speech", "probe", "judge", "cleanup", "runner",
                  "timeout", "cancelled", "artifacts"]
    message: str
    code: str | None = None


# --- reports ----------------------------------------------------------------------------------

class TrialAttempt(ArtifactModel):
    """An earlier attempt of a trial that ended inconclusive and was run again."""

    attempt: int
    status: Literal["passed", "failed", "inconclusive"]
    #: the undecided verdicts and why
    inconclusive: list[str] = Field(default_factory=list)
    #: trials in flight when it ran
    concurrency: int | None = None
    #: its evidence, relative to the run folder (``attempts/trial-001.1``)
    path: str


class TrialRetention(ArtifactModel):
    """What the run's ``retention:`` setting kept of a trial (absent: everything, as said)."""

    #: the run's settings the trial was written with
    audio_policy: Literal["all", "failed", "none"] = "all"
    transcripts: Literal["full", "redacted"] = "full"
    #: ``dropped``: the trial's WAV files were not written (``dropped_files``)
    audio: Literal["kept", "dropped"] = "kept"
    dropped_files: list[str] = Field(default_factory=list)


#: A trial's report (trial-report.json): how it ran, its verdicts, judges and cost.
class TrialReport(Versioned):
    trial: int
    trial_id: str
    seed: int
    #: the session id this trial presented to the product (unique per run and trial)
    session_id: str
    #: the ``session_id`` of the run data, from which ``session_id`` is derived
    configured_session_id: str | None = None
    scenario_id: str
    persona: str
    environment: str
    adapter: str
    trace_id: str
    execution_status: Literal["succeeded", "failed"]
    exit_reason: str
    passed: bool
    started_at: str
    ended_at: str
    duration_seconds: float
    user_turns: int = 0
    product_responses: int = 0
    failures: list[ExecutionFailure] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    judges: list[JudgeResult] = Field(default_factory=list)
    outcome_status: Literal["available", "unavailable", "error"] = "unavailable"
    outcome: dict[str, object] | None = None
    outcome_error: str | None = None
    metrics_summary: dict[str, Any] = Field(default_factory=dict)
    voice_event_schema_versions: list[str] = Field(default_factory=lambda: [SCHEMA_VERSION])
    interoperability_schema_version: str = SCHEMA_VERSION
    audio_format: dict[str, object] = Field(default_factory=dict)
    files: list[str] = Field(default_factory=list)
    #: the evaluator's loop lagged beyond its tolerances during the call (voice-metrics.json
    #: ``measurement_quality``): timing verdicts the error could change are inconclusive
    measurement_degraded: bool = False
    #: ``passed`` / ``failed``; ``inconclusive``: nothing failed but a critical verdict could
    #: not be decided (never a pass); ``unjudged``: it executed and nothing judged it (no
    #: critical verdict applied, no critical judge: an ingested call without a run file; not a
    #: pass, not a failure). Absent in bundles written before it was kept.
    status: Literal["passed", "failed", "inconclusive", "unjudged"] | None = None
    #: which attempt of this trial this report is (an inconclusive trial is run again, same
    #: seed); the earlier attempts are listed in ``attempts``, their evidence kept
    attempt: int = 1
    attempts: list[TrialAttempt] = Field(default_factory=list)
    #: what the run's ``retention:`` kept of this trial; absent: all its audio and its full
    #: transcripts
    retention: TrialRetention | None = None
    #: the trial's usage priced (docs/cost.md); absent in bundles written before it was kept
    cost: TrialCost | None = None

    @model_validator(mode="after")
    def _status_of_older_bundles(self) -> TrialReport:
        if self.status is None:
            self.status = "passed" if self.passed else "failed"
        return self

    @model_serializer(mode="wrap")
    def _retention_only_when_limited(self, handler: SerializerFunctionWrapHandler
                                     ) -> dict[str, object]:
        # a trial that kept everything is written as before the field existed
        data: dict[str, object] = handler(self)
        for name in ("retention", "cost"):
            if data.get(name, False) is None:
                del data[name]
        return data


#: One trial as its run report lists it.
class TrialSummary(ArtifactModel):
    trial: int
    trial_id: str
    seed: int
    passed: bool
    execution_status: str
    exit_reason: str
    failed_verdicts: list[str] = Field(default_factory=list)
    first_audio_latency_ms_p50: float | None = None
    first_audio_latency_ms_p95: float | None = None
    path: str
    #: the trial's timings were degraded by the evaluator's own loop lag
    measurement_degraded: bool = False
    status: Literal["passed", "failed", "inconclusive", "unjudged"] | None = None
    inconclusive_verdicts: list[str] = Field(default_factory=list)
    attempts: int = 1

    @model_validator(mode="after")
    def _status_of_older_bundles(self) -> TrialSummary:
        if self.status is None:
            self.status = "passed" if self.passed else "failed"
        return self


class Interoperability(Versioned):
    session_id: str
    scenario_id: str
    trial: dict[str, object]
    trace: dict[str, object]
    metrics: dict[str, object]
    transcript: list[dict[str, object]] = Field(default_factory=list)
    tool_calls: list[dict[str, object]] = Field(default_factory=list)
    verdicts: list[dict[str, object]] = Field(default_factory=list)
    judges: list[dict[str, object]] = Field(default_factory=list)
    outcome: dict[str, object] = Field(default_factory=dict)
    imported_scores: dict[str, object] = Field(default_factory=dict)


class ResolvedDocument(Versioned):
    kind: Literal["scenario", "persona", "data", "environment", "script", "settings"]
    source: str | None = None
    resolved: object = None
