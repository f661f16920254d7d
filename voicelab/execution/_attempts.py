"""Attempts of a trial: an inconclusive trial is run again, and its earlier attempt is kept.

A trial is *inconclusive* when nothing failed but a critical verdict could not be decided (no
transcript to judge, a timing whose stated error straddles its limit). That is a fact about the
measurement, not the product, so the run retries it (same seed, fewer trials in flight) before
it counts: ``RunOptions(retry_inconclusive=N)``. The earlier attempt's folder moves to
``attempts/trial-NNN.K`` (its report renamed ``attempt-report.json``, so no reader takes it
for a trial of the run), and the new attempt's ``trial-report.json`` lists it in ``attempts``.
A trial still inconclusive after its retries counts as not passed (fail closed).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from .._atomic import make_folder
from ..artifacts import (
    ATTEMPT_REPORT,
    ATTEMPTS_FOLDER,
    TRIAL_REPORT,
    RemoteLocation,
    TrialAttempt,
    TrialReport,
    write_json,
)
from ..runner import TrialResult, inconclusive_verdict_names, trial_summary

logger = logging.getLogger(__name__)

#: Retries run at this fraction of the run's concurrency (at least one trial at a time): an
#: inconclusive timing usually means the evaluator's loop was too busy.
RETRY_CONCURRENCY_DIVISOR = 2


def retry_concurrency(concurrency: int) -> int:
    return max(1, concurrency // RETRY_CONCURRENCY_DIVISOR)


def inconclusive_reasons(report: TrialReport) -> list[str]:
    return [f"{v.name}: {v.why}" for v in report.verdicts
            if v.status == "inconclusive" and v.critical]


def keep_earlier_attempt(bundle: Path, result: TrialResult, *, concurrency: int) -> TrialAttempt:
    """Move the trial's folder aside as an earlier attempt; what the new attempt will list."""
    report = result.report
    name = _attempt_name(report)
    target = bundle / ATTEMPTS_FOLDER / name
    make_folder(target.parent)
    os.rename(bundle / report.trial_id, target)  # a new name in the same folder tree
    report_path = target / TRIAL_REPORT
    if report_path.is_file() and not report_path.is_symlink():
        os.rename(report_path, target / ATTEMPT_REPORT)
    return _kept(report, name, concurrency=concurrency)


def keep_earlier_attempt_in_store(run: RemoteLocation, result: TrialResult, *,
                                  concurrency: int) -> TrialAttempt:
    """:func:`keep_earlier_attempt` for a run whose workers publish their own trials to a
    store (blocking I/O). A store has no rename: the trial's objects are copied under
    ``attempts/`` (its report last, as ``attempt-report.json``), then the trial's report is
    removed first, so no reader takes what is left of the folder for a trial."""
    report = result.report
    name = _attempt_name(report)
    source, target = run.child(report.trial_id), run.child(ATTEMPTS_FOLDER, name)
    fs = run.fs
    members = sorted(str(PurePosixPath(found).relative_to(PurePosixPath(source.path)))
                     for found in fs.find(source.path))
    for member in sorted(members, key=lambda m: m == TRIAL_REPORT):
        kept = ATTEMPT_REPORT if member == TRIAL_REPORT else member
        fs.copy(source.child(member).path, target.child(kept).path)
    if TRIAL_REPORT in members:
        fs.rm(source.child(TRIAL_REPORT).path)
    if members:
        fs.rm(source.path, recursive=True)
    return _kept(report, name, concurrency=concurrency)


def to_retry(results: Sequence[TrialResult], pending: Collection[int], attempt: int) -> list[int]:
    """The trials of this pass (``pending``) whose ``attempt`` ended inconclusive."""
    return sorted(r.report.trial for r in results
                  if r.report.status == "inconclusive" and r.report.trial in pending
                  and r.report.attempt == attempt)


def keep_earlier_attempts(bundle: Path, results: Sequence[TrialResult], trials: Sequence[int], *,
                          concurrency: int, store: RemoteLocation | None) -> list[TrialAttempt]:
    """Each of ``trials``' latest attempt moved aside (blocking I/O), in the bundle or in the
    ``store`` its workers publish to; what each retry will list."""
    kept = []
    for index in trials:
        previous = next(r for r in results if r.report.trial == index)
        kept.append(keep_earlier_attempt(bundle, previous, concurrency=concurrency)
                    if store is None else
                    keep_earlier_attempt_in_store(store, previous, concurrency=concurrency))
    return kept


def _attempt_name(report: TrialReport) -> str:
    return f"{report.trial_id}.{report.attempt}"


def _kept(report: TrialReport, name: str, *, concurrency: int) -> TrialAttempt:
    logger.info("%s attempt %d was inconclusive (%s): run again, its evidence kept in %s",
                report.trial_id, report.attempt,
                "; ".join(inconclusive_verdict_names(report.verdicts)) or "no decision",
                f"{ATTEMPTS_FOLDER}/{name}")
    return TrialAttempt(attempt=report.attempt, status=report.status or "inconclusive",
                        inconclusive=inconclusive_reasons(report), concurrency=concurrency,
                        path=f"{ATTEMPTS_FOLDER}/{name}")


def as_later_attempt(bundle: Path, result: TrialResult, earlier: list[TrialAttempt], *,
                     store: RemoteLocation | None = None) -> TrialResult:
    """The retried trial's result with its attempt number and earlier attempts, its report
    rewritten to say so (still written last: the folder is complete): on disk, or in the
    ``store`` its worker published it to."""
    report = result.report.model_copy(update={"attempt": len(earlier) + 1,
                                              "attempts": list(earlier)})
    path = bundle / report.trial_id / TRIAL_REPORT
    if store is not None:
        published = store.child(report.trial_id, TRIAL_REPORT)
        if published.fs.exists(published.path):
            with tempfile.TemporaryDirectory(prefix="voicelab-attempt-") as scratch:
                local = write_json(Path(scratch) / TRIAL_REPORT, report)
                published.fs.put_file(str(local), published.path)
    elif path.is_file():
        write_json(path, report)
    return replace(result, report=report, summary=trial_summary(report))
