"""The runner: one trial's conversation loop, multi-trial execution, matrices."""

from ._dask import DaskExecutor
from ._executors import LocalExecutor, TrialExecutor
from ._matrix import (
    MatrixInterrupted,
    MatrixOutcome,
    MatrixPlan,
    arun_matrix,
    plan_matrix,
    run_matrix,
)
from ._replay import areplay, plan_replay, replay
from ._replay_sweep import areplay_sweep, replay_sweep
from ._rescore import Rescored, read_recording, rescore
from ._run import RunInterrupted, RunOutcome, arun, exit_code_for, run, trial_seed
from ._trial import TrialResult

__all__ = ["DaskExecutor", "LocalExecutor", "MatrixInterrupted", "MatrixOutcome", "MatrixPlan",
           "Rescored", "RunInterrupted", "RunOutcome", "TrialExecutor", "TrialResult", "areplay",
           "areplay_sweep", "arun", "arun_matrix", "exit_code_for", "plan_matrix", "plan_replay",
           "read_recording", "replay", "replay_sweep", "rescore", "run",
           "run_matrix", "trial_seed"]
