"""Re-scoring a bundle: placement, metrics, documents and verdicts recomputed from what it kept.

A trial folder holds the raw facts of its call: every event with its clock stamps
(``voice-events.jsonl``), each direction's audio in arrival order (``user-sent.wav``,
``product-received.wav``), the configuration it ran with (``resolved-*.json``); how the call
ended (exit reason, failures, the outcome probe's answer) is in its events (``trial.ended``,
``outcome.probed``; a bundle written before 3.0 keeps it in ``trial-report.json``). From
these the recording is rebuilt and everything derived from it is computed again by the same
code that ran after the call, so an unchanged voicelab reproduces the documents byte for byte
and a newer one re-scores old runs with its own definitions. Judges run again only when asked
(they need the run file's providers and credentials).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._atomic import file_kind
from .._exit_codes import run_exit_code, sweep_exit_code
from .._location import as_local_path, is_url
from ..artifacts import (
    MATRIX_REPORT,
    RUN_REPORT,
    SCHEMA_VERSION,
    TRIAL_REPORT,
    Publisher,
    RemoteLocation,
    RunFolder,
    RunReport,
    check_tree,
    check_writable,
    fetch,
    find_trial_dirs,
    is_trial_folder,
    open_location,
    read_json,
    remote_exists,
    require_retained_audio,
    resolve_latest,
    resolve_local_latest,
    write_json,
)
from ..config import PricingConfig, load_pricing
from ..cost import cost_summary
from ..errors import ConfigError, ExecutionError, os_reason
from ..scoring import (
    UNJUDGED,
    Redactor,
    gate_config_of,
    gate_passed,
    pass_at_k,
    pass_power_k,
    run_statistics,
    settings_of,
)
from ._reprice import matrix_costs, reprice_folder
from ._rescore_overrides import AS_RECORDED, RescoreOverrides
from ._rescore_trial import _model, rescore_trial
from ._rescored import Rescored, RescoredTrial, kept_as_recorded, say_kept, stopped
from ._retention import process_redactor, run_redactor
from ._run import not_run_message
from ._trial import trial_summary

logger = logging.getLogger(__name__)


def _update_run_report(run_dir: Path, trials: list[RescoredTrial],
                       overrides: RescoreOverrides = AS_RECORDED) -> RunReport | None:
    """The run report again, counted from the trials re-scored (``trials``, those of
    ``run_dir`` with a trial report) alone: a trial the report listed whose folder has no report
    now, or a trial folder without one, is unfinished and counts as not executed; planned
    trials that never ran make the code 4, whatever the status (an interrupted run's 130 was
    the run's, not the re-scoring's)."""
    path = run_dir / RUN_REPORT
    if not path.is_file():
        return None
    report = _model(RunReport, read_json(path), source=path)
    ordered = sorted(trials, key=lambda t: t.report.trial)
    for earlier, later in zip(ordered, ordered[1:], strict=False):
        if earlier.report.trial == later.report.trial:
            raise ConfigError(f"two trial folders report trial {later.report.trial} "
                              f"({earlier.trial_dir.name}, {later.trial_dir.name})",
                              source=run_dir)
    paths = {summary.trial_id: summary.path for summary in report.trials}
    summaries = [trial_summary(t.report) for t in ordered]
    summaries = [s.model_copy(update={"path": paths.get(s.trial_id, s.path)}) for s in summaries]
    scored = {s.trial_id for s in summaries} | {t.trial_dir.name for t in ordered}
    unfinished = sorted({entry.name for entry in os.scandir(run_dir)
                         if entry.is_dir(follow_symlinks=False) and is_trial_folder(entry.name)
                         and not os.path.isfile(os.path.join(entry.path, TRIAL_REPORT))}
                        | {s.trial_id for s in report.trials if s.trial_id not in scored})
    flags = [s.passed for s in summaries]
    executed = [s.execution_status == "succeeded" for s in summaries]
    judged = [s.passed for s in summaries if s.status != UNJUDGED]
    # the statistics again, with the settings, gates and calibrations the report was written
    # with (the trials of the run folder, in order)
    statistics = run_statistics(
        [t.report for t in ordered], [t.turn_metrics for t in ordered],
        statistics=settings_of(report.pass_rate),
        gates=[gate_config_of(check) for check in report.gates],
        calibrations=[rate.calibration for rate in report.judge_corrected_pass_rates],
        curve=report.status != "running", probes=[t.probes for t in ordered])
    # a run --fail-fast stopped: its planned trials that never started are left out, as run
    # leaves them out
    planned = len(summaries) if report.stopped_after_failures is not None \
        else report.planned_trials
    code = run_exit_code(passed=[gate_passed(s) for s in summaries], executed=executed,
                         planned=planned, gates_blocked=bool(statistics.blocking_gates))
    updated = report.model_copy(update={
        "schema_version": SCHEMA_VERSION,
        "trials": summaries, "executed_trials": len(summaries), "passed_trials": sum(flags),
        "pass_at_k": pass_at_k(judged),
        "pass_power_k": pass_power_k(judged) and len(summaries) == report.planned_trials,
        "exit_code": code,
        "message": not_run_message(planned=report.planned_trials, executed=len(summaries),
                                   status=report.status, in_progress=False,
                                   unfinished=unfinished),
        "cost": cost_summary(t.report.cost for t in ordered) if report.cost is not None
        else None,
        "degraded_trials": sum(s.measurement_degraded for s in summaries),
        "inconclusive_trials": sum(s.status == "inconclusive" for s in summaries),
        "retried_trials": sum(s.attempts > 1 for s in summaries),
        "rescore_overrides": overrides.recorded(),
        "unjudged_trials": sum(s.status == UNJUDGED for s in summaries),
        **(statistics.report_fields() if report.pass_rate is not None else {})})
    write_json(path, updated)
    return updated


def rescore(path: str | Path, *, output: str | Path | None = None,
            speech_metrics: bool | None = None, judges_from: str | Path | None = None,
            overrides: Sequence[str] = (),
            pricing: PricingConfig | str | Path | None = None,
            stop: threading.Event | None = None) -> Rescored:
    """Re-score a trial folder, a run folder or a folder of runs (a sweep).

    With ``output``, the bundle is first copied there and the copy is re-scored; without, the
    derived files are rewritten in place (the raw facts are never changed). ``judges_from`` is
    a run file whose ``quality_evaluation`` and providers run the judges again; otherwise the
    recorded judge results are kept. Raises :class:`~voicelab.errors.ConfigError` for a folder
    that is not a bundle, a bundle newer than this voicelab, or one written before schema 2.0.

    ``path`` and ``output`` may be store URLs: the bundle is downloaded into a staging folder,
    re-scored there and published back (each trial folder's report last), to ``output`` when
    given, else in place.

    ``overrides`` (``rescore --set``) change what judges the evidence: the scenario's
    ``eval_spec``, ``measurement``, ``transcription`` and, with ``judges_from``,
    ``quality_evaluation`` (:mod:`._rescore_overrides`); any other key is a
    :class:`~voicelab.errors.ConfigError` naming it, before anything is read. The run report
    records them as ``rescore_overrides``; the recorded configurations are left as they were.
    ``pricing`` (a :class:`~voicelab.config.PricingConfig` or a file holding one) prices the
    recorded usage under a new table and changes nothing else: only the ``cost`` of the trial,
    run and sweep reports is rewritten (docs/cost.md). Nothing else is re-scored.

    ``stop`` (set by the CLI on SIGINT/SIGTERM) ends the re-scoring after the trial folder in
    progress: the folders not reached are kept as they were (``Rescored.kept``) and the run
    reports are rewritten from every trial, each as its folder now says, so the bundle stays
    consistent and a second ``rescore`` finishes the job. A run or sweep folder's
    ``evaluator.log`` records the re-scoring (appended to).
    """
    if pricing is not None and not isinstance(pricing, PricingConfig):
        pricing = load_pricing(pricing, key="pricing")
    if pricing is not None and (judges_from is not None or speech_metrics is not None
                                or overrides):
        raise ConfigError("pricing re-prices the recorded usage and changes nothing else: give "
                          "it without judges, speech metrics or overrides", key="pricing")
    given = RescoreOverrides.parse(overrides, judges_given=judges_from is not None)  # refused first
    if judges_from is not None:
        _check_judges(judges_from, given)
    if is_url(path) or is_url(output):
        return _rescore_in_store(path, output=output, speech_metrics=speech_metrics,
                                 judges_from=judges_from, overrides=overrides, pricing=pricing,
                                 stop=stop)
    source = resolve_local_latest(as_local_path(path))
    if not source.exists():
        raise ConfigError(f"no such folder: {source}", source=source)
    source = source.resolve()
    check_tree(source)  # regular files and folders only, before anything is read or copied
    _require_audio(find_trial_dirs(source))
    target = source
    if output is not None:
        target = _output_folder(as_local_path(output))
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)  # only `latest`
    with RunFolder.existing(target, command="rescore", report=RunReport) as folder:
        if pricing is not None:  # the cost and nothing else: not even the log
            return reprice_folder(target, pricing, stop=stop)
        return _rescore_folder(folder, speech_metrics=speech_metrics, judges_from=judges_from,
                               overrides=overrides, stop=stop)


def _start_log(folder: RunFolder[RunReport], words: Redactor) -> None:
    """A run or sweep folder's ``evaluator.log`` records the re-scoring; a lone trial folder
    keeps no log of its own."""
    if (folder.path / RUN_REPORT).is_file() or (folder.path / MATRIX_REPORT).is_file():
        folder.start_log(run_id=f"rescore-{folder.path.name}", words=words)


def _require_audio(trial_dirs: list[Path]) -> None:
    """Every trial kept its audio (checked before any is copied or rewritten)."""
    for trial_dir in trial_dirs:
        require_retained_audio(trial_dir, purpose="re-scored")


def _check_judges(judges_from: str | Path, given: RescoreOverrides) -> None:
    """The plug-in judges of ``judges_from`` resolve and take their settings: refused (exit 2)
    before anything is copied or rewritten."""
    from ..config import load_run
    from ..scoring import check_plugin_judges

    judges_run = load_run(judges_from, overrides=given.judges())
    check_plugin_judges(judges_run.run.quality_evaluation, search_dirs=[judges_run.base_dir],
                        source=judges_run.run_path)


def _rescore_folder(folder: RunFolder[RunReport], *, speech_metrics: bool | None,
                    judges_from: str | Path | None, overrides: Sequence[str] = (),
                    stop: threading.Event | None = None) -> Rescored:
    target = folder.path
    given = RescoreOverrides.parse(overrides, judges_given=judges_from is not None)
    trial_dirs = find_trial_dirs(target)
    if not trial_dirs:
        raise ConfigError("no trial folders (trial-NNN/trial-report.json) found", source=target)
    judges_run = None
    if judges_from is not None:
        from ..config import load_run

        judges_run = load_run(judges_from, overrides=given.judges())
    _require_audio(trial_dirs)
    _start_log(folder, process_redactor() if judges_run is None else run_redactor(judges_run))
    logger.info("rescore: %d trial folder(s) in %s%s%s", len(trial_dirs), target,
                f", judges again from {judges_from}" if judges_from is not None else "",
                f", with {', '.join(o.label for o in given.given)}" if given.given else "")
    result = Rescored(target)
    for trial_dir in trial_dirs:
        if stopped(stop):
            result.kept.append(kept_as_recorded(trial_dir))
            continue
        trial = rescore_trial(trial_dir, speech_metrics=speech_metrics, judges_run=judges_run,
                              overrides=given)
        result.trials.append(trial)
        logger.info("%s: re-scored, %s%s", trial_dir.relative_to(target.parent),
                    "passed" if trial.report.passed else "not passed",
                    f" (changed: {', '.join(trial.changed_verdicts)})"
                    if trial.changed_verdicts else "")
    say_kept(result)
    by_run: dict[Path, list[RescoredTrial]] = {}
    for trial in [*result.trials, *result.kept]:
        run_dir = trial.trial_dir.parent
        if run_dir == target or target in run_dir.parents:  # never a report outside the bundle
            by_run.setdefault(run_dir, []).append(trial)
    for run_dir, trials in by_run.items():
        updated = _update_run_report(run_dir, trials, given)
        if updated is not None:
            result.run_reports.append(run_dir / RUN_REPORT)
            result.run_exit_codes.append(updated.exit_code)
            if updated.message:
                result.notes.append(f"{run_dir}: {updated.message}")
    for matrix in sorted(target.rglob(MATRIX_REPORT)):
        result.run_exit_codes.append(_update_matrix_report(matrix))
    return result


def _output_folder(target: Path) -> Path:
    """``--output``: a new path or an empty folder (not a link, a file, a FIFO...)."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return target.resolve()
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot use {target}: {os_reason(error) or error}",
                          key="output") from None
    if not stat.S_ISDIR(mode):
        raise ConfigError(f"{target} is {file_kind(mode)}: the output must be a new path or an "
                          f"empty folder", key="output")
    if any(target.iterdir()):
        raise ConfigError(f"the output folder {target} is not empty", key="output")
    return target.resolve()


def _rescore_in_store(path: str | Path, *, output: str | Path | None,
                      speech_metrics: bool | None, judges_from: str | Path | None,
                      overrides: Sequence[str] = (),
                      pricing: PricingConfig | None = None,
                      stop: threading.Event | None = None) -> Rescored:
    with tempfile.TemporaryDirectory(prefix="voicelab-rescore-") as scratch:
        source = open_location(path, key="run_dir")
        if isinstance(source, RemoteLocation):
            source = resolve_latest(source)
            local_source = fetch(source, Path(scratch) / "source" / source.name)
        else:
            local_source = resolve_local_latest(source)
        target = source if output is None else open_location(output, key="output")
        if not isinstance(target, RemoteLocation):  # from a store into a local folder
            return rescore(local_source, output=target, speech_metrics=speech_metrics,
                           judges_from=judges_from, overrides=overrides, pricing=pricing,
                           stop=stop)
        staging = Path(scratch) / "target"
        publisher = Publisher(staging, target)
        if target is source:  # in place: only what re-scoring rewrote is published again
            staging = local_source
            publisher = Publisher(staging, target)
            publisher.mark_present()
            result = rescore(staging, speech_metrics=speech_metrics, judges_from=judges_from,
                             overrides=overrides, pricing=pricing, stop=stop)
        else:
            check_writable(target, source=None, key="output")
            if remote_exists(target) and target.fs.find(target.path):
                raise ConfigError(f"the output folder {target.url} is not empty", key="output")
            result = rescore(local_source, output=staging, speech_metrics=speech_metrics,
                             judges_from=judges_from, overrides=overrides, pricing=pricing,
                             stop=stop)
        try:
            publisher.sync(final=True)
        except Exception as error:  # noqa: BLE001 - every store raises its own types
            raise ExecutionError(f"could not publish the re-scored bundle to {target.url}: "
                                 f"{' '.join(str(error).split())}") from None
        result.location = target.url
        return result


def _update_matrix_report(path: Path) -> int:
    """The matrix report again, from its cells' rewritten run reports; returns its code (a
    planned cell that never ran counts as an execution failure, whatever the status)."""
    from ..artifacts import MatrixReport

    report = _model(MatrixReport, read_json(path), source=path)
    cells = []
    for cell in report.cells:
        run_report = path.parent / cell.cell_id / RUN_REPORT
        if not run_report.is_file():
            cells.append(cell)
            continue
        run = _model(RunReport, read_json(run_report), source=run_report)
        cells.append(cell.model_copy(update={
            "executed_trials": run.executed_trials,
            "passed_trials": run.passed_trials, "pass_at_k": run.pass_at_k,
            "pass_power_k": run.pass_power_k, "exit_code": run.exit_code,
            "pass_rate": run.pass_rate, "pass_curve": run.pass_curve}))
    code = sweep_exit_code([c.exit_code for c in cells], planned_cells=report.cell_count)
    complete = len(cells) == report.cell_count
    rates: dict[str, Any] = {}
    if report.pass_rate is not None:
        from ._matrix_report import matrix_rates

        pooled, margins = matrix_rates(cells, settings_of(report.pass_rate))
        rates = {"pass_rate": pooled, "margins": margins}
    costs = matrix_costs(path, report.model_copy(update={"cells": cells})) \
        if report.cost is not None else {}
    cells = costs.get("cells", cells)
    write_json(path, report.model_copy(update={
        "schema_version": SCHEMA_VERSION, "cells": cells, "cost": costs.get("cost"),
        "stages": costs.get("stages", report.stages),
        "passed_trials": sum(c.passed_trials for c in cells),
        "executed_trials": sum(c.executed_trials for c in cells),
        "pass_at_k": complete and all(c.pass_at_k for c in cells),
        "pass_power_k": complete and all(c.pass_power_k for c in cells), "exit_code": code,
        **rates}))
    return code
