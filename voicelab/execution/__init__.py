"""Where trials run, and runs of many trials: ``arun``, sweeps, replays, executors.

An :class:`Executor` runs a run's trials: ``inline`` on the caller's event loop (scored in a
scoring process beside it), ``local`` in worker processes of this machine, ``dask`` on a Dask
cluster, or a plug-in named by its dotted path (:data:`EXECUTORS`). Every child process is
started and spoken to the same way (``_child``). Nothing process-wide changes in the caller's
process unless it opts in (:func:`tuned_process`).
"""

from ._arun import arun, run
from ._check import CheckPoint, EndpointCheck, acheck_endpoint, check_endpoint
from ._dask import DaskExecutor, require_distributed
from ._event_loop import (
    EVENT_LOOP_VARIABLE,
    chosen_event_loop,
    event_loop_description,
    running_event_loop,
    use_chosen_event_loop,
)
from ._inline import InlineExecutor
from ._local import LocalExecutor
from ._observer import ObservedRun, RunObserver
from ._options import RunOptions
from ._process_run import JobExecutor, ProcessRun
from ._protocol import (
    Executor,
    ExecutorRun,
    RunContext,
    RunSpec,
    TrialCall,
    TrialDone,
    TrialJob,
    TrialOutcome,
    WorkerLost,
)
from ._registry import EXECUTORS, MAX_WORKERS, choose_executor
from ._replay import areplay, replay
from ._replay_sweep import areplay_sweep, replay_sweep
from ._resume import read_run_report, recorded_config_file
from ._resume_overrides import resumed_overrides
from ._sweep import arun_matrix, run_matrix
from ._tuning import tuned_process

__all__ = ["EVENT_LOOP_VARIABLE", "EXECUTORS", "MAX_WORKERS", "DaskExecutor", "Executor", "ExecutorRun",
           "CheckPoint", "EndpointCheck", "InlineExecutor", "acheck_endpoint", "check_endpoint", "JobExecutor", "LocalExecutor", "ObservedRun", "ProcessRun", "RunContext", "RunObserver", "RunOptions", "RunSpec", "TrialCall", "TrialDone",
           "TrialJob", "TrialOutcome", "WorkerLost", "areplay", "areplay_sweep", "arun",
           "arun_matrix", "choose_executor", "read_run_report", "recorded_config_file",
           "replay", "replay_sweep", "require_distributed", "resumed_overrides", "run",
           "run_matrix", "chosen_event_loop", "event_loop_description",
           "running_event_loop", "tuned_process",
           "use_chosen_event_loop"]
