"""Versioned artifact models. Every JSON file in a bundle carries ``schema_version``.

Adding an optional field keeps the version; renaming or changing a meaning bumps it. Readers
refuse a newer major version with a clear message (see ``_reader.py``).

2.0: one recording per trial. ``trial-report.session_id`` is the session id the trial presented
to the product (unique per run and trial); every voice event carries ``listener_offset_ns``; the
bundle keeps each direction's audio in arrival order (``user-sent.wav``,
``product-received.wav``) so it can be re-scored; ``voice-metrics.json`` turns have a fixed set
of fields (the speech metrics are null when not computed). 1.0 bundles are still read.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..audio._signal import SignalAnalysis

SCHEMA_VERSION = "2.0"
#: Every major version this voicelab reads (older bundles stay readable).
READABLE_MAJORS = (1, 2)


class ArtifactModel(BaseModel):
    model_config = ConfigDict(extra="allow")


class Versioned(ArtifactModel):
    schema_version: str = SCHEMA_VERSION


# --- conversation evidence --------------------------------------------------------------------

class TranscriptTurn(ArtifactModel):
    turn_id: str
    index: int
    role: Literal["user", "assistant"]
    text: str = ""
    source: str | None = None
    status: str | None = None
    interrupted: bool = False
    started_offset_ms: float | None = None
    ended_offset_ms: float | None = None
    heard_as: str | None = Field(None, description="user turns: what the product recognized")


class Transcript(Versioned):
    session_id: str
    turns: list[TranscriptTurn] = Field(default_factory=list)


class ToolCallRecord(ArtifactModel):
    call_id: str | None = None
    name: str
    arguments: Any = None
    arguments_json: str | None = None
    result: Any = None
    has_result: bool = False
    turn_id: str | None = None
    offset_ms: float | None = None
    result_offset_ms: float | None = None


class ToolCalls(Versioned):
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)


class RawEndpointEvent(ArtifactModel):
    sequence: int
    received_offset_ns: int
    type: str
    raw: Any = None


class RawEndpointEvents(Versioned):
    adapter: str
    events: list[RawEndpointEvent] = Field(default_factory=list)


# --- scoring ----------------------------------------------------------------------------------

class Verdict(ArtifactModel):
    name: str
    passed: bool
    critical: bool = True
    #: ``inconclusive``: there was nothing to judge (no transcript, no barge-in, no audio);
    #: never a pass (a critical inconclusive verdict fails the trial)
    status: Literal["passed", "failed", "inconclusive"] = "failed"
    why: str = ""
    expected: Any = None
    observed: Any = None

    @model_validator(mode="after")
    def _status_agrees(self) -> Verdict:
        if self.passed:
            self.status = "passed"
        elif self.status == "passed":
            self.status = "failed"
        return self


class JudgeResult(ArtifactModel):
    name: str
    kind: Literal["custom_judge", "azure_evaluator"]
    critical: bool = False
    status: Literal["passed", "failed", "error"]
    passed: bool = False
    label: str | None = None
    score: float | None = None
    threshold: float | None = None
    rationale: str | None = None
    model: str | None = None
    model_version: str | None = None
    error: str | None = None
    sent: Any = Field(None, description="the redacted payload the judge received")


class ExecutionFailure(ArtifactModel):
    kind: Literal["endpoint", "persona", "speech", "probe", "judge", "cleanup", "runner",
                  "timeout", "cancelled", "artifacts"]
    message: str
    code: str | None = None


# --- reports ----------------------------------------------------------------------------------

class TrialReport(Versioned):
    trial: int
    trial_id: str
    seed: int
    #: the session id this trial presented to the product (unique per run and trial)
    session_id: str
    #: the ``session_id`` of the run data, from which ``session_id`` is derived
    configured_session_id: str | None = None
    scenario_id: str
    persona: str
    environment: str
    adapter: str
    trace_id: str
    execution_status: Literal["succeeded", "failed"]
    exit_reason: str
    passed: bool
    started_at: str
    ended_at: str
    duration_seconds: float
    user_turns: int = 0
    product_responses: int = 0
    failures: list[ExecutionFailure] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    judges: list[JudgeResult] = Field(default_factory=list)
    outcome_status: Literal["available", "unavailable", "error"] = "unavailable"
    outcome: dict[str, Any] | None = None
    outcome_error: str | None = None
    metrics_summary: dict[str, Any] = Field(default_factory=dict)
    voice_event_schema_versions: list[str] = Field(default_factory=lambda: [SCHEMA_VERSION])
    interoperability_schema_version: str = SCHEMA_VERSION
    audio_format: dict[str, Any] = Field(default_factory=dict)
    files: list[str] = Field(default_factory=list)
    #: the evaluator's loop lagged beyond its tolerances during the call (voice-metrics.json
    #: ``measurement_quality``): timing verdicts are inconclusive
    measurement_degraded: bool = False


class TrialSummary(ArtifactModel):
    trial: int
    trial_id: str
    seed: int
    passed: bool
    execution_status: str
    exit_reason: str
    failed_verdicts: list[str] = Field(default_factory=list)
    first_audio_latency_ms_p50: float | None = None
    first_audio_latency_ms_p95: float | None = None
    path: str
    #: the trial's timings were degraded by the evaluator's own loop lag
    measurement_degraded: bool = False


class PassRate(ArtifactModel):
    """A pass rate with its two-sided confidence interval (``None`` with no trials)."""

    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    method: Literal["wilson", "clopper_pearson"] = "wilson"
    confidence: float = 0.95
    n: int = 0
    passed: int = 0


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


class ProbeOutcome(ArtifactModel):
    """What the product did about one selectivity probe (docs/probes.md). Times are ms on
    the listener timeline."""

    probe_id: str
    kind: Literal["backchannel", "noise", "interruption"]
    #: the turn whose reply was probed, and the user turn of the probe (None: a noise)
    response_turn_id: str
    turn_id: str | None = None
    label: str = ""
    #: the first and last audible sample of the probe's sound on the line
    onset_ms: float
    #: when the line frame carrying the onset was sent: the product can hear the probe from
    #: here (a frame's samples arrive at once), and its reaction is timed from here
    sent_ms: float
    end_ms: float | None = None
    #: when the probe was aimed (after the onset of the reply's speech)
    after_product_speech_ms: float | None = None
    #: False: a noise probe whose reply was over before its moment (``probe.skipped``; its
    #: onset and sent times are that moment); never judged
    played: bool = True
    #: the product's speech was going on at the onset (else nothing to judge: stopped is None)
    product_speaking: bool
    stopped: bool | None = None
    #: ``sent_ms`` to the end of the product's audible speech, when it stopped
    stop_ms: float | None = None
    #: what showed the stop: ``cancelled`` (the response ended cancelled), ``interruption``
    #: (the product said so), ``speech_end`` (its speech ended within the window)
    stop_evidence: Literal["cancelled", "interruption", "speech_end"] | None = None
    #: the product's speech heard after the onset, until its speech ran out
    speech_after_onset_ms: float | None = None
    #: kept talking (backchannel, noise) or stopped (interruption); None: not applicable
    correct: bool | None = None


class SelfInterruption(ArtifactModel):
    """The product stopped or answered while no user speech and no probe was on the line
    (only its own echo, or nothing) in the ``lookback_ms`` before."""

    kind: Literal["stopped", "answered"]
    at_ms: float
    turn_id: str | None = None
    #: stopped: how long the product had been talking; answered: how long it had been quiet
    after_product_speech_ms: float | None = None
    silence_before_ms: float | None = None
    lookback_ms: float


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


class ProbeRow(ProbeOutcome):
    """One probe of a run (run-report.json ``probes``): the trial's outcome with its trial."""

    trial: int


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
    message: str = ""
    #: ``--label``: names the run in frames and reports
    label: str | None = None
    #: the run file, so ``run --resume RUN_DIR`` finds it
    run_file: str | None = None
    resumed_at: list[str] = Field(default_factory=list)
    #: over the trials that ran to an end (interrupted ones are left out; resume runs them)
    pass_rate: PassRate | None = None
    #: every k from 1 to pass_rate.n (in the final report)
    pass_curve: list[PassCurvePoint] = Field(default_factory=list)
    verdict_pass_rates: list[VerdictPassRate] = Field(default_factory=list)
    gates: list[GateCheck] = Field(default_factory=list)
    judge_corrected_pass_rates: list[JudgeCorrectedRate] = Field(default_factory=list)
    #: a replay: the run whose recorded user turns it sent again, trial by trial (same seeds)
    replay_of: ReplayOrigin | None = None


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


# --- timeline and metrics (written as plain dicts for speed; these models give their schemas) --

class PcmInfo(ArtifactModel):
    encoding: Literal["pcm_s16le"]
    sample_rate_hz: int
    channels: int
    byte_count: int
    duration_ms: float


class TraceInfo(ArtifactModel):
    trace_id: str
    span_id: str | None = None
    parent_span_id: str | None = None


class VoiceEvent(ArtifactModel):
    """One line of voice-events.jsonl."""

    contract_version: str
    event_id: str
    sequence: int
    session_id: str
    turn_id: str | None = None
    timestamp_utc: str
    monotonic_offset_ns: int
    listener_offset_ns: int | None = Field(
        None, description="where the simulated listener was: monotonic_offset_ns plus every "
                          "virtual advance before the event (2.0; absent in 1.0 bundles)")
    offset_ms: float
    source: str
    direction: Literal["outbound", "inbound", "internal"]
    event_type: str
    speaker_role: Literal["user", "assistant"] | None = None
    pcm: PcmInfo | None = None
    trace: TraceInfo | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)


#: The seed's signal-analysis fields: one definition, shared with :mod:`voicelab.audio`.
SignalStats = SignalAnalysis


class TurnMetrics(ArtifactModel):
    turn_id: str
    index: int
    status: str
    reference: Literal["commit", "init", "speech_end"] | None = None
    #: end of the user's speech to the onset of the product's speech (listener timeline)
    response_latency_ms: float | None = None
    first_audio_latency_ms: float | None = None
    response_duration_ms: float | None = None
    output_audio_seconds: float
    user_speech_end_ms: float | None = None
    speech_start_ms: float | None = None
    playback_start_ms: float | None = None
    playback_end_ms: float | None = None
    playback_stall_ms: float | None = None
    dead_air_ms: float | None = None
    interrupted: bool
    interruption_stop_latency_ms: float | None = None
    audio_after_interrupt_ms: float | None = None
    transcript: str = ""
    tool_calls: int = 0
    input_speech_to_noise_db: float | None = None
    input: SignalStats | None = None
    output: SignalStats | None = None
    # advisory speech metrics (``speech_metrics: true``): flattened headline numbers, and the
    # full per-role detail under ``speech``
    input_wer: float | None = None
    input_stoi: float | None = None
    input_pesq_wb: float | None = None
    output_completeness: float | None = None
    output_completeness_flagged: bool | None = None
    output_dnsmos_ovrl: float | None = None
    # the product's voice in the reply as heard (advisory, ``speech_metrics: true``; definitions
    # in voicelab/metrics/_product_voice.py and docs/artifacts.md); detail under
    # ``speech["product_voice"]``
    output_speech_rate_onsets_per_s: float | None = None
    output_pitch_median_hz: float | None = None
    output_pitch_range_semitones: float | None = None
    output_loudness_dbfs: float | None = None
    output_pause_count: int | None = None
    output_pause_total_ms: float | None = None
    output_longest_pause_ms: float | None = None
    overlap_with_user_ms: float | None = None
    #: double talk: the product's speech in this response heard while the user's speech (any
    #: user turn, backchannels included) was on the line, in ms
    double_talk_ms: float | None = None
    speech: dict[str, Any] | None = None
    # a telephony line (an environment's ``channel:``): this turn's packets on each direction
    # (``to_product``: the user's turn; ``to_user``: the product's reply as heard); the loss
    # rate counts packets dropped or too late to play. Full counts under ``channel``.
    to_product_packets_sent: int | None = None
    to_product_packets_dropped: int | None = None
    to_product_loss_rate: float | None = None
    to_user_packets_sent: int | None = None
    to_user_packets_dropped: int | None = None
    to_user_loss_rate: float | None = None
    channel: dict[str, Any] | None = None
    #: how late this response's timing stamps (its audio chunks' and response.done's arrivals)
    #: may be, from the evaluator's loop lag around them, in ms (0: no late tick near them);
    #: ``None``: not judged per turn (docs/artifacts.md, measurement_quality)
    stamp_error_bound_ms: float | None = None
    #: the bound exceeds the ``measurement`` tolerances: this turn's timing figures cannot be
    #: trusted, and a timing verdict resting on it is inconclusive
    timing_degraded: bool | None = None


class MetricSummary(ArtifactModel):
    count: int
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None


class LoopLag(ArtifactModel):
    """How late the evaluator's event loop ran while the conversation went: a ticker asleep for
    ``interval_ms`` at a time, and the lateness of each wake-up (actual minus intended, ms, on
    the recording's monotonic clock). ``None`` statistics: no tick completed."""

    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    ticks: int = 0
    interval_ms: float


class MeasurementTolerances(ArtifactModel):
    """The loop-lag bounds a trial's timings were judged against (run config ``measurement``)."""

    max_loop_lag_p99_ms: float
    max_loop_lag_max_ms: float


class MeasurementQuality(ArtifactModel):
    """Whether the trial's timing metrics can be trusted. ``degraded``: the loop lagged beyond a
    tolerance around some turn's arrivals (``degraded_turns``), so their stamps (and every
    latency, stall and dead-air figure built on them) may be late by up to the lag; the metrics
    are still written, the timing verdicts resting on those turns are ``inconclusive``. ``loop_lag_ms`` is ``None`` when the lag was not measured (a bundle
    written before it was)."""

    loop_lag_ms: LoopLag | None = None
    tolerances: MeasurementTolerances
    degraded: bool = False
    reasons: list[str] = Field(default_factory=list)
    #: ``turn``: judged per turn from the lag around each turn's timing stamps (the turns'
    #: ``stamp_error_bound_ms``); ``trial``: on the whole conversation's ``loop_lag_ms`` (a
    #: bundle recorded before the late ticks were kept)
    scope: Literal["turn", "trial"] = "trial"
    #: the turns whose timings cannot be trusted (``scope: turn``)
    degraded_turns: list[str] = Field(default_factory=list)


class VoiceMetrics(Versioned):
    audio_format: dict[str, Any]
    #: the simulated listener the timing metrics assume (jitter buffer depth, reply hangover)
    listener: dict[str, Any] = Field(default_factory=dict)
    #: the telephony line, per direction: its parameters and whole-call packet counts (empty:
    #: a clean line both ways)
    channel: dict[str, Any] = Field(default_factory=dict)
    input: SignalStats
    output: SignalStats
    turns: list[TurnMetrics] = Field(default_factory=list)
    summary: dict[str, MetricSummary] = Field(default_factory=dict)
    #: selectivity probes and self-interruptions (docs/probes.md); the echo path, when the
    #: environment has one
    probes: list[ProbeOutcome] = Field(default_factory=list)
    self_interruptions: list[SelfInterruption] = Field(default_factory=list)
    echo: dict[str, Any] | None = None
    #: the evaluator's own event-loop lag during the call, and whether it degraded the timings
    measurement_quality: MeasurementQuality | None = None


class Interoperability(Versioned):
    session_id: str
    scenario_id: str
    trial: dict[str, Any]
    trace: dict[str, Any]
    metrics: dict[str, Any]
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    verdicts: list[dict[str, Any]] = Field(default_factory=list)
    judges: list[dict[str, Any]] = Field(default_factory=list)
    outcome: dict[str, Any] = Field(default_factory=dict)
    imported_scores: dict[str, Any] = Field(default_factory=dict)


class ResolvedDocument(Versioned):
    kind: Literal["scenario", "persona", "data", "environment", "script", "settings"]
    source: str | None = None
    resolved: Any = None


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
