"""Scoring a finished call: from what the call left (:class:`Call`) to the trial's bundle.

Everything after the call is a pure function of the recording, the call's ending (exit reason,
failures, outcome) and the run's configuration: evidence, verdicts, the trial report and every
file of the bundle. The same code scores on an event loop, in steps, with judges
(:func:`score_on_loop`: a worker process's trials, a run that asks, a run with judges), and
synchronously (:func:`score_now`: the scoring process of a run on the caller's loop, see
:mod:`voicelab.execution`). The bundle is the same, byte for byte, wherever it is scored.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._steps import Steps, arun_steps, run_steps
from ..artifacts import (
    RESOLVED_KINDS,
    SCHEMA_VERSION,
    EncodedFile,
    ExecutionFailure,
    JudgeResult,
    LoopLag,
    ProbeOutcome,
    TrialReport,
    TurnMetrics,
    write_json,
    write_trial_files,
)
from ..audio import CANONICAL_FORMAT
from ..config import LoadedRun
from ..recording import Recording
from ..scoring import trial_status
from ._evidence import Evidence, assemble, assemble_now, evidence_files, verdicts_of
from ._transcription import ProductTranscription

logger = logging.getLogger(__name__)


@dataclass
class Call:
    """What a trial's call left: the input of scoring (picklable: it may cross to the scoring
    process)."""

    recording: Recording
    index: int
    seed: int
    trial_dir: Path
    speech_metrics: bool
    session_id: str
    configured_session_id: str | None
    started_wall: float
    exit_reason: str
    failures: list[ExecutionFailure]
    outcome_status: str
    outcome: dict[str, Any] | None
    outcome_error: str | None
    user_turns: int
    product_responses: int
    #: files of the bundle the call made (``product.log``, ``persona-session.json``)
    texts: dict[str, str] = field(default_factory=dict)
    documents: dict[str, Any] = field(default_factory=dict)
    loop_lag: LoopLag | None = None
    cancelled: bool = False

    @property
    def trial_id(self) -> str:
        return f"trial-{self.index:03d}"


@dataclass
class Scored:
    """A scored trial: its final report (after the bundle write) and what the run report
    aggregates."""

    report: TrialReport
    turn_metrics: list[TurnMetrics]
    probes: list[ProbeOutcome]


def utc_iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


# --- the scoring itself (the same code on the loop and in the scoring process) -----------------

def _assemble_options(loaded: LoadedRun, call: Call) -> dict[str, Any]:
    return {"adapter": loaded.run.endpoint.adapter, "speech_metrics": call.speech_metrics,
            "measurement": loaded.run.measurement,
            "transcription": ProductTranscription.of_run(loaded)}


def _report_steps(loaded: LoadedRun, call: Call, evidence: Evidence,
                  judges: list[JudgeResult]) -> Steps[tuple[TrialReport, list[EncodedFile]]]:
    """The trial report and every other file of the bundle, serialized, in steps."""
    verdicts = verdicts_of(evidence, scenario=loaded.scenario, persona=loaded.persona,
                           exit_reason=call.exit_reason, outcome_status=call.outcome_status,
                           outcome=call.outcome, outcome_error=call.outcome_error)
    executed = not call.failures
    status = trial_status(executed=executed, verdicts=verdicts, judges=judges)
    ended_wall = time.time()
    report = TrialReport(
        trial=call.index, trial_id=call.trial_id, seed=call.seed, session_id=call.session_id,
        configured_session_id=call.configured_session_id, scenario_id=loaded.scenario.id,
        persona=loaded.persona.name,
        environment=loaded.environment.name or "quiet", adapter=loaded.run.endpoint.adapter,
        trace_id=call.recording.trace_id, execution_status="succeeded" if executed else "failed",
        exit_reason=call.exit_reason, passed=status == "passed", status=status,  # type: ignore[arg-type]
        started_at=utc_iso(call.started_wall), ended_at=utc_iso(ended_wall),
        duration_seconds=round(ended_wall - call.started_wall, 4),
        user_turns=call.user_turns, product_responses=call.product_responses,
        failures=call.failures, verdicts=verdicts, judges=judges,
        outcome_status=call.outcome_status,  # type: ignore[arg-type]
        outcome=call.outcome, outcome_error=call.outcome_error,
        metrics_summary=evidence.metrics.model_dump(mode="json")["summary"],
        audio_format=CANONICAL_FORMAT.to_dict(), measurement_degraded=evidence.degraded)
    yield
    resolved = loaded.resolved_documents()
    documents: dict[str, Any] = {}
    for kind in RESOLVED_KINDS:
        source = loaded.sources.get("run" if kind == "settings" else kind)
        documents[f"resolved-{kind}.json"] = {"schema_version": SCHEMA_VERSION, "kind": kind,
                                              "source": str(source) if source else None,
                                              "resolved": resolved[kind]}
    documents.update(call.documents)
    title = f"{loaded.scenario.id} — {report.trial_id} (seed {report.seed})"
    files = yield from evidence_files(call.recording, evidence, report, title=title,
                                      keep_clean_speech=call.speech_metrics,
                                      extra_documents=documents, extra_texts=call.texts)
    return report, files


def write_bundle(trial_dir: Path, files: list[EncodedFile], report: TrialReport, *,
                 side_by_side: bool = True) -> TrialReport:
    """Write the trial's files, its report last; the report the trial ends with (the same, or
    one saying which files could not be written). I/O only."""
    try:
        write_trial_files(trial_dir, files, report, side_by_side=side_by_side)
        return report
    except OSError as error:
        return write_unfinished_bundle(trial_dir, report, error)


def write_unfinished_bundle(trial_dir: Path, report: TrialReport, error: OSError) -> TrialReport:
    """The bundle could not be written (disk full, permissions): the trial failed to execute.

    Keeps whatever files made it to disk and tries to write the (small) trial report saying
    what is missing; returns that report (also when even it could not be written)."""
    reason = error.strerror or type(error).__name__
    where = f" ({Path(error.filename).name})" if error.filename else ""
    failures = [*report.failures, ExecutionFailure(
        kind="artifacts", code="bundle_write_failed",
        message=f"could not write the trial's bundle{where}: {reason}")]
    logger.error("%s: %s", report.trial_id, failures[-1].message)
    # Without its report the trial is unknown to every reader: on a full disk the trial's own
    # files make room for it (audio first, then the rest, largest first), and the report says
    # what was removed.
    removable = _removable_by_size(trial_dir)
    while True:
        try:
            present = sorted(p.name for p in trial_dir.iterdir() if not p.name.startswith("."))
        except OSError:
            present = []
        failed = report.model_copy(update={
            "execution_status": "failed", "passed": False, "failures": failures,
            "files": [*present, "trial-report.json"]})
        try:
            write_json(trial_dir / "trial-report.json", failed)
            return failed
        except OSError as second:
            if second.errno != errno.ENOSPC or not removable:
                logger.error("%s: the trial report could not be written either: %s",
                             report.trial_id, second.strerror or type(second).__name__)
                return failed
        victim, size = removable.pop(0)
        try:
            victim.unlink()
        except OSError:
            continue
        failures = [*failures, ExecutionFailure(
            kind="artifacts", code="bundle_file_removed",
            message=f"{victim.name} ({size} bytes) was removed to make room for the trial "
                    f"report on a full disk")]
        logger.error("%s: %s", report.trial_id, failures[-1].message)


def _removable_by_size(trial_dir: Path) -> list[tuple[Path, int]]:
    """The trial's files but its report: audio first (the bulk), then the others; largest
    first within each."""
    try:
        sizes = [(path, path.stat().st_size) for path in trial_dir.iterdir()
                 if path.is_file() and path.name != "trial-report.json"]
    except OSError:
        return []
    return sorted(sizes, key=lambda item: (item[0].suffix != ".wav", -item[1]))


async def score_on_loop(loaded: LoadedRun, call: Call, *,
                        write_lock: asyncio.Lock | None = None) -> Scored:
    """Score on the event loop, in steps (judges run here); the files are written from a
    thread, under ``write_lock`` when given (one bundle at a time)."""
    evidence = await assemble(call.recording, **_assemble_options(loaded, call))
    judges: list[JudgeResult] = []
    if not call.failures and loaded.run.quality_evaluation is not None:
        from ..scoring import run_judges

        judges = await run_judges(loaded, evidence.transcript.turns,
                                  evidence.tool_calls.tool_calls)
    report, files = await arun_steps(_report_steps(loaded, call, evidence, judges))
    async with write_lock or contextlib.nullcontext():
        report = await asyncio.to_thread(write_bundle, call.trial_dir, files, report)
    return Scored(report, evidence.metrics.turns, evidence.metrics.probes)


def score_now(loaded: LoadedRun, call: Call) -> Scored:
    """Score and write synchronously, the files one after another (the scoring process; no
    judges)."""
    evidence = assemble_now(call.recording, **_assemble_options(loaded, call))
    report, files = run_steps(_report_steps(loaded, call, evidence, []))
    report = write_bundle(call.trial_dir, files, report, side_by_side=False)
    return Scored(report, evidence.metrics.turns, evidence.metrics.probes)
