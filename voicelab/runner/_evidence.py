"""From a recording to the bundle's evidence: the same code after a call and in ``rescore``.

Everything here is a pure function of the recording (and, for verdicts, of the scenario, the
persona and what the trial report says about the execution), so re-scoring a bundle reproduces
its documents byte for byte.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._steps import Steps, arun_steps, run_steps
from ..artifacts import (
    INTEROPERABILITY,
    MIXED_WAV,
    PRODUCT_RECEIVED_WAV,
    PRODUCT_WAV,
    RAW_ENDPOINT_EVENTS,
    SCHEMA_VERSION,
    TOOL_CALLS,
    TRANSCRIPT_JSON,
    TRANSCRIPT_MD,
    USER_CLEAN_WAV,
    USER_HEARD_WAV,
    USER_SENT_WAV,
    USER_WAV,
    VOICE_EVENTS,
    VOICE_METRICS,
    EncodedFile,
    JudgeResult,
    ToolCalls,
    Transcript,
    TrialReport,
    Usage,
    Verdict,
    VoiceMetrics,
    encode_trial_files,
)
from ..config import MeasurementConfig, PersonaConfig, ScenarioConfig, ScriptConfig
from ..metrics import (
    NO_ENTITIES,
    STEP_EVENTS,
    EntityPlan,
    Placement,
    TurnMetric,
    add_speech_metrics,
    add_words_per_minute,
    compute_voice_metrics_steps,
    entity_metrics,
    measurement_quality,
    place_channels_steps,
)
from ..personas import REPLAY_MODE, SCRIPTED_MODE
from ..recording import (
    PRODUCT,
    USER,
    USER_CLEAN,
    USER_HEARD,
    EventType,
    Recording,
    build_raw_events,
    build_tool_calls,
    build_transcript,
    encode_voice_events,
    transcript_markdown,
)
from ..scoring import BUILTIN_VERDICTS, TrialEvidence, VerdictCheck, judge_verdicts
from ._report import CallEnding, TrialScore
from ._transcription import WIRE_ONLY, ProductTranscription, transcribe_product

#: The bundle's arrival-ordered audio streams (what was sent and received, as it happened).
STREAM_FILES = {USER: USER_SENT_WAV, PRODUCT: PRODUCT_RECEIVED_WAV,
                USER_CLEAN: USER_CLEAN_WAV, USER_HEARD: USER_HEARD_WAV}


@dataclass
class Evidence:
    """What a trial's bundle holds besides its configuration and reports."""

    voice_events: bytes
    placement: Placement
    metrics: VoiceMetrics
    transcript: Transcript
    tool_calls: ToolCalls
    raw_events: dict[str, Any]  # raw-endpoint-events.json (large: plain data, not a model)
    #: what recognizing the product's audio used (docs/cost.md)
    recognition: list[Usage] = field(default_factory=list)
    #: the script turns the user began to say (``user.turn_started``'s ``script_index``)
    said_script_turns: frozenset[int] = frozenset()
    #: when the call connected (ms on the listener timeline; None: not recorded)
    connected_ms: float | None = None

    @property
    def degraded(self) -> bool:
        """The evaluator's loop lag made the trial's timings untrustworthy."""
        quality = self.metrics.measurement_quality
        return quality is not None and quality.degraded


def evidence_steps(recording: Recording, *, adapter: str,
                   turn_metrics: Sequence[TurnMetric] = ()) -> Steps[Evidence]:
    """Voice events, placement, metrics and documents, in steps of well under a millisecond.

    Built in the scoring process (all steps at once), or on the event loop (:mod:`._scoring`),
    never in a worker thread of the loop's process: a CPU-bound thread takes the GIL each time
    the loop thread makes a socket call, and every concurrent conversation waits for it. On the
    loop, between steps, it timestamps what has arrived for other trials, so their measurements
    stay within a step of the truth.
    """
    encoded: list[bytes] = []
    for start in range(0, len(recording.events), STEP_EVENTS):
        encoded.append(encode_voice_events(recording, start, start + STEP_EVENTS))
        yield
    placement = yield from place_channels_steps(recording)
    metrics = yield from compute_voice_metrics_steps(recording, placement, turn_metrics)
    transcript = build_transcript(recording)
    tool_calls = build_tool_calls(recording)
    yield
    raw_events = build_raw_events(recording, adapter)
    return Evidence(b"".join(encoded), placement, metrics, transcript, tool_calls, raw_events,
                    said_script_turns=said_script_turns(recording),
                    connected_ms=connected_ms(recording))


def followed_script(persona_mode: object, script: ScriptConfig | None) -> ScriptConfig | None:
    """The script the trial's persona followed: the run's script under the scripted persona,
    and under a replay (which keeps only a scripted run's script: it says the same lines, each
    with its script index, and is judged the same); ``None`` for every other persona (an LLM
    persona is given no script to follow)."""
    return script if persona_mode in (SCRIPTED_MODE, REPLAY_MODE) else None


def said_script_turns(recording: Recording) -> frozenset[int]:
    """The indices of the script turns the user began to say: a scripted persona's turn carries
    its ``script_index`` on ``user.turn_started`` (repeat requests and other personas' turns
    carry none)."""
    said: set[int] = set()
    for event in recording.events:
        if event.type is EventType.USER_TURN_STARTED:
            index = event.attributes.get("script_index")
            if isinstance(index, int) and not isinstance(index, bool):
                said.add(index)
    return frozenset(said)


def connected_ms(recording: Recording) -> float | None:
    """When the call connected, on the listener timeline (``reached_agent`` times from it)."""
    connected = next(recording.of_type(EventType.CONNECTED), None)
    return None if connected is None else round(connected.listener_ns / 1e6, 3)


def _judge_measurement(evidence: Evidence, recording: Recording,
                       measurement: MeasurementConfig) -> Evidence:
    evidence.metrics.measurement_quality = measurement_quality(recording, measurement,
                                                               evidence.metrics.turns)
    return evidence


def _recognized_and_measured(evidence: Evidence, recording: Recording, *,
                             speech_metrics: bool, transcription: ProductTranscription,
                             entities: EntityPlan = NO_ENTITIES) -> Evidence:
    """The product's words recognized where ``transcription`` says, the product's speaking
    rate and the scenario's entities (both read the final words), then the speech metrics
    (which read where each transcript came from)."""
    evidence.recognition = transcribe_product(recording, evidence.transcript, evidence.metrics,
                                              transcription)
    add_words_per_minute(evidence.metrics)
    evidence.metrics.entities = entity_metrics(recording, evidence.transcript,
                                               evidence.tool_calls, entities)
    if speech_metrics:
        add_speech_metrics(recording, evidence.metrics, placement=evidence.placement)
    return evidence


async def assemble(recording: Recording, *, adapter: str, speech_metrics: bool,
                   measurement: MeasurementConfig,
                   transcription: ProductTranscription = WIRE_ONLY,
                   entities: EntityPlan = NO_ENTITIES,
                   turn_metrics: Sequence[TurnMetric] = ()) -> Evidence:
    """``measurement``: the tolerances the trial's loop lag is judged against;
    ``transcription``: which responses are recognized from their audio; ``entities``: the
    scenario's key entities to check (recognized audio too); ``turn_metrics``: the run
    file's own per-response metrics."""
    evidence = _judge_measurement(await arun_steps(evidence_steps(
        recording, adapter=adapter, turn_metrics=turn_metrics)), recording, measurement)
    if speech_metrics or entities.checks \
            or transcription.to_recognize(recording, evidence.transcript):
        # seconds of numeric work (ASR, STOI, DNSMOS, pitch): a worker thread
        return await asyncio.to_thread(_recognized_and_measured, evidence, recording,
                                       speech_metrics=speech_metrics,
                                       transcription=transcription, entities=entities)
    return _recognized_and_measured(evidence, recording, speech_metrics=False,
                                    transcription=transcription)


def assemble_now(recording: Recording, *, adapter: str, speech_metrics: bool,
                 measurement: MeasurementConfig,
                 transcription: ProductTranscription = WIRE_ONLY,
                 entities: EntityPlan = NO_ENTITIES,
                 turn_metrics: Sequence[TurnMetric] = ()) -> Evidence:
    """:func:`assemble` without an event loop (``rescore``, the scoring process)."""
    evidence = _judge_measurement(run_steps(evidence_steps(
        recording, adapter=adapter, turn_metrics=turn_metrics)), recording, measurement)
    return _recognized_and_measured(evidence, recording, speech_metrics=speech_metrics,
                                    transcription=transcription, entities=entities)


def verdicts_of(evidence: Evidence, *, scenario: ScenarioConfig, persona: PersonaConfig,
                exit_reason: str, outcome_status: str, outcome: Mapping[str, Any] | None,
                outcome_error: str | None, script: ScriptConfig | None = None,
                checks: Sequence[VerdictCheck] = BUILTIN_VERDICTS,
                kept: Sequence[Verdict] = ()) -> list[Verdict]:
    """Every verdict of ``checks`` (the run's: :func:`voicelab.scoring.verdict_checks`) on
    the trial's evidence, then ``kept`` (verdicts a re-score carries over as recorded)."""
    return judge_verdicts(TrialEvidence(
        scenario=scenario, persona=persona, transcript=evidence.transcript.turns,
        tool_calls=evidence.tool_calls.tool_calls, exit_reason=exit_reason,
        outcome_status=outcome_status, outcome=outcome, outcome_error=outcome_error,
        turn_metrics=evidence.metrics.turns,
        probes=evidence.metrics.probes, measurement=evidence.metrics.measurement_quality,
        entities=evidence.metrics.entities, script=script,
        said_script_turns=evidence.said_script_turns,
        connected_ms=evidence.connected_ms), checks, kept)


def score_of(evidence: Evidence, ending: CallEnding, judges: Sequence[JudgeResult], *,
             scenario: ScenarioConfig, persona: PersonaConfig,
             script: ScriptConfig | None = None,
             checks: Sequence[VerdictCheck] = BUILTIN_VERDICTS,
             kept: Sequence[Verdict] = ()) -> TrialScore:
    """What the trial report says of the evidence: the verdicts (of the evidence and of how
    the call ended), the judges' results, the metrics' summary and whether the timings were
    degraded. ``script``: the script a scripted persona followed (``None`` otherwise);
    ``checks`` and ``kept``: see :func:`verdicts_of`."""
    verdicts = verdicts_of(evidence, scenario=scenario, persona=persona,
                           exit_reason=ending.exit_reason, outcome_status=ending.outcome_status,
                           outcome=ending.outcome, outcome_error=ending.outcome_error,
                           script=script, checks=checks, kept=kept)
    return TrialScore(verdicts=verdicts, judges=list(judges),
                      metrics_summary=evidence.metrics.model_dump(mode="json")["summary"],
                      measurement_degraded=evidence.degraded)


def interoperability(report: TrialReport, evidence: Evidence, recording: Recording
                     ) -> dict[str, Any]:
    metrics = evidence.metrics.model_dump(mode="json")
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": report.session_id,
        "scenario_id": report.scenario_id,
        "trial": {"index": report.trial, "id": report.trial_id, "seed": report.seed,
                  "passed": report.passed, "exit_reason": report.exit_reason,
                  "execution_status": report.execution_status},
        "trace": {"trace_id": recording.trace_id, "root_span_id": recording.root_span_id},
        "metrics": {"summary": metrics["summary"],
                    "turns": [{k: v for k, v in turn.items() if k not in ("input", "output")}
                              for turn in metrics["turns"]]},
        "transcript": evidence.transcript.model_dump(mode="json")["turns"],
        "tool_calls": evidence.tool_calls.model_dump(mode="json")["tool_calls"],
        "verdicts": [v.model_dump(mode="json") for v in report.verdicts],
        "judges": [j.model_dump(mode="json") for j in report.judges],
        "outcome": {"status": report.outcome_status, "values": report.outcome},
        "imported_scores": {},
    }


def evidence_files(recording: Recording, evidence: Evidence, report: TrialReport, *,
                   title: str, keep_clean_speech: bool,
                   extra_documents: Mapping[str, Any] | None = None,
                   extra_texts: Mapping[str, str] | None = None) -> Steps[list[EncodedFile]]:
    """Every file of a trial's bundle but its report, serialized, one document per step."""
    placement = evidence.placement
    streams = {STREAM_FILES[USER]: recording.streams[USER].audio(),
               STREAM_FILES[PRODUCT]: recording.streams[PRODUCT].audio()}
    if keep_clean_speech:
        streams[STREAM_FILES[USER_CLEAN]] = recording.streams[USER_CLEAN].audio()
    if USER_HEARD in recording.streams:  # a to_user telephony line: what the user heard
        streams[STREAM_FILES[USER_HEARD]] = recording.streams[USER_HEARD].audio()
    files = encode_trial_files(
        documents={}, encoded={VOICE_EVENTS: evidence.voice_events},
        texts={TRANSCRIPT_MD: transcript_markdown(evidence.transcript, title=title),
               **(extra_texts or {})},
        audio={USER_WAV: placement.user, PRODUCT_WAV: placement.product,
               MIXED_WAV: placement.mixed, **streams})
    documents: dict[str, Any] = {
        TRANSCRIPT_JSON: evidence.transcript,
        TOOL_CALLS: evidence.tool_calls,
        RAW_ENDPOINT_EVENTS: evidence.raw_events,
        VOICE_METRICS: evidence.metrics,
        INTEROPERABILITY: interoperability(report, evidence, recording),
        **(extra_documents or {}),
    }
    for name, document in documents.items():
        yield
        files += encode_trial_files(documents={name: document}, texts={}, audio={})
    return files


def failed_verdict_names(verdicts: Sequence[Verdict], judges: Sequence[Any]) -> list[str]:
    """The verdicts that failed (not the undecided ones) and the judges that did not pass."""
    return [v.name for v in verdicts if v.status == "failed"] \
        + [j.name for j in judges if not j.passed]


def inconclusive_verdict_names(verdicts: Sequence[Verdict]) -> list[str]:
    return [v.name for v in verdicts if v.status == "inconclusive"]
