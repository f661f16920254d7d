"""What a :class:`._run.Run` is told: the caller's options checked and resolved, and the wiring
of the command that runs it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..artifacts import JudgeCalibration, ReplayOrigin
from ..cost import CostBudget
from ..runner import FailFast, TrialResult
from ._load_profile import StartSchedule
from ._observer import RunObserver


@dataclass(frozen=True)
class RunSettings:
    """What a :class:`Run` is told (built by :func:`voicelab.execution.arun`): the caller's
    :class:`voicelab.RunOptions` checked and resolved (``fail_fast`` a counter, ``max_cost`` a
    budget, ``only`` parsed), and the wiring of the command that runs it
    (:class:`._options.RunWiring`: a sweep's shared semaphore, counter and budget, a cell's
    folder name, ``latest``, a replay's origin). Each field is described where it is chosen."""

    trials: int | None = None
    concurrency: int | None = None
    artifacts_dir: str | Path | None = None
    overrides: Sequence[str] = ()
    run_id: str | None = None
    on_trial_done: Callable[[TrialResult, int, int], None] | None = None
    semaphore: asyncio.Semaphore | None = None
    link_latest: bool = True
    bundle_name: str | None = None
    label: str | None = None
    calibrations: Sequence[JudgeCalibration] = ()
    resume: str | Path | None = None
    rerun_failed: bool = False
    replay_of: ReplayOrigin | None = None
    executor: object = None
    workers: int | None = None
    scheduler: str | None = None
    lag_budget_ms: float | None = None
    scoring: str = "process"
    retry_inconclusive: int = 1
    observers: Sequence[RunObserver] = ()
    only: Sequence[str] = ()
    fail_fast: FailFast | None = None
    budget: CostBudget | None = None
    trial_estimate: float | None = None
    ramp_seconds: float | None = None
    arrival_rate: float | None = None
    max_concurrency: int | None = None
    schedule: StartSchedule | None = None
