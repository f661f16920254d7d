"""Replaying a run: its caller audio sent again to a product, as a new run
(:func:`voicelab.runner.plan_replay` says what is replayed and how)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..runner import RunOutcome, TrialResult, plan_replay
from ._arun import arun_wired, run_sync
from ._options import RunOptions, RunWiring


async def areplay(run_dir: str | Path, *, overrides: Sequence[str] = (),
                  run_file: str | Path | None = None, artifacts_dir: str | Path | None = None,
                  concurrency: int | None = None, label: str | None = None,
                  on_trial_done: Callable[[TrialResult, int, int], None] | None = None,
                  ramp_seconds: float | None = None, arrival_rate: float | None = None,
                  max_concurrency: int | None = None) -> RunOutcome:
    """Replay ``run_dir`` (see the module docstring) into a new run folder beside it (or in
    ``artifacts_dir``). Awaitable from a notebook; :func:`replay` for scripts.

    ``overrides`` are ``--set`` values (``endpoint.settings.uri=ws://new-build``); ``run_file``
    takes the configuration from a run file instead of the bundle; ``ramp_seconds``,
    ``arrival_rate`` and ``max_concurrency`` its load profile (:class:`RunOptions`). Raises ConfigError before any
    trial; execution failures are in the outcome, as for :func:`voicelab.arun`."""
    plan, source = plan_replay(run_dir, overrides=overrides, run_file=run_file)
    options = RunOptions(trials=len(source.seeds), concurrency=concurrency,
                         artifacts_dir=artifacts_dir if artifacts_dir is not None
                         else source.run_dir.parent, label=label, on_trial_done=on_trial_done,
                         ramp_seconds=ramp_seconds, arrival_rate=arrival_rate,
                         max_concurrency=max_concurrency)
    return await arun_wired(plan, options, RunWiring(replay_of=source.origin))


def replay(run_dir: str | Path, **kwargs: Any) -> RunOutcome:
    """Synchronous :func:`areplay` for scripts (not inside a running event loop)."""
    return run_sync(areplay, run_dir, **kwargs)
