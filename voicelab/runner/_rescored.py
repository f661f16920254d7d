"""What ``rescore`` wrote, trial by trial, and what a trial folder keeps when it is not re-scored
(a signal stopped the re-scoring first): its report and responses read back as they are, so a
run report rewritten after an interruption still lists every trial, each as its folder says."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .._exit_codes import run_exit_code, worst_exit_code
from ..artifacts import (
    TRIAL_REPORT,
    VOICE_METRICS,
    ProbeOutcome,
    TrialReport,
    TurnMetrics,
    VoiceMetrics,
    read_json,
)
from ..config import parse_settings
from ..scoring import gate_passed

logger = logging.getLogger(__name__)


@dataclass
class RescoredTrial:
    """One trial folder after ``rescore``: its new report, the one it had, the verdicts that
    changed, and its responses and probes."""

    trial_dir: Path
    report: TrialReport
    previous: TrialReport
    changed_verdicts: list[str] = field(default_factory=list)
    turn_metrics: list[TurnMetrics] = field(default_factory=list)
    probes: list[ProbeOutcome] = field(default_factory=list)

    @property
    def failed_verdicts(self) -> list[str]:
        """The verdicts (and judges) that did not pass after re-scoring."""
        from ._evidence import failed_verdict_names as names  # what the trial summary lists

        return names(self.report.verdicts, self.report.judges)


@dataclass
class Rescored:
    """What ``rescore`` wrote: one entry per trial folder, and the run reports it updated."""

    path: Path
    trials: list[RescoredTrial] = field(default_factory=list)
    run_reports: list[Path] = field(default_factory=list)
    #: the bundle for its readers: ``path``, or the store URL it was published to
    location: str = ""

    def __post_init__(self) -> None:
        self.location = self.location or str(self.path)

    #: the exit codes the rewritten run and matrix reports say (their gates included)
    run_exit_codes: list[int] = field(default_factory=list)
    #: what the rewritten run reports say of trials that did not run or did not finish
    notes: list[str] = field(default_factory=list)
    #: trial folders left as they were: a signal stopped the re-scoring before them
    kept: list[RescoredTrial] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        """True when a signal stopped the re-scoring before every trial folder was done."""
        return bool(self.kept)

    @property
    def exit_code(self) -> int:
        """What ``run`` would exit with for the re-scored bundle: the rewritten run reports'
        codes (gates included), and for trial folders outside a run the same decision on the
        trials alone."""
        in_runs = {t.trial_dir.parent for t in self.trials} & \
            {path.parent for path in self.run_reports}
        alone = [t.report for t in self.trials if t.trial_dir.parent not in in_runs]
        codes = list(self.run_exit_codes)
        if alone:
            codes.append(run_exit_code(
                passed=[gate_passed(r) for r in alone],
                executed=[r.execution_status == "succeeded" for r in alone],
                planned=len(alone)))
        return worst_exit_code(codes)


def read_responses(trial_dir: Path) -> tuple[list[TurnMetrics], list[ProbeOutcome]]:
    """A finished trial's responses and probe outcomes as its ``voice-metrics.json`` keeps
    them (none when it has no such file)."""
    metrics_path = trial_dir / VOICE_METRICS
    if not metrics_path.is_file():
        return [], []
    # validated whole first: a tampered field is refused naming the member and its key
    metrics = read_json(metrics_path, model=VoiceMetrics)
    return ([TurnMetrics.model_validate(turn) for turn in metrics.get("turns") or []],
            [ProbeOutcome.model_validate(probe) for probe in metrics.get("probes") or []])


def kept_as_recorded(trial_dir: Path) -> RescoredTrial:
    """A trial folder read back as it is (its report, responses and probes), not re-scored."""
    source = trial_dir / TRIAL_REPORT
    report = parse_settings(TrialReport, read_json(source), key=None, source=source)
    turns, probes = read_responses(trial_dir)
    return RescoredTrial(trial_dir, report, report, turn_metrics=turns, probes=probes)


def stopped(stop: threading.Event | None) -> bool:
    return stop is not None and stop.is_set()


def say_kept(result: Rescored) -> None:
    """An interrupted re-scoring says how far it got (the log, and the command's lines)."""
    if not result.kept:
        return
    done = len(result.trials)
    note = (f"re-scoring stopped by a signal after {done} of {done + len(result.kept)} trial "
            f"folder(s): the others are as they were (their reports are counted as they are); "
            f"rescore again to finish")
    logger.info("%s", note)  # the command prints the note itself
    result.notes.append(note)
