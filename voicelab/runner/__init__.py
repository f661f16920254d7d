"""The runner: one trial's conversation, its call and its scoring; what a run of trials reports.

Where trials run, and running many of them, is :mod:`voicelab.execution`'s: it builds on the
names below (a trial's plan, its call, scoring a call, a run's report and outcome).
"""

from .._limits import MAX_CONCURRENCY, MAX_TRIALS
from ._conversation_end import Failure
from ._cost_estimate import (
    CostEstimate,
    TrialShape,
    combined,
    estimate_from_config,
    trial_shapes,
    unpriced_text,
)
from ._evidence import inconclusive_verdict_names
from ._matrix import (
    MatrixCellPlan,
    MatrixInterrupted,
    MatrixOutcome,
    MatrixPlan,
    StagePlan,
    plan_matrix,
)
from ._matrix_report import (
    BUDGET_REASON,
    conclude_cells,
    matrix_cell,
    matrix_rates,
    matrix_report,
    read_matrix_report,
    stage_not_run,
    stage_outcome,
    staged_exit_code,
)
from ._measured_costs import (
    CellCost,
    estimate_from_measured,
    matrix_costs,
    read_measured_costs,
    usage_of_cost,
)
from ._replay import ReplaySource, plan_replay
from ._report import configured_session_id, utc_iso
from ._rescore import rescore
from ._rescore_trial import read_recording
from ._rescored import Rescored, RescoredTrial, read_responses
from ._retention import retained_files, run_redactor, runs_redactor, strictest_access
from ._run import (
    RunInterrupted,
    RunOutcome,
    bounded_count,
    exit_code_for,
    run_report,
    trial_seed,
    utc_now,
)
from ._scoring import Call, Scored, score_now, score_on_loop
from ._select import FailFast, TrialSelection
from ._speech import open_speech
from ._summary import SUMMARY_VERSION, summary_document
from ._trial import (
    TrialPlan,
    TrialResult,
    crashed_trial,
    new_run_id,
    run_call,
    run_trial,
    scored_result,
    trial_session_id,
    trial_summary,
    unscored_report,
)
from ._trial import _TrialCancelled as TrialCancelled

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "matrix_costs",
    "read_measured_costs",
    "combined",
    "unpriced_text",
    "MatrixInterrupted",
    "MatrixOutcome",
    "Rescored",
    "RescoredTrial",
    "RunInterrupted",
    "RunOutcome",
    "TrialSelection",
    "plan_matrix",
    "read_matrix_report",
    "rescore",
    "summary_document",
]
