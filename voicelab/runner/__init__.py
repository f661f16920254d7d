"""The runner: one trial's conversation loop, multi-trial execution, matrices."""

from ._matrix import MatrixOutcome, MatrixPlan, arun_matrix, plan_matrix, run_matrix
from ._run import RunOutcome, arun, exit_code_for, run, trial_seed

__all__ = ["MatrixOutcome", "MatrixPlan", "RunOutcome", "arun", "arun_matrix", "exit_code_for",
           "plan_matrix", "run", "run_matrix", "trial_seed"]
