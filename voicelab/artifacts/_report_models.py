"""The models of ``run-report.json`` and ``matrix-report.json``: pass rates with their
intervals, pass@k curves, gates, judge calibration, the selectivity rates of a run's probes.
Versioning: see :mod:`._models`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from ._cost_models import BudgetState, CostSummary, StageOutcome
from ._endpointing_models import EndpointingCurve, without_absent
from ._models import ArtifactModel, TrialSummary, Versioned
from ._voice_models import MetricSummary, ProbeOutcome


class PassRate(ArtifactModel):
    """A pass rate with its two-sided confidence interval (``None`` with no trials)."""

    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    method: Literal["wilson", "clopper_pearson"] = "wilson"
    confidence: float = 0.95
    n: int = 0
    passed: int = 0
    #: of the ``n - passed`` not passed, how many were inconclusive (undecided, not failed)
    inconclusive: int = 0


class PassCurvePoint(ArtifactModel):
    """Unbiased estimates from n trials with c passes: pass@k = 1 - C(n-c,k)/C(n,k) (at least
    one of k trials passes), pass^k = C(c,k)/C(n,k) (all k pass)."""

    k: int
    pass_at_k: float
    pass_power_k: float


class VerdictPassRate(ArtifactModel):
    name: str
    critical: bool
    pass_rate: PassRate


class GateCheck(ArtifactModel):
    """A run-config gate, judged on the conservative end of an interval. ``inconclusive``
    (too few trials or responses to bound) blocks like ``failed``."""

    metric: str
    status: Literal["passed", "failed", "inconclusive"]
    message: str
    min_lower_bound: float | None = None
    quantile: float | None = None
    max: float | None = None
    min: float | None = None
    #: the pass rate, or the metric's sample quantile over the responses
    observed: float | None = None
    #: the end of the interval that was judged: the pass rate's lower bound, or the quantile's
    #: distribution-free upper bound (``max``) or lower bound (``min``), an order statistic
    bound: float | None = None
    method: str
    confidence: float
    n: int
    #: a quantile gate: the responses a bound needs at this confidence
    needed: int | None = None


class JudgeCalibration(ArtifactModel):
    """A judge's confusion counts against human labels (the calibration notebook's result)."""

    criterion: str = Field(min_length=1)
    tp: int = Field(ge=0)
    fn: int = Field(ge=0)
    fp: int = Field(ge=0)
    tn: int = Field(ge=0)
    source: str | None = None


class JudgeCorrectedRate(ArtifactModel):
    """A judge's raw pass rate beside the Rogan-Gladen rate corrected for its measured error."""

    judge: str
    #: the judge's verdicts on this run's trials (judge errors left out), with its interval
    judge_pass_rate: PassRate
    corrected: float | None = None
    low: float | None = None
    high: float | None = None
    sensitivity: float | None = None
    specificity: float | None = None
    confidence: float
    method: str
    n_bootstrap: int
    seed: int
    calibration: JudgeCalibration
    note: str = ""


class ReplayOrigin(ArtifactModel):
    """The run a replay re-sent the user's audio of (``voice-evaluator replay``)."""

    run_id: str
    bundle_path: str


class SelectivityRate(ArtifactModel):
    """A selectivity rate over a run's probes with its confidence interval: the product's
    wrong reactions (a stop on a backchannel or a noise; no stop on an interruption) per probe
    it could react to (its speech was going on at the probe's onset)."""

    name: Literal["false_stop_rate_backchannel", "false_stop_rate_noise",
                  "missed_stop_rate_interruption"]
    kind: Literal["backchannel", "noise", "interruption"]
    probes: int
    errors: int
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    method: str = "wilson"
    confidence: float = 0.95
    #: probes whose onset found the product silent (not counted)
    not_applicable: int = 0
    #: onset to the end of the product's speech, over the probes where it stopped
    stop_ms: MetricSummary | None = None


class RunRetention(ArtifactModel):
    """What the run's ``retention:`` setting kept (docs/artifacts.md, "Retention")."""

    audio: Literal["all", "failed", "none"]
    transcripts: Literal["full", "redacted"]
    #: trials whose WAV files were not written, and trials that kept them
    audio_dropped_trials: int = 0
    audio_kept_trials: int = 0


class TelemetryExport(ArtifactModel):
    """What a run sent to an OpenTelemetry collector (docs/observability.md); written only when
    the run exported traces. A collector that was down or refused shows in ``spans_failed``:
    the run itself is never failed by it."""

    #: the OTLP/HTTP traces URL (its headers are never written: they carry credentials)
    endpoint: str
    #: trials whose traces were handed to the exporter, and the spans in them
    traces: int = 0
    spans: int = 0
    #: spans the collector took, and spans lost (refused, unreachable, timed out, or still
    #: queued when the run's bounded final flush ended)
    spans_exported: int = 0
    spans_failed: int = 0
    #: why spans were lost, once (the first failure)
    warning: str | None = None


class ProbeRow(ProbeOutcome):
    """One probe of a run (run-report.json ``probes``): the trial's outcome with its trial."""

    trial: int


class LoadProfile(ArtifactModel):
    """How a run started its trials (docs/load-profiles.md). ``closed``: at most
    ``max_concurrency`` at once, the first of them started evenly over ``ramp_seconds`` (0: all
    at once), each later one when a running one ends. ``open``: ``arrival_rate_per_second`` new
    trials a second whatever the others take, at most ``max_concurrency`` at once; an arrival
    with no free slot starts late, never skipped (``achieved_concurrency.late_starts``)."""

    kind: Literal["closed", "open"]
    max_concurrency: int
    ramp_seconds: float | None = None
    arrival_rate_per_second: float | None = None
    #: who chose it: the caller, voicelab's default ramp for a high concurrency, or the run
    #: being resumed (``run --resume`` keeps the profile it was started with)
    chosen_by: Literal["caller", "default", "resumed"] = "caller"


class ConcurrencySample(ArtifactModel):
    """Trials running ``t_seconds`` after the run started its first trial."""

    t_seconds: float
    running: int


class AchievedConcurrency(ArtifactModel):
    """What the run's load profile achieved (this session's trials: a resumed run's own)."""

    #: ``running`` after each start and end, in time order; a huge run keeps every
    #: ``stride``-th change (its highest ``running`` is ``peak`` all the same)
    samples: list[ConcurrencySample] = Field(default_factory=list)
    stride: int = 1
    peak: int = 0
    #: trials that could not start at their slot (open model: no free slot at their arrival
    #: time; the dropped iterations of k6, run late instead of skipped), how late at most and
    #: on average
    late_starts: int = 0
    late_start_max_seconds: float | None = None
    late_start_mean_seconds: float | None = None


#: A run's report (run-report.json): its trials, pass rates, gates, cost and exit code.
class RunReport(Versioned):
    run_id: str
    status: Literal["running", "complete", "interrupted", "failed"]
    scenario_id: str
    persona: str
    environment: str
    adapter: str
    suite_hash: str
    bundle_path: str
    started_at: str
    ended_at: str
    trial_count: int
    planned_trials: int
    executed_trials: int
    passed_trials: int
    pass_at_k: bool
    pass_power_k: bool
    exit_code: int
    trials: list[TrialSummary] = Field(default_factory=list)
    #: executed trials still inconclusive after their retries (counted as not passed) and
    #: trials run again because an attempt was inconclusive
    inconclusive_trials: int = 0
    retried_trials: int = 0
    #: what the evaluator's own loop lag puts at stake (a timing verdict or gate its error
    #: could change, a response beyond the documented accuracy): the CLI's one warning line;
    #: empty when ``degraded_trials`` are only counted
    measurement_warnings: list[str] = Field(default_factory=list)
    #: executed trials that nothing judged (status ``unjudged``: no critical verdict applied,
    #: no critical judge), left out of the pass rates and pass@k / pass^k; not a failure
    unjudged_trials: int = 0
    message: str = ""
    #: ``--label``: names the run in frames and reports
    label: str | None = None
    #: the run file, so ``run --resume RUN_DIR`` finds it
    run_file: str | None = None
    resumed_at: list[str] = Field(default_factory=list)
    #: ``production``: recorded real calls (``voice-evaluator ingest``), one trial per call;
    #: absent (None): a simulated run (written only for production calls)
    source: Literal["production"] | None = None
    #: over the trials that ran to an end (interrupted ones are left out; resume runs them)
    pass_rate: PassRate | None = None
    #: every k from 1 to pass_rate.n (in the final report)
    pass_curve: list[PassCurvePoint] = Field(default_factory=list)
    verdict_pass_rates: list[VerdictPassRate] = Field(default_factory=list)
    gates: list[GateCheck] = Field(default_factory=list)
    judge_corrected_pass_rates: list[JudgeCorrectedRate] = Field(default_factory=list)
    #: a replay: the run whose recorded user turns it sent again, trial by trial (same seeds)
    replay_of: ReplayOrigin | None = None
    #: the ``--set`` overrides the run was started with (secrets ``***``): ``run --resume``
    #: applies them again
    overrides: list[str] = Field(default_factory=list)
    #: ``--only``: the expressions that chose the planned trials (empty: every trial)
    only: list[str] = Field(default_factory=list)
    #: ``rescore --set``: what the last re-score judged the evidence with, over the recorded
    #: configuration (secrets ``***``; empty: as recorded)
    rescore_overrides: list[str] = Field(default_factory=list)
    #: ``--fail-fast N``: N, when that many trials did not pass and the run's other planned
    #: trials were not started (``message`` says how many); its exit code is then the trials'
    stopped_after_failures: int | None = None


    #: selectivity probes (docs/probes.md): the three rates, and every probe with its timing
    selectivity: list[SelectivityRate] = Field(default_factory=list)
    probes: list[ProbeRow] = Field(default_factory=list)
    #: trials whose timings the evaluator's own loop lag degraded (their timing verdicts are
    #: inconclusive): fewer concurrent trials per worker, or more workers, avoid it
    degraded_trials: int = 0
    #: ``measurement.lag_budget_ms``: the loop-lag p99 the run kept its trials under by
    #: lowering concurrency, and the lowest concurrency it went down to
    lag_budget_ms: float | None = None
    lowest_concurrency: int | None = None
    #: hesitation turns (docs/endpointing.md): cut-in probability and latency by pause length
    #: (written only when the run had hesitation turns)
    endpointing: EndpointingCurve | None = None
    #: what the run's ``retention:`` kept (written only when it keeps less than everything)
    retention: RunRetention | None = None
    #: the traces exported to an OpenTelemetry collector (written only when the run did)
    telemetry: TelemetryExport | None = None
    #: the trials' costs summed (docs/cost.md); absent in bundles written before
    cost: CostSummary | None = None
    #: ``budget``: trials were not started because the budget would have been passed
    stopped: Literal["budget"] | None = None
    budget: BudgetState | None = None
    #: how the trials were started, and the concurrency that achieved (absent in bundles
    #: written before; docs/load-profiles.md)
    load_profile: LoadProfile | None = None
    achieved_concurrency: AchievedConcurrency | None = None

    @model_serializer(mode="wrap")
    def _endpointing_only_when_measured(self, handler: SerializerFunctionWrapHandler
                                        ) -> dict[str, object]:
        return without_absent(handler(self), ("endpointing", "retention", "source",
                                              "telemetry", "cost", "stopped", "budget", "only",
                                              "rescore_overrides", "stopped_after_failures",
                                              "load_profile", "achieved_concurrency"))


class MatrixCell(ArtifactModel):
    cell_id: str
    scenario: str
    persona: str
    environment: str
    bundle_path: str
    trial_count: int
    executed_trials: int
    passed_trials: int
    pass_at_k: bool
    pass_power_k: bool
    exit_code: int
    suite_hash: str
    pass_rate: PassRate | None = None
    pass_curve: list[PassCurvePoint] = Field(default_factory=list)
    #: a suite's ``endpointing`` axis: the pause length this cell's hesitation turn was given
    pause_seconds: float | None = None
    #: a staged suite: the stage this cell ran in (docs/cost.md)
    stage: str | None = None
    cost: CostSummary | None = None

    @model_serializer(mode="wrap")
    def _pause_only_when_swept(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return without_absent(handler(self), ("pause_seconds", "stage", "cost"))


class MarginPassRate(ArtifactModel):
    """The pass rate of every trial of the matrix sharing one scenario, persona or environment."""

    dimension: Literal["scenario", "persona", "environment"]
    value: str
    cells: int
    pass_rate: PassRate


class MatrixReport(Versioned):
    name: str
    run_id: str
    status: Literal["running", "complete", "interrupted"]
    suite_path: str
    run_dir: str
    started_at: str
    ended_at: str
    scenarios: list[str]
    personas: list[str]
    environments: list[str]
    trials_per_cell: int
    cell_count: int
    conversations: int
    passed_trials: int
    executed_trials: int
    pass_at_k: bool = Field(description="every cell passed at least one trial")
    pass_power_k: bool = Field(description="every trial of every cell passed")
    exit_code: int
    cells: list[MatrixCell] = Field(default_factory=list)
    label: str | None = None
    resumed_at: list[str] = Field(default_factory=list)
    #: every trial of the matrix pooled (a design-weighted rate over the cells)
    pass_rate: PassRate | None = None
    margins: list[MarginPassRate] = Field(default_factory=list)
    #: a replayed sweep: the sweep whose cells' recorded user turns it sent again
    replay_of: ReplayOrigin | None = None
    #: the ``--set`` overrides the sweep was started with (secrets ``***``): ``sweep --resume``
    #: applies them again
    overrides: list[str] = Field(default_factory=list)
    #: ``--only``: the expressions that chose the cells and trials (empty: the whole matrix)
    only: list[str] = Field(default_factory=list)
    #: a suite's ``endpointing`` axis: one curve per scenario x persona x environment
    endpointing: list[EndpointingCurve] | None = None
    #: every cell's cost summed (docs/cost.md)
    cost: CostSummary | None = None
    #: ``budget``: trials were not started because the budget would have been passed
    stopped: Literal["budget"] | None = None
    budget: BudgetState | None = None
    #: a staged suite: each stage, in order, and where the sweep stopped (docs/cost.md)
    stages: list[StageOutcome] | None = None

    @model_serializer(mode="wrap")
    def _endpointing_only_when_swept(self, handler: SerializerFunctionWrapHandler
                                     ) -> dict[str, object]:
        return without_absent(handler(self), ("endpointing", "cost", "stopped", "budget",
                                              "stages", "only"))


# --- flaky or broken: a cell across runs (``--history``) -------------------------------------------

class CellRun(ArtifactModel):
    """One run of a cell: its trials and whether every one passed."""

    run_id: str
    started_at: str
    trials: int
    passed: int
    #: every trial that ran passed (pass^k); a cell with no trial run is neither
    outcome: Literal["passed", "failed"] | None = None


class CellStability(ArtifactModel):
    """A scenario x persona x environment cell over the runs of a history and this run."""

    scenario: str
    persona: str
    environment: str
    #: ``stable_pass``: every trial of every run passed; ``stable_fail``: none did; ``flaky``:
    #: some did (``pass_rate`` with its interval says how often); ``no_trials``: none ran
    stability: Literal["stable_pass", "flaky", "stable_fail", "no_trials"]
    #: over every trial of every run (earliest first in ``runs``)
    pass_rate: PassRate
    runs: list[CellRun] = Field(default_factory=list)
    #: the latest run's outcome against the one before it: ``pass_to_fail`` /
    #: ``fail_to_pass`` (None: the same, or no earlier run of the cell)
    flipped: Literal["pass_to_fail", "fail_to_pass"] | None = None


class Flakiness(Versioned):
    """``flakiness.json``: every cell of a run or sweep classified against a history of earlier
    runs (docs/observability.md, "Flaky or broken")."""

    run_id: str
    #: where the earlier runs were read (a folder or a store URL)
    history: str
    #: the earlier runs read, and the bundles that could not be read (and why)
    runs_read: int = 0
    unreadable: list[str] = Field(default_factory=list)
    cells: list[CellStability] = Field(default_factory=list)
