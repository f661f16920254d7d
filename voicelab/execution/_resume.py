"""Resuming a run bundle: which planned trials are done, which run again.

A trial is done when its folder holds a ``trial-report.json`` (written last: its presence means
the folder is complete) that does not say the trial was interrupted (exit reason
``cancelled``); with ``rerun_failed`` a trial that did not pass runs again too. Everything else
planned (interrupted, missing, a folder cut short) runs again into the same bundle, under the
same run id and seeds, and the run report is rebuilt from every trial on disk. A bundle whose
suite hash differs from the configuration's is refused: its trials tested something else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._location import as_local_path, is_url
from .._steps import Steps, arun_steps
from ..artifacts import (
    RUN_REPORT,
    TRIAL_REPORT,
    RunFolder,
    RunReport,
    TrialReport,
    open_location,
    read_json,
    read_remote_json,
    resolve_latest,
    resolve_local_latest,
    trial_folder,
)
from ..config import LoadedRun, parse_settings
from ..errors import ConfigError
from ..runner import MAX_TRIALS, TrialResult, read_responses, trial_summary


@dataclass
class ResumePoint:
    bundle: Path
    report: RunReport
    planned: int
    #: the trials that are done, read back from disk
    done: list[TrialResult] = field(default_factory=list)
    #: the planned trial indices to run (again)
    pending: list[int] = field(default_factory=list)


def _model(model: type[Any], path: Path) -> Any:
    return parse_settings(model, read_json(path), key=None, source=path)


def read_run_report(bundle: str | Path) -> RunReport:
    """The run report of a bundle to resume (a folder or a store URL); a folder without one is
    not a run bundle."""
    if is_url(bundle):
        folder = open_location(bundle, key="resume")
        assert not isinstance(folder, Path)
        document = read_remote_json(resolve_latest(folder).child(RUN_REPORT))
        remote: RunReport = parse_settings(RunReport, document, key=None, source=folder.url)
        return remote
    return RunFolder.read(bundle, RunReport)


def _local(bundle: str | Path) -> Path:
    return resolve_local_latest(as_local_path(bundle)).expanduser().resolve()


def recorded_config_file(recorded: str, *, bundle: str | Path) -> Path:
    """The config file a bundle names to resume with, refused when it lies inside the bundle:
    a file that came with a bundle is not the user's configuration, and a resumed run takes
    its launch command and plug-in classes from the user's configuration only."""
    path = Path(recorded)
    if is_url(bundle):
        return path
    folder = _local(bundle)
    try:
        inside = path.expanduser().resolve().is_relative_to(folder)
    except (OSError, ValueError):
        inside = False
    if inside:
        raise ConfigError(f"the bundle names a config file inside itself ({path.name}): a "
                          "resumed run never takes its configuration from a bundle; give the "
                          "config file", source="CLI", key="--resume")
    return path


def check_planned(report: RunReport, bundle: Path) -> None:
    """A bundle's plan within what a run may plan, checked before any trial is counted (a
    hostile ``planned_trials: 10**15`` would loop for ever)."""
    if not 1 <= report.planned_trials <= MAX_TRIALS:
        raise ConfigError(f"must be a whole number from 1 to {MAX_TRIALS:,}, got "
                          f"{report.planned_trials:.3g}", source=bundle / RUN_REPORT,
                          key="planned_trials")


def check_suite_hash(report: RunReport, loaded: LoadedRun, *, bundle: Path) -> None:
    expected = loaded.suite_hash()
    if report.suite_hash != expected:
        raise ConfigError(
            f"the suite hash differs ({report.suite_hash[:19]}... in the bundle, "
            f"{expected[:19]}... now): the run file, a file it names, an asset or a --set "
            "override changed; resume with the configuration the run started with",
            source=bundle)


def read_trial_result(trial_dir: Path, report: TrialReport) -> TrialResult:
    """A finished trial read back from its folder (its responses from voice-metrics.json)."""
    turns, probes = read_responses(trial_dir)
    return TrialResult(report, trial_summary(report), turn_metrics=turns, probes=probes)


#: trial folders read between two turns of the event loop: a signal stops a long count
COUNT_STEP = 256


async def aresume_point(bundle: str | Path | RunFolder[RunReport], loaded: LoadedRun, *,
                        trials: int | None = None, rerun_failed: bool = False) -> ResumePoint:
    """What a resumed run keeps and runs (``trials`` may extend the plan, never shrink it),
    letting the event loop run every :data:`COUNT_STEP` trials, so SIGINT and SIGTERM stop a
    long count (``arun``'s signal handlers are the loop's). ``bundle`` is best the reopened
    folder (:meth:`RunFolder.reopen`: locked, its report read once); a path is read here."""
    return await arun_steps(resume_steps(bundle, loaded, trials=trials,
                                         rerun_failed=rerun_failed))


def resume_steps(bundle: str | Path | RunFolder[RunReport], loaded: LoadedRun, *,
                 trials: int | None, rerun_failed: bool) -> Steps[ResumePoint]:
    if isinstance(bundle, RunFolder):
        directory, report = bundle.path, bundle.previous
        assert report is not None  # a reopened folder's report
    else:  # the tree checked and the report read (bounded) as reopening does
        directory = _local(bundle)
        report = RunFolder.read(directory, RunReport)
    check_planned(report, directory)
    check_suite_hash(report, loaded, bundle=directory)
    planned = report.planned_trials if trials is None else trials
    if planned < report.planned_trials:
        raise ConfigError(f"must be at least the {report.planned_trials} trials the bundle "
                          f"planned, got {planned}", key="trials")
    point = ResumePoint(directory, report, planned)
    present = {entry.name for entry in os.scandir(directory) if entry.is_dir(follow_symlinks=False)}
    for index in range(1, planned + 1):
        if index % COUNT_STEP == 0:
            yield
        trial_dir = directory / trial_folder(index)
        path = trial_dir / TRIAL_REPORT
        done: TrialReport | None = _model(TrialReport, path) \
            if trial_dir.name in present and path.is_file() else None
        if done is None or done.exit_reason == "cancelled" or (rerun_failed and not done.passed):
            point.pending.append(index)
        else:
            point.done.append(read_trial_result(trial_dir, done))
    return point
