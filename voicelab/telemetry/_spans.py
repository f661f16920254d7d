"""A trial as spans: which spans, their parents, times and attributes (no OpenTelemetry import).

The plan is a pure function of the trial's report, its per-turn metrics and its timeline
(:mod:`._timeline`), so it is tested without a collector and exported the same way live or from
an old bundle. Times are the recording's clock: the UTC time of its zero plus monotonic offsets
(the real clock the product's own spans use, also in an unpaced run whose listener timeline ran
ahead); the timing figures themselves (response latency, dead air) are the metrics' own, as
attributes. Attribute names follow the OpenTelemetry semantic conventions where one exists
(``test.*``, ``session.id``, ``gen_ai.*``), else ``voicelab.*``. No transcript text, tool
arguments or judge rationale is put on a span: a trace leaves the bundle's privacy rules
behind.

The tree (docs/observability.md)::

    voicelab.trial            the trace's root; its span id is the one sent to the product
      voicelab.connect        connect started .. connected
      voicelab.user_turn      a user turn: turn started .. committed / speech ended
      voicelab.response       a product response: its first event .. response done
        execute_tool <name>   a tool call .. its result
      voicelab.outcome_probe  the call ended .. the outcome probed
      voicelab.judge          one per judge, in the scoring window (not timed on its own)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..artifacts import JudgeResult, TrialReport, TurnMetrics
from ._timeline import Timeline, TimelineEvent, utc_ns

AttributeValue = str | bool | int | float | Sequence[str]

# --- span names ---------------------------------------------------------------------------------

RUN_SPAN = "voicelab.run"
TRIAL_SPAN = "voicelab.trial"
CONNECT_SPAN = "voicelab.connect"
USER_TURN_SPAN = "voicelab.user_turn"
RESPONSE_SPAN = "voicelab.response"
TOOL_SPAN = "execute_tool"  # gen_ai: "execute_tool {gen_ai.tool.name}"
PROBE_SPAN = "voicelab.outcome_probe"
JUDGE_SPAN = "voicelab.judge"

# --- span event names ---------------------------------------------------------------------------

BARGE_IN_EVENT = "voicelab.barge_in"
PRODUCT_INTERRUPTION_EVENT = "voicelab.product_interruption"
STALL_EVENT = "voicelab.playback_stall"
PRODUCT_ERROR_EVENT = "voicelab.product_error"
VERDICT_EVENT = "voicelab.verdict"
EVALUATION_EVENT = "gen_ai.evaluation.result"

#: A run's attribute on every span, so a sweep's cells sharing one exporter count their own.
RUN_ID = "voicelab.run.id"

#: TurnMetrics fields put on a response span (``voicelab.response.<field>``), when measured.
RESPONSE_FIELDS = (
    "status", "reference", "response_latency_ms", "first_audio_latency_ms",
    "response_duration_ms", "output_audio_seconds", "dead_air_ms", "trailing_silence_ms",
    "interrupted", "interruption_stop_latency_ms", "audio_after_interrupt_ms",
    "playback_stall_ms", "double_talk_ms", "tool_calls", "stamp_error_bound_ms",
    "timing_degraded", "first_audio_error_bound_ms", "first_audio_degraded",
    "transcript_source", "product_cut_in")

#: test.case.result.status: the semantic conventions' pass / fail, and voicelab's third outcome
CASE_STATUS = {"passed": "pass", "failed": "fail", "inconclusive": "inconclusive"}


@dataclass(frozen=True)
class PlannedEvent:
    name: str
    time_ns: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass
class PlannedSpan:
    """One span to export. ``parent`` is the index of its parent in the plan (None: the
    trial, the trace's root); ``span_id`` is set only for the root (the id the product was
    sent in ``traceparent``)."""

    name: str
    start_ns: int
    end_ns: int
    parent: int | None = None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    events: list[PlannedEvent] = field(default_factory=list)
    #: the span's status is ERROR with this description (an execution failure, not a failed
    #: verdict: a failed test is a result, ``test.case.result.status``)
    error: str | None = None
    span_id: str | None = None


@dataclass
class TrialTrace:
    """A trial's spans, parents before children (the root first)."""

    trace_id: str
    spans: list[PlannedSpan]


def _attributes(**values: Any) -> dict[str, AttributeValue]:
    """The given attributes without the unmeasured (None) ones."""
    return {key: value for key, value in values.items() if value is not None}


def _response_attributes(turn: TurnMetrics) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {"voicelab.turn_id": turn.turn_id}
    values = turn.model_dump(include=set(RESPONSE_FIELDS))
    for name in RESPONSE_FIELDS:
        value = values.get(name)  # the serialized form leaves unmeasured fields out
        if isinstance(value, bool | int | float | str):
            attributes[f"voicelab.response.{name}"] = value
    return attributes


class _Plan:
    """The spans of one trial, built in order (parents first)."""

    def __init__(self, report: TrialReport, timeline: Timeline | None, *, run_id: str | None):
        self.report = report
        self.timeline = timeline
        self.run_id = run_id
        self.spans: list[PlannedSpan] = []
        started, ended = utc_ns(report.started_at), utc_ns(report.ended_at)
        self.zero = timeline.start_utc_ns if timeline is not None else started
        end = max(ended, self.at(timeline.end_ns) if timeline is not None else ended)
        self.trial = self.add(PlannedSpan(
            TRIAL_SPAN, self.zero, end, attributes=self._trial_attributes(),
            span_id=timeline.root_span_id if timeline is not None else None,
            error=self._execution_error()))

    def at(self, offset_ns: int) -> int:
        return self.zero + offset_ns

    def add(self, span: PlannedSpan) -> int:
        if self.run_id is not None:
            span.attributes.setdefault(RUN_ID, self.run_id)
        span.end_ns = max(span.end_ns, span.start_ns)
        self.spans.append(span)
        return len(self.spans) - 1

    def _trial_attributes(self) -> dict[str, AttributeValue]:
        report = self.report
        status = report.status or ("passed" if report.passed else "failed")
        return _attributes(**{
            "test.suite.name": report.scenario_id,
            "test.case.name": f"{report.scenario_id}/{report.persona}/{report.environment}/"
                              f"{report.trial_id}",
            "test.case.result.status": CASE_STATUS.get(status, status),
            "session.id": report.session_id,
            "gen_ai.conversation.id": report.session_id,
            "voicelab.scenario": report.scenario_id,
            "voicelab.persona": report.persona,
            "voicelab.environment": report.environment,
            "voicelab.adapter": report.adapter,
            "voicelab.trial": report.trial,
            "voicelab.seed": report.seed,
            "voicelab.attempt": report.attempt,
            "voicelab.status": status,
            "voicelab.execution_status": report.execution_status,
            "voicelab.exit_reason": report.exit_reason,
            "voicelab.user_turns": report.user_turns,
            "voicelab.product_responses": report.product_responses,
            "voicelab.measurement_degraded": report.measurement_degraded,
            "voicelab.outcome_status": report.outcome_status})

    def _execution_error(self) -> str | None:
        if self.report.execution_status == "succeeded":
            return None
        failure = self.report.failures[0] if self.report.failures else None
        return f"{failure.kind}: {failure.code or 'failed'}" if failure else "execution failed"

    # --- the conversation ---------------------------------------------------------------------

    def connect(self, timeline: Timeline) -> None:
        started = timeline.first("session.connect_started")
        if started is None:
            return
        connected = timeline.first("session.connected")
        end = connected.offset_ns if connected is not None else started.offset_ns
        self.add(PlannedSpan(CONNECT_SPAN, self.at(started.offset_ns), self.at(end),
                             parent=self.trial, attributes={"voicelab.connected":
                                                            connected is not None}))

    def user_turns(self, timeline: Timeline) -> dict[str, int]:
        """A span per user turn; their ends (committed, speech ended, last packet)."""
        ends: dict[str, int] = {}
        for event in timeline.events:
            if event.turn_id and event.type in ("user.turn_committed", "user.speech_ended"):
                ends[event.turn_id] = max(ends.get(event.turn_id, 0), event.offset_ns)
        for turn_id, (_, last) in timeline.audio.get("user", {}).items():
            ends[turn_id] = max(ends.get(turn_id, 0), last)
        for event in timeline.of_type("user.turn_started"):
            if not event.turn_id:
                continue
            attributes = _attributes(**{
                "voicelab.turn_id": event.turn_id,
                "voicelab.user_turn.source": event.attributes.get("source_kind"),
                "voicelab.user_turn.kind": event.attributes.get("kind"),
                "voicelab.user_turn.barge_in_of": event.attributes.get("barge_in_of")})
            attributes = {k: v for k, v in attributes.items() if isinstance(v, str)}
            attributes["voicelab.turn_id"] = event.turn_id
            self.add(PlannedSpan(USER_TURN_SPAN, self.at(event.offset_ns),
                                 self.at(max(ends.get(event.turn_id, 0), event.offset_ns)),
                                 parent=self.trial, attributes=attributes))
        return ends

    def responses(self, timeline: Timeline, turns: Sequence[TurnMetrics],
                  user_ends: Mapping[str, int]) -> dict[str, int]:
        """A span per product response (a row of voice-metrics.json's turns), keyed by turn."""
        product: dict[str, list[TimelineEvent]] = {}
        for event in timeline.events:
            if event.type.startswith("product.") and event.turn_id:
                product.setdefault(event.turn_id, []).append(event)
        audio = timeline.audio.get("product", {})
        placed: dict[str, int] = {}
        for turn in turns:
            events = product.get(turn.turn_id, [])
            times = [e.offset_ns for e in events]
            if turn.turn_id in audio:
                times += list(audio[turn.turn_id])
            done = next((e.offset_ns for e in events if e.type == "product.response_done"),
                        None)
            if times:
                start, end = min(times), done if done is not None else max(times)
            else:  # nothing came: a point where the user's turn ended
                start = end = user_ends.get(turn.turn_id, timeline.end_ns)
            span = PlannedSpan(RESPONSE_SPAN, self.at(start), self.at(max(start, end)),
                               parent=self.trial, attributes=_response_attributes(turn))
            if turn.playback_stall_ms:
                span.events.append(PlannedEvent(STALL_EVENT, span.end_ns, {
                    "voicelab.stall_ms": float(turn.playback_stall_ms)}))
            for event in events:
                if event.type == "product.interruption":
                    span.events.append(PlannedEvent(PRODUCT_INTERRUPTION_EVENT,
                                                    self.at(event.offset_ns)))
                elif event.type == "product.error":
                    code = event.attributes.get("code")
                    span.events.append(PlannedEvent(PRODUCT_ERROR_EVENT, self.at(event.offset_ns),
                                                    {"error.type": str(code or "error")}))
            placed[turn.turn_id] = self.add(span)
        for event in timeline.of_type("user.barge_in"):
            target = event.attributes.get("response_turn_id")
            index = placed.get(target) if isinstance(target, str) else None
            owner = self.spans[index if index is not None else self.trial]
            kind = event.attributes.get("kind")
            after = event.attributes.get("after_product_audio_ms")
            owner.events.append(PlannedEvent(BARGE_IN_EVENT, self.at(event.offset_ns), _attributes(
                **{"voicelab.barge_in.kind": kind if isinstance(kind, str) else None,
                   "voicelab.barge_in.after_product_audio_ms":
                       float(after) if isinstance(after, int | float) else None,
                   "voicelab.turn_id": event.turn_id})))
        return placed

    def tool_calls(self, timeline: Timeline, responses: Mapping[str, int]) -> None:
        results = {e.attributes.get("call_id"): e.offset_ns
                   for e in timeline.of_type("product.tool_result")}
        for call in timeline.of_type("product.tool_call"):
            name = call.attributes.get("name")
            call_id = call.attributes.get("call_id")
            name = name if isinstance(name, str) and name else "tool"
            end = results.get(call_id, call.offset_ns) if isinstance(call_id, str) \
                else call.offset_ns
            parent = responses.get(call.turn_id or "", self.trial)
            self.add(PlannedSpan(f"{TOOL_SPAN} {name}", self.at(call.offset_ns), self.at(end),
                                 parent=parent, attributes=_attributes(**{
                                     "gen_ai.operation.name": "execute_tool",
                                     "gen_ai.tool.name": name,
                                     "gen_ai.tool.call.id": call_id
                                     if isinstance(call_id, str) else None,
                                     "voicelab.turn_id": call.turn_id})))

    # --- after the call -----------------------------------------------------------------------

    def outcome_probe(self, timeline: Timeline) -> int:
        """The probe's span; the offset scoring starts from."""
        ended = timeline.first("trial.ended")
        probed = timeline.first("outcome.probed")
        if probed is None:
            return ended.offset_ns if ended is not None else timeline.end_ns
        start = ended.offset_ns if ended is not None else probed.offset_ns
        status = probed.attributes.get("status")
        probe = probed.attributes.get("probe")
        self.add(PlannedSpan(PROBE_SPAN, self.at(start), self.at(probed.offset_ns),
                             parent=self.trial, attributes=_attributes(**{
                                 "voicelab.outcome.probe": probe if isinstance(probe, str)
                                 else None,
                                 "voicelab.outcome.status": status if isinstance(status, str)
                                 else None}),
                             error="outcome probe error" if status == "error" else None))
        return probed.offset_ns

    def judges(self, judges: Sequence[JudgeResult], *, scoring_from_ns: int) -> None:
        end = self.spans[self.trial].end_ns
        for judge in judges:
            label = judge.label or ("pass" if judge.passed else "fail")
            attributes = _attributes(**{
                "gen_ai.evaluation.name": judge.name,
                "gen_ai.evaluation.score.value": judge.score,
                "gen_ai.evaluation.score.label": label,
                "gen_ai.request.model": judge.model,
                "gen_ai.response.model": judge.model_version,
                "voicelab.judge.kind": judge.kind,
                "voicelab.judge.status": judge.status,
                "voicelab.judge.critical": judge.critical,
                "voicelab.judge.threshold": judge.threshold})
            span = PlannedSpan(JUDGE_SPAN, scoring_from_ns, end, parent=self.trial,
                               attributes=attributes,
                               error="judge error" if judge.status == "error" else None)
            span.events.append(PlannedEvent(EVALUATION_EVENT, end, {
                key: value for key, value in attributes.items()
                if key.startswith("gen_ai.evaluation.")}))
            self.add(span)

    def verdicts(self) -> None:
        """The verdicts that did not pass, as events of the trial (names and status only)."""
        trial = self.spans[self.trial]
        for verdict in self.report.verdicts:
            if verdict.status != "passed":
                trial.events.append(PlannedEvent(VERDICT_EVENT, trial.end_ns, {
                    "voicelab.verdict.name": verdict.name,
                    "voicelab.verdict.status": verdict.status,
                    "voicelab.verdict.critical": verdict.critical}))


def trial_trace(report: TrialReport, turns: Sequence[TurnMetrics], timeline: Timeline | None,
                *, run_id: str | None = None) -> TrialTrace:
    """The spans of one trial (see the module docstring); ``timeline`` None (no voice events:
    a crashed or lost trial) gives the trial span alone, placed by its report."""
    plan = _Plan(report, timeline, run_id=run_id)
    scoring_from = plan.spans[plan.trial].end_ns
    if timeline is not None:
        plan.connect(timeline)
        user_ends = plan.user_turns(timeline)
        responses = plan.responses(timeline, turns, user_ends)
        plan.tool_calls(timeline, responses)
        scoring_from = plan.at(plan.outcome_probe(timeline))
    plan.judges(report.judges, scoring_from_ns=scoring_from)
    plan.verdicts()
    return TrialTrace(trace_id=report.trace_id, spans=plan.spans)
