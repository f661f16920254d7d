"""What a caller chooses for a run or a sweep: one typed, frozen :class:`RunOptions`.

``arun(config, options)`` takes it, and so do ``run``, ``arun_matrix`` and ``run_matrix``; a
notebook builds one object and reuses it (``dataclasses.replace`` for a variant). What a command
fixes for a run it runs as a part (a sweep's cell, a replay) is not the user's choice and stays
out of it: :class:`RunWiring`.

The keyword form of those calls (``arun(config, trials=3)``) still works for one release:
:func:`options_from_keywords` builds the options and warns, naming the new form.
"""

from __future__ import annotations

import asyncio
import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ..artifacts import JudgeCalibration, ReplayOrigin
from ..cost import CostBudget
from ..runner import FailFast, TrialResult
from ._load_profile import StartSchedule
from ._observer import RunObserver

#: ``on_trial_done(result, done, total)``: told in this process as each trial settles.
TrialDoneCallback = Callable[[TrialResult, int, int], None]


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What the caller chose for a run (:func:`voicelab.arun`) or a sweep
    (:func:`voicelab.arun_matrix`); every field has the default a run config or the command
    line leaves it at. Sequences are kept as tuples, so an options object can be shared."""

    #: trials to run (default: the run config's ``trials``); a sweep's: per cell
    trials: int | None = None
    #: conversations at once (default: the run config's ``concurrency``)
    concurrency: int | None = None
    #: where the bundle goes (default: the run config's ``artifacts_dir``): a folder or a
    #: store URL (``s3://``, ``gs://``, ``az://``, ``file://``)
    artifacts_dir: str | Path | None = None
    #: ``--set`` values applied to a configuration given as a file (``trials=5``,
    #: ``endpoint.settings.uri=ws://...``)
    overrides: Sequence[str] = ()
    #: the bundle's run id (default: a new one from the time and a random part)
    run_id: str | None = None
    #: names the run in frames and reports
    label: str | None = None
    on_trial_done: TrialDoneCallback | None = None
    #: judge confusion counts (:func:`voicelab.scoring.read_calibration`): add judge-corrected
    #: pass rates to the report
    calibrations: Sequence[JudgeCalibration] = ()
    #: a bundle of this configuration to finish: only the planned trials that are not done run
    #: (interrupted or missing; with ``rerun_failed`` also those that did not pass), into the
    #: same bundle under the same run id and seeds; ``trials`` may extend its plan. A bundle of
    #: another configuration (suite hash) is refused with :class:`voicelab.errors.ConfigError`.
    resume: str | Path | None = None
    rerun_failed: bool = False
    #: where the trials run (:data:`voicelab.execution.EXECUTORS`): ``None`` or ``"inline"``
    #: (this event loop), ``"local"`` (``workers`` processes of this machine, default one per
    #: core; one worker is this event loop), ``"dask"`` (a Dask cluster at ``scheduler``, else
    #: a ``LocalCluster`` of ``workers``), a plug-in's dotted path, a
    #: ``dask.distributed.Client``, or an executor (:class:`voicelab.execution.LocalExecutor`,
    #: :class:`voicelab.execution.DaskExecutor`) shared by several runs. ``workers`` without
    #: ``executor`` is ``"local"``. The bundle is the same whatever runs the trials.
    executor: object = None
    workers: int | None = None
    scheduler: str | None = None
    #: (default: the run config's ``measurement.lag_budget_ms``) lowers the concurrency while
    #: finished trials saw a loop-lag p99 above it
    lag_budget_ms: float | None = None
    #: where a finished call is scored and its files written, in-process runs only:
    #: ``"process"`` (a scoring process beside this event loop, while the next calls run; runs
    #: with judges score on the loop) or ``"loop"`` (this event loop: no extra process, and a
    #: debugger or a patched function sees the scoring). The bundle is the same either way.
    scoring: str = "process"
    #: how many times a trial that ends inconclusive (nothing failed, a critical verdict
    #: undecided) is run again, same seed, at half the concurrency each time; one still
    #: inconclusive after that counts as not passed
    retry_inconclusive: int = 1
    #: told of each trial as it starts and finishes, in this process: OpenTelemetry traces and
    #: live Prometheus metrics (:mod:`voicelab.telemetry`, docs/observability.md)
    observers: Sequence[RunObserver] = ()
    #: ``--only``: which of the planned trials run, like pytest's ``-k``
    #: (:class:`voicelab.runner.TrialSelection`: scenario id, persona and environment names,
    #: trial ids such as ``trial-003``); they keep their numbers and seeds. One string is one
    #: expression.
    only: Sequence[str] = ()
    #: ``--fail-fast``: no trial starts once this many did not pass (a sweep counts across its
    #: cells); the report says so and its exit code is the trials' (3 or 4)
    fail_fast: int | None = None
    #: in the currency of the run's ``pricing:`` (which it needs): no trial starts once what was
    #: spent, plus the expected cost of the trials in flight and of the next, would pass it
    #: (docs/cost.md); a sweep's default is its suite's ``budget:``
    max_cost: float | None = None
    #: the load profile (docs/load-profiles.md). ``ramp_seconds`` (closed model): the first
    #: ``concurrency`` trials start evenly over this period, 0 all at once (default: 0, or a
    #: ramp of 20 ms a trial above 20 concurrent). ``arrival_rate`` (open model, exclusive with
    #: it): new trials a second however long the others take, at most ``max_concurrency``
    #: (default ``concurrency``) at once; an arrival with no free slot starts late, counted.
    #: ``resume`` keeps the profile the run was started with unless one is given.
    ramp_seconds: float | None = None
    arrival_rate: float | None = None
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        # tuples, so two runs never share a list one of them changes
        object.__setattr__(self, "overrides", tuple(self.overrides))
        object.__setattr__(self, "calibrations", tuple(self.calibrations))
        object.__setattr__(self, "observers", tuple(self.observers))
        object.__setattr__(self, "only", (self.only,) if isinstance(self.only, str)
                           else tuple(self.only))


@dataclass(frozen=True)
class RunWiring:
    """What a command fixes for a run it runs as one of its parts, never a user's choice: a
    sweep's cells share one semaphore, fail-fast count and budget and live in folders named by
    cell, without ``latest``; a replay names the run it re-sends."""

    semaphore: asyncio.Semaphore | None = None
    link_latest: bool = True
    bundle_name: str | None = None
    #: the run a replay re-sends (:func:`voicelab.areplay`), named in the report
    replay_of: ReplayOrigin | None = None
    #: shared by a sweep's cells (then ``RunOptions.fail_fast`` / ``max_cost`` stay unset)
    fail_fast: FailFast | None = None
    budget: CostBudget | None = None
    #: what a trial is expected to cost before any of the run's has settled (default: from the
    #: run's configuration)
    trial_estimate: float | None = None
    #: a sweep's cells start their trials from one schedule (its load profile)
    schedule: StartSchedule | None = None


class RunKeywords(TypedDict, total=False):
    """The keyword form of ``arun`` / ``run`` / ``arun_matrix`` (deprecated): the fields of
    :class:`RunOptions`, and the wiring the keyword form exposed."""

    trials: int | None
    concurrency: int | None
    artifacts_dir: str | Path | None
    overrides: Sequence[str]
    run_id: str | None
    label: str | None
    on_trial_done: TrialDoneCallback | None
    calibrations: Sequence[JudgeCalibration]
    resume: str | Path | None
    rerun_failed: bool
    executor: object
    workers: int | None
    scheduler: str | None
    lag_budget_ms: float | None
    scoring: str
    retry_inconclusive: int
    observers: Sequence[RunObserver]
    only: Sequence[str] | str | None
    fail_fast: int | FailFast | None
    max_cost: float | None
    ramp_seconds: float | None
    arrival_rate: float | None
    max_concurrency: int | None
    semaphore: asyncio.Semaphore | None
    link_latest: bool
    bundle_name: str | None
    replay_of: ReplayOrigin | None
    budget: CostBudget | None


_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(RunOptions))
_WIRING_NAMES = frozenset(f.name for f in dataclasses.fields(RunWiring))


def options_from_keywords(options: RunOptions | None, keywords: Mapping[str, object], *,
                          call: str, stacklevel: int = 3) -> tuple[RunOptions, RunWiring]:
    """The options of a call in either form. The keyword form warns (``DeprecationWarning``,
    at the caller's line: ``stacklevel`` counts from here) and is refused beside an options
    object, where it would be unclear which one wins."""
    if not keywords:
        return (options if options is not None else RunOptions()), RunWiring()
    if options is not None:
        raise TypeError(f"{call}() takes a RunOptions or keywords, not both: put "
                        f"{', '.join(sorted(keywords))} into the RunOptions")
    unknown = sorted(set(keywords) - _OPTION_NAMES - _WIRING_NAMES)
    if unknown:
        raise TypeError(f"{call}() got unexpected keyword argument(s): {', '.join(unknown)}")
    names = ", ".join(f"{name}=..." for name in keywords if name in _OPTION_NAMES)
    warnings.warn(f"{call}(config, {', '.join(f'{n}=...' for n in keywords)}) is deprecated: "
                  f"use {call}(config, voicelab.RunOptions({names}))",
                  DeprecationWarning, stacklevel=stacklevel)
    return _split(dict(keywords))


def _split(keywords: dict[str, object]) -> tuple[RunOptions, RunWiring]:
    """The keyword form's values as options and wiring: a shared ``FailFast`` is wiring, a
    number of failures an option; ``only=None`` is every trial."""
    wiring = {name: keywords.pop(name) for name in list(keywords) if name in _WIRING_NAMES
              and name != "fail_fast"}
    if isinstance(keywords.get("fail_fast"), FailFast):
        wiring["fail_fast"] = keywords.pop("fail_fast")
    if keywords.get("only", ()) is None:
        keywords["only"] = ()
    return RunOptions(**keywords), RunWiring(**wiring)  # type: ignore[arg-type]
