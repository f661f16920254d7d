"""The runner: one trial's conversation loop, multi-trial execution, matrices."""

from ._run import RunOutcome, arun, exit_code_for, run, trial_seed

__all__ = ["RunOutcome", "arun", "exit_code_for", "run", "trial_seed"]
