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
from pathlib import Path
from typing import Any

from .._steps import Steps, arun_steps, run_steps
from ..artifacts import (
    RESOLVED_KINDS,
    SCHEMA_VERSION,
    TRIAL_REPORT,
    EncodedFile,
    ExecutionFailure,
    JudgeResult,
    LoopLag,
    ProbeOutcome,
    TrialReport,
    TurnMetrics,
    encoded_bytes,
    resolved_document,
    trial_folder,
    write_json,
    write_trial_files,
)
from ..config import LoadedRun
from ..cost import trial_cost
from ..metrics import EntityPlan, loop_lag_of, run_turn_metrics
from ..recording import Recording
from ..scoring import verdict_checks
from ._evidence import (
    Evidence,
    assemble,
    assemble_now,
    evidence_files,
    followed_script,
    score_of,
)
from ._report import CallEnding, CallTiming, TrialIdentity, trial_report
from ._retention import retention_steps, run_redactor
from ._transcription import ProductTranscription

logger = logging.getLogger(__name__)


@dataclass
class Call:
    """What a trial's call left: the input of scoring (picklable: it crosses to the scoring
    process). How the call ended is in its recording (:attr:`ending`)."""

    recording: Recording
    index: int
    seed: int
    trial_dir: Path
    speech_metrics: bool
    #: files of the bundle the call made (``product.log``, ``persona-session.json``)
    texts: dict[str, str] = field(default_factory=dict)
    documents: dict[str, Any] = field(default_factory=dict)
    #: the run was interrupted during the call
    cancelled: bool = False

    @property
    def trial_id(self) -> str:
        return trial_folder(self.index)

    @property
    def started_wall(self) -> float:
        """When the call started (``time.time()``): its recording's start."""
        return self.recording.start_utc_ns / 1e9

    @property
    def ending(self) -> CallEnding:
        return CallEnding.of_recording(self.recording)

    @property
    def loop_lag(self) -> LoopLag | None:
        """The event loop's lag while the conversation ran (recorded with its end)."""
        return loop_lag_of(self.recording)


@dataclass
class Scored:
    """A scored trial: its final report (after the bundle write) and what the run report
    aggregates."""

    report: TrialReport
    turn_metrics: list[TurnMetrics]
    probes: list[ProbeOutcome]


# --- the scoring itself (the same code on the loop and in the scoring process) -----------------

def _assemble_options(loaded: LoadedRun, call: Call) -> dict[str, Any]:
    return {"adapter": loaded.run.endpoint.adapter, "speech_metrics": call.speech_metrics,
            "measurement": loaded.run.measurement,
            "transcription": ProductTranscription.of_run(loaded),
            "entities": EntityPlan.of(loaded.scenario, loaded.run.transcription),
            "turn_metrics": run_turn_metrics(loaded)}


def _report_steps(loaded: LoadedRun, call: Call, evidence: Evidence,
                  judges: list[JudgeResult]) -> Steps[tuple[TrialReport, list[EncodedFile]]]:
    """The trial report and every other file of the bundle, serialized, in steps; what the
    run's ``retention:`` keeps of them (decided on the scored report, before any is written)."""
    recording = call.recording
    ending = call.ending
    identity = TrialIdentity.of_run(loaded, index=call.index, seed=call.seed,
                                    session_id=recording.session_id)
    report = trial_report(
        identity, ending, CallTiming.between(call.started_wall, time.time()),
        score=score_of(evidence, ending, judges, scenario=loaded.scenario,
                       persona=loaded.persona,
                       script=followed_script(loaded.run.persona_mode, loaded.script),
                       checks=verdict_checks(loaded)),
        trace_id=recording.trace_id)
    yield
    resolved = loaded.resolved_documents()
    documents: dict[str, Any] = {}
    for kind in RESOLVED_KINDS:
        source = loaded.sources.get("run" if kind == "settings" else kind)
        documents[resolved_document(kind)] = {"schema_version": SCHEMA_VERSION, "kind": kind,
                                              "source": str(source) if source else None,
                                              "resolved": resolved[kind]}
    documents.update(call.documents)
    title = f"{loaded.scenario.id} — {report.trial_id} (seed {report.seed})"
    files = yield from evidence_files(call.recording, evidence, report, title=title,
                                      keep_clean_speech=call.speech_metrics,
                                      extra_documents=documents, extra_texts=call.texts)
    files, report = yield from retention_steps(files, report, loaded.run.retention,
                                               redactor=run_redactor(loaded))
    # priced last: what the trial keeps in the bundle is part of what it costs
    report.cost = trial_cost(recording, loaded.run.pricing, adapter=loaded.run.endpoint.adapter,
                             judges=report.judges, recognition=evidence.recognition,
                             storage_bytes=encoded_bytes(files))
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
            "files": [*present, TRIAL_REPORT]})
        try:
            write_json(trial_dir / TRIAL_REPORT, failed)
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
                 if path.is_file() and path.name != TRIAL_REPORT]
    except OSError:
        return []
    return sorted(sizes, key=lambda item: (item[0].suffix != ".wav", -item[1]))


async def score_on_loop(loaded: LoadedRun, call: Call, *,
                        write_lock: asyncio.Lock | None = None) -> Scored:
    """Score on the event loop, in steps (judges run here); the files are written from a
    thread, under ``write_lock`` when given (one bundle at a time)."""
    evidence = await assemble(call.recording, **_assemble_options(loaded, call))
    judges: list[JudgeResult] = []
    if call.ending.executed and loaded.run.quality_evaluation is not None:
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
