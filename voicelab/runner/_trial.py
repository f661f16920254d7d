"""One trial: its call (conversation, cleanup, outcome probe), then its scoring (:mod:`._scoring`)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._atomic import make_folder
from ..artifacts import (
    PERSONA_SESSION,
    PRODUCT_LOG,
    SCHEMA_VERSION,
    TRIAL_REPORT,
    ExecutionFailure,
    LoopLag,
    ProbeOutcome,
    TrialReport,
    TrialSummary,
    TurnMetrics,
    filter_model,
    trial_folder,
    write_json,
)
from ..audio import CANONICAL_FORMAT, PcmAudio, PreparedEnvironment
from ..config import LoadedRun
from ..endpoints import (
    AdapterAbilities,
    EndpointContext,
    EndpointError,
    EndpointSettings,
    HasOutcomeProbe,
    LineChunkSettings,
    ProductProcess,
    abilities_of,
    line_chunk_ms_of,
    new_span_id,
    new_trace_id,
)
from ..errors import ConfigError
from ..metrics import late_ticks_record
from ..personas import KeepsEvidence, PersonaContext
from ..recording import (
    EventType,
    OutcomeProbed,
    Recording,
    TrialEnded,
    TrialStarted,
)
from ._conversation import Conversation
from ._conversation_end import Failure
from ._evidence import failed_verdict_names, inconclusive_verdict_names
from ._intake import AudioFloodLimit
from ._listening import ServerVadConversation
from ._loop_lag import PACED_TICK_INTERVAL_MS, loop_monitor
from ._playback import PlaybackClock
from ._report import (
    CallEnding,
    CallTiming,
    TrialIdentity,
    configured_session_id,
    recorded_outcome,
    trial_report,
)
from ._retention import run_redactor
from ._scoring import Call, Scored, score_on_loop

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 30.0


@dataclass
class TrialPlan:
    loaded: LoadedRun
    index: int
    seed: int
    trial_dir: Path
    environment: PreparedEnvironment
    adapter_cls: type
    persona_cls: type
    speech: Any
    probe_factory: Any = None
    speech_metrics: bool = False
    run_id: str = ""
    script_audio: Mapping[int, PcmAudio] = field(default_factory=dict)
    turn_taking: str = "client"
    #: ``endpoint.settings`` as validation parsed them (the adapter is built with them);
    #: None: the run config's mapping, parsed by the adapter
    endpoint_settings: EndpointSettings | None = None
    #: a product launched once for the run: the endpoint settings it filled (its port), or
    #: why it could not start
    run_product_settings: Mapping[str, Any] | None = None
    run_product_failure: Failure | None = None
    #: 1, or the number of this run of an inconclusive trial (its own session id)
    attempt: int = 1

    @property
    def abilities(self) -> AdapterAbilities:
        """What the adapter can do beyond the protocol (resolved once per class)."""
        return abilities_of(self.adapter_cls)


@dataclass
class TrialResult:
    report: TrialReport
    summary: TrialSummary
    cancelled: bool = False
    turn_metrics: list[TurnMetrics] = field(default_factory=list)
    probes: list[ProbeOutcome] = field(default_factory=list)
    #: the event loop's lag while the conversation ran (``None``: it did not run)
    loop_lag: LoopLag | None = None


def trial_summary(report: TrialReport) -> TrialSummary:
    """The run report's line for a trial: from its report alone (a resumed run reads it back)."""
    latency = report.metrics_summary.get("first_audio_latency_ms") or {}
    return TrialSummary(
        trial=report.trial, trial_id=report.trial_id, seed=report.seed, passed=report.passed,
        execution_status=report.execution_status, exit_reason=report.exit_reason,
        failed_verdicts=failed_verdict_names(report.verdicts, report.judges),
        first_audio_latency_ms_p50=latency.get("p50"),
        first_audio_latency_ms_p95=latency.get("p95"), path=report.trial_id,
        measurement_degraded=report.measurement_degraded, status=report.status,
        inconclusive_verdicts=inconclusive_verdict_names(report.verdicts),
        attempts=report.attempt)


#: A run id longer than this is shortened (with a digest, so it stays unique) inside session ids.
RUN_TOKEN_MAX_CHARS = 32


def trial_session_id(loaded: LoadedRun, index: int, run_id: str, *, attempt: int = 1) -> str:
    """The session id this trial presents to the product (``evaluator.init`` and the probe).

    Unique per run and trial, so a product shared by several runs can never answer the probe of
    one trial with another's rows; it keeps the configured id (or the scenario id) readable in
    front: ``planning-session-001-20261201T065000Z-1a2b3c-t001``. A trial run again (an
    inconclusive attempt) is a new session: ``...-t001-a2``, so state the product persisted
    for the earlier attempt never answers the new one's outcome probe.
    """
    base = configured_session_id(loaded) or loaded.scenario.id
    token = run_id or "run"
    if len(token) > RUN_TOKEN_MAX_CHARS:
        digest = hashlib.sha256(token.encode()).hexdigest()[:8]
        token = f"{token[:RUN_TOKEN_MAX_CHARS - 9]}-{digest}"
    again = f"-a{attempt}" if attempt > 1 else ""
    return f"{base}-{token}-t{index:03d}{again}"


#: The live line's chunk when an adapter's settings have none.
DEFAULT_CHUNK_MS = 100.0


def line_chunk_ms(endpoint: object, settings: EndpointSettings) -> float:
    """How often the live line hands the adapter audio: the adapter's own ``chunk_ms``, its
    settings model's default included (pipecat's 20 ms), else what the settings say, else
    ``DEFAULT_CHUNK_MS``."""
    parsed = line_chunk_ms_of(endpoint)
    if parsed is not None:
        return parsed
    given: object = None
    if isinstance(settings, LineChunkSettings):
        given = settings.chunk_ms
    elif isinstance(settings, Mapping):
        given = settings.get("chunk_ms")
    if isinstance(given, int | float) and not isinstance(given, bool) and given > 0:
        return float(given)
    return DEFAULT_CHUNK_MS


def trial_data(loaded: LoadedRun, session_id: str) -> dict[str, Any]:
    """The opaque run data as this trial sends it: the configured data with its session id."""
    return {**loaded.data, "session_id": session_id}


def effective_max_turns(loaded: LoadedRun) -> int:
    limits = loaded.scenario.eval_spec.limits.max_turns
    conversation = loaded.scenario.conversation.max_turns
    return min(conversation, limits) if limits is not None else conversation


def _flood_limit(loaded: LoadedRun) -> AudioFloodLimit:
    limits = loaded.scenario.eval_spec.limits
    return AudioFloodLimit(speed=limits.max_product_audio_speed,
                           burst_seconds=limits.product_audio_burst_seconds,
                           max_total_seconds=limits.max_time_seconds)


async def _run_probe(plan: TrialPlan, endpoint: object, session_id: str, scrubber: Any
                     ) -> tuple[str, dict[str, Any] | None, str | None, str]:
    probe = None
    name = "none"
    try:
        if plan.probe_factory is not None:
            probe = plan.probe_factory()
            name = type(probe).__name__
        elif isinstance(endpoint, HasOutcomeProbe):
            probe = endpoint.outcome_probe()
            name = type(probe).__name__ if probe is not None else "none"
    except Exception as error:  # noqa: BLE001 - a broken probe is an outcome error, not a crash
        return "error", None, scrubber.scrub_text(f"{type(error).__name__}: {error}"), name
    if probe is None:
        return "unavailable", None, "no outcome probe is configured", name
    loaded = plan.loaded
    context = {"session_id": session_id, "configured_session_id": configured_session_id(loaded),
               "data": trial_data(loaded, session_id), "scenario_id": loaded.scenario.id,
               "trial_index": plan.index, "seed": plan.seed}
    try:
        outcome = await asyncio.wait_for(probe.probe(context), PROBE_TIMEOUT_SECONDS)
    except TimeoutError:
        return "error", None, f"the outcome probe timed out after {PROBE_TIMEOUT_SECONDS:g} s", name
    except Exception as error:  # noqa: BLE001
        return "error", None, scrubber.scrub_text(f"{type(error).__name__}: {error}"), name
    if outcome is None:
        return "unavailable", None, "the product has no record for this session", name
    if not isinstance(outcome, Mapping):
        return "error", None, f"the probe returned {type(outcome).__name__}, not a mapping", name
    return "available", scrubber.scrub(dict(outcome)), None, name


async def run_call(plan: TrialPlan) -> Call:
    """The trial's call: the conversation, its cleanup and the outcome probe; what it left is
    scored afterwards (:mod:`._scoring`), here or in the scoring process."""
    loaded = plan.loaded
    session_id = trial_session_id(loaded, plan.index, plan.run_id, attempt=plan.attempt)
    recording = _started_recording(plan, session_id)
    playback = PlaybackClock(recording)
    settings, product, launch_failure = await _launch_per_trial(plan, recording)
    endpoint = await _built_endpoint(plan, settings, _endpoint_context(
        plan, recording, session_id, playback), product)
    persona = plan.persona_cls(loaded.run.persona_settings, PersonaContext.for_trial(
        loaded, trial_index=plan.index, seed=plan.seed, script_audio=plan.script_audio,
        usage=recording.usage_recorder("persona")))
    conversation = _conversation(plan, endpoint, persona, recording, settings)
    cancelled = await _converse(plan, conversation, recording, launch_failure)

    outcome_status, outcome, outcome_error, probe_name = await _run_probe(
        plan, endpoint, session_id, loaded.scrubber)
    playback.release()  # the recording is freed with the trial, whatever holds the adapter
    recording.record(EventType.OUTCOME_PROBED, OutcomeProbed(
        probe=probe_name, status=outcome_status, error=outcome_error,
        outcome=recorded_outcome(outcome) if outcome is not None else None),
        source="probe", direction="internal")
    texts: dict[str, str] = {}
    if product is not None:  # stopped after the probe: a probe may ask the running product
        await product.stop()
        texts[PRODUCT_LOG] = product.log_text()
    return Call(recording=recording, index=plan.index, seed=plan.seed,
                trial_dir=plan.trial_dir, speech_metrics=plan.speech_metrics, texts=texts,
                documents=_persona_documents(persona, loaded.scrubber), cancelled=cancelled)


def _started_recording(plan: TrialPlan, session_id: str) -> Recording:
    """The trial's recording, opened with ``trial.started``."""
    trace_id, root_span = new_trace_id(), new_span_id()
    recording = Recording(session_id=session_id, trace_id=trace_id, root_span_id=root_span)
    recording.record(EventType.TRIAL_STARTED, TrialStarted(
        trial=plan.index, seed=plan.seed, clock_start_ns=recording.start_ns,
        clock="time.perf_counter_ns", turn_taking=plan.turn_taking,
        listener=plan.loaded.run.listener.model_dump(mode="json"),
        capabilities=dict(plan.abilities.capabilities)),
        source="runner", direction="internal", span_id=root_span)
    return recording


def _endpoint_context(plan: TrialPlan, recording: Recording, session_id: str,
                      playback: PlaybackClock) -> EndpointContext:
    loaded = plan.loaded
    return EndpointContext(session_id=session_id, data=trial_data(loaded, session_id),
                           trace_id=recording.trace_id, span_id=recording.root_span_id,
                           audio_format=CANONICAL_FORMAT, scrubber=loaded.scrubber,
                           clock_ns=recording.clock_ns, base_dir=loaded.base_dir,
                           trial_index=plan.index, seed=plan.seed,
                           scenario_id=loaded.scenario.id, playback=playback,
                           usage=recording.usage_recorder("product"))


def _endpoint_settings(plan: TrialPlan) -> EndpointSettings:
    """What the adapter is built with: the settings validation parsed, or, for a launched
    product, the settings its launch filled (its port is known only then: the adapter parses
    them)."""
    loaded = plan.loaded
    if plan.run_product_settings is not None:
        return plan.run_product_settings
    if loaded.run.endpoint.launch is None and plan.endpoint_settings is not None:
        return plan.endpoint_settings
    return loaded.run.endpoint.settings


async def _launch_per_trial(plan: TrialPlan, recording: Recording
                            ) -> tuple[EndpointSettings, ProductProcess | None, Failure | None]:
    """The endpoint settings, the product launched for this trial (when the run launches one
    per trial) and why it could not start (None when it did, or another launched it)."""
    loaded = plan.loaded
    launch = loaded.run.endpoint.launch
    if launch is None or launch.per != "trial":
        return _endpoint_settings(plan), None, plan.run_product_failure
    settings: Mapping[str, Any] = loaded.run.endpoint.settings
    product = ProductProcess(launch, settings=settings, base_dir=loaded.base_dir,
                             scrubber=loaded.scrubber, clock_ns=recording.clock_ns)
    try:
        await product.start()
    except EndpointError as error:
        return settings, product, Failure("endpoint", loaded.scrubber.scrub_text(str(error)),
                                          error.code)
    return product.settings, product, plan.run_product_failure


async def _built_endpoint(plan: TrialPlan, settings: EndpointSettings,
                          context: EndpointContext, product: ProductProcess | None) -> Any:
    """The adapter, built; bad settings stop the run (a ConfigError naming the run file)."""
    try:
        return plan.adapter_cls(settings, context)
    except (ConfigError, ValueError, TypeError) as error:
        if product is not None:
            await product.stop()
        if isinstance(error, ConfigError):
            raise ConfigError(error.message, source=plan.loaded.run_path,
                              key=error.key or "endpoint.settings") from None
        raise ConfigError(str(error), source=plan.loaded.run_path,
                          key="endpoint.settings") from None


def _conversation(plan: TrialPlan, endpoint: Any, persona: Any, recording: Recording,
                  settings: EndpointSettings) -> Conversation:
    loaded = plan.loaded
    conversation_class = ServerVadConversation if plan.turn_taking == "server_vad" \
        else Conversation
    return conversation_class(
        endpoint=endpoint, persona=persona, speech=plan.speech, environment=plan.environment,
        recording=recording, seed=plan.seed,
        voice=loaded.script.persona_voice if loaded.script else None,
        pace_audio=loaded.run.pace_audio,
        first_speaker=loaded.scenario.conversation.first_speaker,
        first_speaker_wait_seconds=loaded.scenario.conversation.first_speaker_wait_seconds,
        max_turns=effective_max_turns(loaded),
        response_timeout_seconds=loaded.scenario.eval_spec.response_timeout_seconds,
        chunk_ms=line_chunk_ms(endpoint, settings), scrubber=loaded.scrubber,
        flood_limit=_flood_limit(loaded), listener=loaded.run.listener,
        abilities=plan.abilities,
        max_time_seconds=loaded.scenario.eval_spec.limits.time_limit_seconds)


async def _converse(plan: TrialPlan, conversation: Conversation, recording: Recording,
                    launch_failure: Failure | None) -> bool:
    """The conversation to its end and its shutdown, recorded as ``trial.ended``; whether the
    run was interrupted (cancelled) meanwhile."""
    loaded = plan.loaded
    scrubber = loaded.scrubber
    cancelled = False
    # the conversation keeps its listener's clock to the limit too (an unpaced trial's runs
    # ahead of real time); this keeps real time to it, whatever the conversation waits for
    max_time = loaded.scenario.eval_spec.limits.time_limit_seconds
    lag_monitor = loop_monitor()
    # closed with the conversation (or dropped with the trial); real-time calls watched finely
    lag_window = lag_monitor.open(
        interval_ms=PACED_TICK_INTERVAL_MS
        if loaded.run.pace_audio or plan.turn_taking == "server_vad" else None)
    try:
        if launch_failure is not None:  # no product to talk to
            conversation.failures.append(launch_failure)
            exit_reason = "error"
        else:
            async with asyncio.timeout(max_time):
                exit_reason = await conversation.run()
    except TimeoutError:
        exit_reason = "max_time"
    except asyncio.CancelledError:
        cancelled = True
        exit_reason = "cancelled"
        conversation.failures.append(Failure("cancelled", "the run was interrupted"))
    except Exception as error:  # noqa: BLE001 - an adapter/persona bug must not lose the trial
        logger.exception("trial %s failed", trial_folder(plan.index))
        exit_reason = "error"
        conversation.failures.append(Failure("runner", scrubber.scrub_text(
            f"{type(error).__name__}: {error}")))
    try:
        await conversation.shutdown()
    except asyncio.CancelledError:  # interrupted while closing: the call's evidence is kept
        if not cancelled:
            cancelled = True
            conversation.failures.append(Failure("cancelled", "the run was interrupted"))
    loop_lag = lag_monitor.close(lag_window)
    recording.record(EventType.TRIAL_ENDED, TrialEnded.ending(
        exit_reason=exit_reason, loop_lag=loop_lag.model_dump(mode="json"),
        late_ticks=late_ticks_record(lag_window.late_tick_pairs(start_ns=recording.start_ns)),
        failures=[ExecutionFailure(kind=f.kind, message=f.message, code=f.code)
                  for f in conversation.failures],
        user_turns=conversation.user_turns,
        product_responses=len(conversation.intake.responses)),
        source="runner", direction="internal")
    return cancelled


def _persona_documents(persona: object, scrubber: Any) -> dict[str, Any]:
    """``persona-session.json`` when the persona keeps evidence of its session."""
    session_evidence = persona.evidence() if isinstance(persona, KeepsEvidence) else {}
    if not session_evidence:
        return {}
    return {PERSONA_SESSION: {"schema_version": SCHEMA_VERSION,
                              **scrubber.scrub(session_evidence)}}


def scored_result(call: Call, scored: Scored) -> TrialResult:
    return TrialResult(scored.report, trial_summary(scored.report), cancelled=call.cancelled,
                       turn_metrics=scored.turn_metrics, probes=scored.probes,
                       loop_lag=call.loop_lag)


async def run_trial(plan: TrialPlan) -> TrialResult:
    """Run one trial and write its bundle, scored on this event loop (a worker process's)."""
    call = await run_call(plan)
    result = scored_result(call, await score_on_loop(plan.loaded, call))
    if call.cancelled:
        raise _TrialCancelled(result)
    return result


class _TrialCancelled(asyncio.CancelledError):
    def __init__(self, result: TrialResult):
        super().__init__("trial cancelled")
        self.result = result


def crashed_trial(plan: TrialPlan, error: BaseException, *, started_wall: float) -> TrialResult:
    """A trial that ended in an error outside the conversation's own handling (a bug in an
    adapter's constructor, in evidence assembly...): reported as a failed execution, with a
    trial report written when the disk allows, so no planned trial silently disappears."""
    loaded = plan.loaded
    trial_id = trial_folder(plan.index)
    message = loaded.scrubber.scrub_text(f"{type(error).__name__}: {error}")
    report = unscored_report(loaded, index=plan.index, seed=plan.seed, run_id=plan.run_id,
                             attempt=plan.attempt,
                             failure=ExecutionFailure(kind="runner", message=message),
                             started_wall=started_wall, ended_wall=time.time(),
                             files=[TRIAL_REPORT])
    try:
        make_folder(plan.trial_dir)
        write_json(plan.trial_dir / TRIAL_REPORT, filter_model(report, run_redactor(plan.loaded)))
    except OSError as write_error:
        logger.error("%s: the trial report could not be written: %s", trial_id,
                     write_error.strerror or type(write_error).__name__)
    return TrialResult(report, trial_summary(report))


def unscored_report(loaded: LoadedRun, *, index: int, seed: int, run_id: str, attempt: int,
                    failure: ExecutionFailure, started_wall: float, ended_wall: float,
                    files: Sequence[str]) -> TrialReport:
    """The report of a trial that failed before it could be scored (it crashed, its worker
    was lost): the failure, and the files its folder holds."""
    identity = TrialIdentity.of_run(
        loaded, index=index, seed=seed,
        session_id=trial_session_id(loaded, index, run_id, attempt=attempt))
    return trial_report(identity, CallEnding.failed(failure),
                        CallTiming.between(started_wall, ended_wall), files=files)


def new_run_id() -> str:
    return datetime.now(tz=UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
