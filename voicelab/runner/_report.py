"""A trial's report, built in one place: who the trial is, how its call ended, what scoring
decided.

How the call ended (exit reason, execution failures, the outcome probe's answer, the turns
taken) is recorded once, as the recording's ``trial.ended`` and ``outcome.probed`` events;
:meth:`CallEnding.of_recording` reads it back, from a live recording and from a bundle alike
(a bundle written before those events held it takes it from its trial report). Every trial
report, of a scored trial, of a trial that crashed or whose worker was lost, and of a re-scored
one, comes from :func:`trial_report`, which also decides the trial's status.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from ..artifacts import (
    ExecutionFailure,
    JudgeResult,
    TrialAttempt,
    TrialReport,
    Verdict,
    trial_folder,
)
from ..audio import CANONICAL_FORMAT
from ..config import LoadedRun
from ..recording import EventType, OutcomeProbed, Recording, TrialEnded
from ..scoring import trial_status

_OUTCOME = TypeAdapter(dict[str, Any])


def utc_iso(moment: float) -> str:
    """A wall-clock time (``time.time()``) as the reports write it: ISO 8601, ms, ``Z``."""
    return datetime.fromtimestamp(moment, tz=UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def recorded_outcome(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """An outcome probe's answer as it is recorded and reported: JSON values, a value JSON has
    no type for written as the trial report writes it (a time as ISO 8601, else its text)."""
    recorded: dict[str, Any] = json.loads(_OUTCOME.dump_json(dict(outcome), fallback=str))
    return recorded


def configured_session_id(loaded: LoadedRun) -> str | None:
    """The run data's ``session_id`` (trials derive their own session ids from it)."""
    base = loaded.data.get("session_id")
    return str(base) if isinstance(base, str | int) and str(base) else None


@dataclass(frozen=True)
class TrialIdentity:
    """Which trial of which run: the fields of its report that name it."""

    trial: int
    seed: int
    session_id: str
    configured_session_id: str | None
    scenario_id: str
    persona: str
    environment: str
    adapter: str

    @property
    def trial_id(self) -> str:
        return trial_folder(self.trial)

    @classmethod
    def of_run(cls, loaded: LoadedRun, *, index: int, seed: int,
               session_id: str) -> TrialIdentity:
        return cls(trial=index, seed=seed, session_id=session_id,
                   configured_session_id=configured_session_id(loaded),
                   scenario_id=loaded.scenario.id, persona=loaded.persona.name,
                   environment=loaded.environment.name or "quiet",
                   adapter=loaded.run.endpoint.adapter)

    @classmethod
    def of_report(cls, report: TrialReport) -> TrialIdentity:
        return cls(trial=report.trial, seed=report.seed, session_id=report.session_id,
                   configured_session_id=report.configured_session_id,
                   scenario_id=report.scenario_id, persona=report.persona,
                   environment=report.environment, adapter=report.adapter)


@dataclass(frozen=True)
class CallEnding:
    """How a trial's call ended."""

    exit_reason: str
    failures: list[ExecutionFailure] = field(default_factory=list)
    outcome_status: str = "unavailable"
    outcome: dict[str, Any] | None = None
    outcome_error: str | None = None
    user_turns: int = 0
    product_responses: int = 0

    @property
    def executed(self) -> bool:
        return not self.failures

    @classmethod
    def failed(cls, failure: ExecutionFailure) -> CallEnding:
        """A trial whose call never ended as calls do (a crash, a lost worker)."""
        return cls("error", [failure])

    @classmethod
    def of_recording(cls, recording: Recording, *,
                     report: TrialReport | None = None) -> CallEnding:
        """The call's end as ``recording`` holds it (its last ``trial.ended`` and
        ``outcome.probed``); what a bundle written before they held it comes from ``report``
        (its trial report)."""
        ended = next((TrialEnded.of(e) for e in reversed(recording.events)
                      if e.type is EventType.TRIAL_ENDED), TrialEnded())
        probed = next((OutcomeProbed.of(e) for e in reversed(recording.events)
                       if e.type is EventType.OUTCOME_PROBED), OutcomeProbed())
        failures = ended.failures
        user_turns, responses = ended.user_turns, ended.product_responses
        outcome_kept = "outcome" in probed.model_fields_set
        if report is not None:
            failures = failures if failures is not None else [
                f for f in report.failures if f.kind != "artifacts"]
            user_turns = user_turns if user_turns is not None else report.user_turns
            responses = responses if responses is not None else report.product_responses
        return cls(
            exit_reason=ended.exit_reason or (report.exit_reason if report else "error"),
            failures=list(failures or []),
            outcome_status=probed.status or (report.outcome_status if report else "unavailable"),
            outcome=probed.outcome if outcome_kept or report is None else report.outcome,
            outcome_error=probed.error if outcome_kept or report is None
            else report.outcome_error,
            user_turns=user_turns or 0, product_responses=responses or 0)


@dataclass(frozen=True)
class TrialScore:
    """What scoring decided from the recording."""

    verdicts: list[Verdict]
    judges: list[JudgeResult]
    metrics_summary: dict[str, Any]
    measurement_degraded: bool


@dataclass(frozen=True)
class CallTiming:
    """When the trial ran, as its report says it."""

    started_at: str
    ended_at: str
    duration_seconds: float

    @classmethod
    def between(cls, started_wall: float, ended_wall: float) -> CallTiming:
        return cls(utc_iso(started_wall), utc_iso(ended_wall),
                   round(ended_wall - started_wall, 4))

    @classmethod
    def of_report(cls, report: TrialReport) -> CallTiming:
        return cls(report.started_at, report.ended_at, report.duration_seconds)


def trial_report(identity: TrialIdentity, ending: CallEnding, timing: CallTiming, *,
                 score: TrialScore | None = None, trace_id: str = "",
                 bundle_failures: Sequence[ExecutionFailure] = (),
                 files: Sequence[str] = (), attempt: int = 1,
                 attempts: Sequence[TrialAttempt] = (),
                 extra: Mapping[str, Any] | None = None) -> TrialReport:
    """A trial's report; ``score`` None: nothing was scored (the trial failed). Its status:
    :func:`voicelab.scoring.trial_status` of the execution (the call's failures and
    ``bundle_failures``, files that could not be written), the verdicts and the judges.
    ``extra``: fields of a report this voicelab does not know, kept (a re-scored bundle)."""
    failures = [*ending.failures, *bundle_failures]
    executed = not failures
    verdicts = score.verdicts if score is not None else []
    judges = score.judges if score is not None else []
    status = trial_status(executed=executed, verdicts=verdicts, judges=judges) \
        if score is not None else "failed"
    return TrialReport(
        trial=identity.trial, trial_id=identity.trial_id, seed=identity.seed,
        session_id=identity.session_id, configured_session_id=identity.configured_session_id,
        scenario_id=identity.scenario_id, persona=identity.persona,
        environment=identity.environment, adapter=identity.adapter, trace_id=trace_id,
        execution_status="succeeded" if executed else "failed",
        exit_reason=ending.exit_reason, passed=status == "passed", status=status,
        started_at=timing.started_at, ended_at=timing.ended_at,
        duration_seconds=timing.duration_seconds, user_turns=ending.user_turns,
        product_responses=ending.product_responses, failures=failures, verdicts=verdicts,
        judges=judges, outcome_status=ending.outcome_status, outcome=ending.outcome,
        outcome_error=ending.outcome_error,
        metrics_summary=score.metrics_summary if score is not None else {},
        audio_format=CANONICAL_FORMAT.to_dict(), files=list(files),
        measurement_degraded=score.measurement_degraded if score is not None else False,
        attempt=attempt, attempts=list(attempts), **dict(extra or {}))
