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
from ._inline import InlineExecutor
from ._load_profile import (
    DEFAULT_RAMP_ABOVE,
    DEFAULT_RAMP_SECONDS_PER_TRIAL,
    ConcurrencyTrace,
    StartSchedule,
    combined,
    load_line,
    load_profile,
)
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

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "combined",
    "load_line",
    "load_profile",
    "EXECUTORS",
    "MAX_WORKERS",
    "DaskExecutor",
    "Executor",
    "ExecutorRun",
    "check_endpoint",
    "JobExecutor",
    "LocalExecutor",
    "ProcessRun",
    "RunContext",
    "RunObserver",
    "RunOptions",
    "TrialCall",
    "TrialJob",
    "TrialOutcome",
    "areplay",
    "areplay_sweep",
    "arun",
    "arun_matrix",
    "read_run_report",
    "recorded_config_file",
    "replay",
    "require_distributed",
    "resumed_overrides",
    "run",
    "run_matrix",
    "tuned_process",
]
