"""Deterministic verdicts: explainable, cheap, suitable for critical CI gates.

Each built-in verdict is a function of one :class:`TrialEvidence` registered with
:func:`verdict` (what it reads, when the scenario asks for it); :data:`BUILTIN_VERDICTS` is
their order in a trial report, and :func:`judge_verdicts` (:mod:`._verdict_registry`) judges a
trial by them and by the run file's own. A timing verdict (``TIMING_VERDICTS``) reads the
stated error of its clock stamps (``measurement``): it is decided when that error cannot
change its answer and inconclusive only when it could (the error interval straddles the
limit); the figures are kept in ``observed`` either way."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final, Literal

from pydantic import JsonValue

from ..artifacts import (
    EntityMetrics,
    JudgeResult,
    MeasurementQuality,
    ProbeOutcome,
    TranscriptTurn,
    TrialReport,
    TrialSummary,
    TurnMetrics,
    Verdict,
)
from ..config import EvalSpec, LoadedRun, PersonaConfig, ScenarioConfig, ScriptConfig
from ._entity_verdicts import entities_heard, entities_spoken
from ._evidence import TrialEvidence
from ._ivr_verdicts import keys_accepted, prompt_heard, reached_agent
from ._verdict_registry import VerdictCheck, judge_verdicts, plugin_verdicts, user_verdicts, verdict

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)?")

#: Verdicts judged on clock stamps: inconclusive when a turn they rest on is timing-degraded
#: (or, for a bundle judged on its whole trial, when the trial is degraded).
TIMING_VERDICTS = ("interruption_honoured", "first_audio_latency")

def undecided_by_timing(verdict: Verdict) -> bool:
    """``verdict`` is a timing verdict left inconclusive because the stated timing error of
    its figures straddles its limit (it keeps the figure it measured: one with nothing to judge,
    no barge-in or no audio, has none)."""
    return verdict.name in TIMING_VERDICTS and verdict.status == "inconclusive" \
        and verdict.observed is not None


def normalize_tokens(text: str) -> list[str]:
    """Lowercased word tokens; punctuation and spacing never decide a verdict."""
    return _TOKEN.findall(text.casefold())


def topic_covered(topic: str, assistant_tokens: set[str]) -> bool:
    """A topic is covered when every one of its tokens occurs in the assistant's transcript."""
    tokens = normalize_tokens(topic)
    return bool(tokens) and all(token in assistant_tokens for token in tokens)


def _values_equal(expected: object, observed: object) -> bool:
    if isinstance(expected, bool) or isinstance(observed, bool):
        return expected is observed or (isinstance(observed, bool) and expected == observed
                                        and isinstance(expected, bool))
    if isinstance(expected, int | float) and isinstance(observed, int | float):
        return float(expected) == float(observed)
    return expected == observed


def deterministic_verdicts(*, scenario: ScenarioConfig, persona: PersonaConfig,
                           transcript: Sequence[TranscriptTurn], exit_reason: str,
                           outcome_status: str, outcome: Mapping[str, JsonValue] | None,
                           outcome_error: str | None, turn_metrics: Sequence[TurnMetrics],
                           probes: Sequence[ProbeOutcome] = (),
                           measurement: MeasurementQuality | None = None,
                           entities: EntityMetrics | None = None,
                           script: ScriptConfig | None = None,
                           said_script_turns: Collection[int] = ()) -> list[Verdict]:
    """The built-in verdicts of one trial's evidence given field by field (a notebook's or a
    test's call; scoring builds a :class:`TrialEvidence` and calls :func:`judge_verdicts`)."""
    return judge_verdicts(TrialEvidence(
        scenario=scenario, persona=persona, transcript=transcript, exit_reason=exit_reason,
        outcome_status=outcome_status, outcome=outcome, outcome_error=outcome_error,
        turn_metrics=turn_metrics, probes=probes, measurement=measurement, entities=entities,
        script=script, said_script_turns=said_script_turns), BUILTIN_VERDICTS)


@verdict("expected_topics", needs=("transcript", "expectations"),
         when=lambda e: bool(e.scenario.expected_topics))
def expected_topics(evidence: TrialEvidence) -> Verdict:
    """``expected_topics``: every topic occurs in what the assistant said."""
    return _expected_topics_verdict(evidence.scenario.expected_topics,
                                    evidence.assistant_turns)


@verdict("expected_exit", needs=("ending", "expectations"),
         when=lambda e: e.spec.expected_exit is not None)
def expected_exit(evidence: TrialEvidence) -> Verdict:
    """``expected_exit``: the conversation ended the way the scenario expects."""
    return _expected_exit_verdict(str(evidence.spec.expected_exit), evidence.exit_reason)


@verdict("concise", needs=("transcript", "persona"), when=lambda e: e.persona.is_concise)
def concise(evidence: TrialEvidence) -> Verdict:
    """``concise``: a concise persona's replies are within the scenario's word budget."""
    return _concise_verdict(evidence.spec.concise_max_words, evidence.assistant_turns)


@verdict("outcome_<key>", needs=("outcome", "expectations"),
         when=lambda e: bool(e.spec.outcome_spec))
def outcome(evidence: TrialEvidence) -> list[Verdict]:
    """``outcome_<key>``: one verdict per key of the scenario's ``outcome_spec``."""
    return _outcome_verdicts(evidence.spec, outcome_status=evidence.outcome_status,
                             outcome=evidence.outcome, outcome_error=evidence.outcome_error)


@verdict("interruption_honoured", needs=("turn_metrics", "timing", "expectations"),
         when=lambda e: e.spec.max_interruption_stop_ms is not None)
def interruption_honoured(evidence: TrialEvidence) -> Verdict:
    """``interruption_honoured``: after each barge-in the product stopped within the limit."""
    return _interruption_verdict(float(evidence.spec.max_interruption_stop_ms or 0.0),
                                 evidence.turn_metrics, evidence.measurement)


@verdict("first_audio_latency", needs=("turn_metrics", "timing", "expectations"),
         when=lambda e: e.spec.max_first_audio_latency_ms is not None)
def first_audio_latency(evidence: TrialEvidence) -> Verdict:
    """``first_audio_latency``: every reply's first audio came within the limit."""
    return _first_audio_verdict(float(evidence.spec.max_first_audio_latency_ms or 0.0),
                                evidence.turn_metrics, evidence.measurement)


@verdict("keeps_talking_through_backchannel", needs=("probes", "expectations"),
         when=lambda e: e.spec.keeps_talking_through_backchannel)
def keeps_talking_through_backchannel(evidence: TrialEvidence) -> Verdict:
    """The product kept talking through every backchannel and noise probe."""
    return _probe_verdict("keeps_talking_through_backchannel", evidence.probes,
                          ("backchannel", "noise"), "keeps talking")


@verdict("stops_when_interrupted", needs=("probes", "expectations"),
         when=lambda e: e.spec.stops_when_interrupted)
def stops_when_interrupted(evidence: TrialEvidence) -> Verdict:
    """The product stopped for every interruption probe."""
    return _probe_verdict("stops_when_interrupted", evidence.probes, ("interruption",),
                          "stops")


@verdict("no_cut_in", needs=("turn_metrics", "expectations"), when=lambda e: e.spec.no_cut_in)
def no_cut_in(evidence: TrialEvidence) -> Verdict:
    """``no_cut_in``: see :func:`no_cut_in_verdict`."""
    return no_cut_in_verdict(evidence.turn_metrics)


def _has_required_turns(evidence: TrialEvidence) -> bool:
    return evidence.script is not None and any(not turn.optional
                                               for turn in evidence.script.turns)


@verdict("script_turns_said", needs=("script", "transcript"), when=_has_required_turns)
def script_turns_said(evidence: TrialEvidence) -> Verdict:
    """``script_turns_said``: see :func:`script_turns_said_verdict`."""
    assert evidence.script is not None  # (when=_has_required_turns)
    # the persona matched keywords against the words the wire carried during the call
    wire_words = any(t.role == "assistant" and t.text_source == "wire" and t.text.strip()
                     for t in evidence.transcript)
    return script_turns_said_verdict(evidence.script, evidence.said_script_turns,
                                     product_words=wire_words)


#: The built-in verdicts, in the order a trial report lists them.
BUILTIN_VERDICTS: tuple[VerdictCheck, ...] = (
    expected_topics, expected_exit, concise, outcome, interruption_honoured,
    first_audio_latency, keeps_talking_through_backchannel, stops_when_interrupted, no_cut_in,
    script_turns_said, entities_heard, entities_spoken, prompt_heard, keys_accepted,
    reached_agent)


def verdict_checks(loaded: LoadedRun | None = None) -> tuple[VerdictCheck, ...]:
    """What a trial is judged by: the built-in verdicts, then the run file's own
    (``verdicts:``, imported from the run file's folder like every plug-in); a run file
    naming something that is not a verdict is a configuration error (exit 2)."""
    if loaded is None or not loaded.run.verdicts:
        return BUILTIN_VERDICTS
    return BUILTIN_VERDICTS + user_verdicts(loaded.run.verdicts, builtin=BUILTIN_VERDICTS,
                                            search_dirs=[loaded.base_dir],
                                            source=loaded.run_path)


def recorded_plugin_verdicts(recorded: Sequence[Verdict]) -> list[Verdict]:
    """A trial report's verdicts that came from its run file's ``verdicts:`` (every one no
    built-in verdict writes): ``rescore`` keeps them as recorded."""
    return plugin_verdicts(recorded, BUILTIN_VERDICTS)


def _spoke(assistant_turns: Sequence[TranscriptTurn]) -> bool:
    return any(t.text.strip() for t in assistant_turns)


def _expected_topics_verdict(topics: Sequence[str],
                             assistant_turns: Sequence[TranscriptTurn]) -> Verdict:
    """``expected_topics``: every topic occurs in what the assistant said."""
    if not _spoke(assistant_turns):
        return _inconclusive("expected_topics", topics,
                             "the product produced no transcript to look for topics in")
    assistant_tokens = {tok for t in assistant_turns for tok in normalize_tokens(t.text)}
    missing = [topic for topic in topics if not topic_covered(topic, assistant_tokens)]
    return Verdict(
        name="expected_topics", passed=not missing, expected=topics,
        observed=[t for t in topics if t not in missing],
        why="every expected topic occurs in the assistant transcript" if not missing
        else f"missing from the assistant transcript: {', '.join(missing)}")


def _expected_exit_verdict(expected_exit: str, exit_reason: str) -> Verdict:
    """``expected_exit``: the conversation ended the way the scenario expects."""
    return Verdict(
        name="expected_exit", passed=exit_reason == expected_exit,
        expected=expected_exit, observed=exit_reason,
        why=f"the conversation ended with {exit_reason}"
        + ("" if exit_reason == expected_exit else f", not {expected_exit}"))


def _concise_verdict(budget: int, assistant_turns: Sequence[TranscriptTurn]) -> Verdict:
    """``concise``: the longest assistant response is within the word budget."""
    if not _spoke(assistant_turns):
        return _inconclusive("concise", f"<= {budget} words per response",
                             "the product produced no transcript to count words in")
    longest = max(assistant_turns, key=lambda t: len(normalize_tokens(t.text)), default=None)
    words = len(normalize_tokens(longest.text)) if longest else 0
    return Verdict(
        name="concise", passed=words <= budget, expected=f"<= {budget} words per response",
        observed=words,
        why=f"the longest assistant response has {words} words (budget {budget})")


def _outcome_verdicts(spec: EvalSpec, *, outcome_status: str,
                      outcome: Mapping[str, JsonValue] | None,
                      outcome_error: str | None) -> list[Verdict]:
    """``outcome_<key>`` for each key of the scenario's outcome spec: the probe persisted it."""
    verdicts: list[Verdict] = []
    for key, expected in spec.outcome_spec.items():
        name = f"outcome_{key}"
        if outcome_status != "available" or outcome is None:
            reason = outcome_error or "the outcome probe returned no record"
            verdicts.append(Verdict(name=name, passed=False, expected=expected, observed=None,
                                    why=f"outcome {outcome_status}: {reason}"))
            continue
        if key not in outcome:
            verdicts.append(Verdict(name=name, passed=False, expected=expected, observed=None,
                                    why=f"the probe did not report {key!r}"))
            continue
        observed = outcome[key]
        ok = _values_equal(expected, observed)
        verdicts.append(Verdict(name=name, passed=ok, expected=expected, observed=observed,
                                why=f"persisted {key} = {observed!r}"
                                + ("" if ok else f", expected {expected!r}")))
    return verdicts


def _interruption_verdict(limit_ms: float, turn_metrics: Sequence[TurnMetrics],
                          measurement: MeasurementQuality | None) -> Verdict:
    """``interruption_honoured``: after each barge-in the product stopped within the limit."""
    interrupted = [t for t in turn_metrics if t.interrupted]
    if not interrupted:
        return _inconclusive("interruption_honoured", f"<= {limit_ms} ms",
                             "the scenario bounds interruption but no barge-in happened")
    errors = _timing_errors(turn_metrics, measurement)
    return _decide_on_timing(
        "interruption_honoured", limit_ms=limit_ms,
        measured=[(float(t.interruption_stop_latency_ms or 0.0), errors.get(t.turn_id))
                  for t in interrupted],
        describe=lambda worst: f"the product stopped {worst:.0f} ms after the "
                               f"barge-in at worst",
        measurement=measurement)


def _first_audio_verdict(limit_ms: float, turn_metrics: Sequence[TurnMetrics],
                         measurement: MeasurementQuality | None) -> Verdict:
    """``first_audio_latency``: every reply's first audio came within the limit."""
    timed = [t for t in turn_metrics if t.first_audio_latency_ms is not None]
    cut = [t for t in turn_metrics if t.product_cut_in]
    if cut:
        # a reply that began before the user finished is no latency within any limit
        return Verdict(
            name="first_audio_latency", passed=False,
            expected=f"<= {limit_ms:g} ms",
            observed=f"{len(cut)} cut-in(s)",
            why="the product cut in before the user finished, which no latency limit "
                "passes: " + "; ".join(cut_in_place(t) for t in cut))
    if not timed:
        return _inconclusive("first_audio_latency", f"<= {limit_ms} ms",
                             "no product audio was received to time")
    errors = _timing_errors(turn_metrics, measurement, first_audio=True)
    return _decide_on_timing(
        "first_audio_latency", limit_ms=limit_ms,
        measured=[(float(t.first_audio_latency_ms or 0.0), errors.get(t.turn_id))
                  for t in timed],
        describe=lambda worst: f"the slowest first audio took {worst:.0f} ms",
        measurement=measurement)


def _probe_verdict(name: str, probes: Sequence[ProbeOutcome], kinds: tuple[str, ...],
                   expected: str) -> Verdict:
    """Every probe of ``kinds`` that found the product speaking had the right reaction."""
    judged = [p for p in probes if p.kind in kinds and p.correct is not None]
    what = " or ".join(kinds)
    if not judged:
        return _inconclusive(name, f"the product {expected} on every {what} probe",
                             f"no {what} probe found the product speaking")
    wrong = [p for p in judged if not p.correct]
    detail = ", ".join(f"{p.probe_id} ({p.kind} '{p.label}')" for p in wrong)
    return Verdict(
        name=name, passed=not wrong, expected=f"the product {expected} on every {what} probe",
        observed=f"{len(judged) - len(wrong)} of {len(judged)}",
        why=f"right on all {len(judged)} probe(s)" if not wrong
        else f"wrong on {detail}")


def no_cut_in_verdict(turn_metrics: Sequence[TurnMetrics]) -> Verdict:
    """``no_cut_in``: the product's speech never began inside a hesitation turn (before the
    user's last piece of speech ended); inconclusive when the trial had no hesitation turn."""
    expected = "the product waits for the end of every hesitation turn"
    judged = [t for t in turn_metrics if t.product_cut_in is not None]
    if not judged:
        return _inconclusive("no_cut_in", expected, "the trial had no user turn with pauses")
    cut = [t for t in judged if t.product_cut_in]

    return Verdict(
        name="no_cut_in", passed=not cut, expected=expected,
        observed=f"{len(cut)} of {len(judged)} hesitation turn(s) cut into",
        why=f"the product waited through all {len(judged)} hesitation turn(s)" if not cut
        else "the product began speaking while the user was still mid-turn: "
             + "; ".join(cut_in_place(t) for t in cut))


def cut_in_place(turn: TurnMetrics) -> str:
    """Where the product's speech began in a cut-into hesitation turn: inside a pause (``542 ms
    into pause 1 of 1000 ms``), or in the words after it (``162 ms into the words after pause 1
    of 800 ms``: the pause had ended, the product reacting late to it), or before any pause."""
    pauses = turn.user_pauses_ms or []
    index = turn.cut_in_pause_index
    if index is None or index >= len(pauses):
        return f"{turn.turn_id}: before the user's first pause"
    after = turn.cut_in_after_pause_ms or 0.0
    pause = pauses[index]
    if after <= pause:
        return f"{turn.turn_id}: {after:.0f} ms into pause {index + 1} of {pause:.0f} ms"
    return (f"{turn.turn_id}: {after - pause:.0f} ms into the words after pause {index + 1} "
            f"of {pause:.0f} ms")


#: How much of a script line a verdict quotes.
SCRIPT_LINE_QUOTE_CHARS = 60


def script_turns_said_verdict(script: ScriptConfig, said: Collection[int], *,
                              product_words: bool = True) -> Verdict:
    """``script_turns_said``: every script turn not marked ``optional`` was said.

    A scripted persona that finds no turn whose keywords match asks the product to repeat
    itself, and the call may still end the way the scenario expects: without this verdict a
    trial whose script was never followed passed. Failed names each unsaid turn (its index, its
    ``trigger`` label and the start of its line). ``product_words``: some product response
    carried words during the call; without any, a line with keywords could match nothing (the
    wire sends no transcripts, or lost them): when every unsaid line has keywords, that is
    inconclusive, not the product's failure."""
    required = [index for index, turn in enumerate(script.turns) if not turn.optional]
    unsaid = [index for index in required if index not in said]

    def line(index: int) -> str:
        turn = script.turns[index]
        text = turn.response or (f"dtmf {turn.dtmf}" if turn.dtmf else str(turn.audio_path))
        if len(text) > SCRIPT_LINE_QUOTE_CHARS:
            text = text[:SCRIPT_LINE_QUOTE_CHARS - 3].rstrip() + "..."
        label = f" (trigger {turn.trigger!r})" if turn.trigger else ""
        keywords = f", keywords {', '.join(turn.keywords)}" if turn.keywords else ""
        return f"turns[{index}]{label}: {text!r}{keywords}"

    if unsaid and not product_words and all(script.turns[i].keywords for i in unsaid):
        return _inconclusive(
            "script_turns_said", "every script turn not marked optional is said",
            "no product response carried words during the call (no transcripts on the wire) "
            "for a line's keywords to match; never said: "
            + "; ".join(line(index) for index in unsaid))
    return Verdict(
        name="script_turns_said", passed=not unsaid,
        expected="every script turn not marked optional is said",
        observed=f"{len(required) - len(unsaid)} of {len(required)}",
        why=f"all {len(required)} required script turn(s) were said" if not unsaid
        else "never said (no product response matched its keywords): "
             + "; ".join(line(index) for index in unsaid))


def _inconclusive(name: str, expected: object, missing: str) -> Verdict:
    """A verdict with nothing to judge: never a pass; its reason says what was missing."""
    return Verdict(name=name, passed=False, status="inconclusive", expected=expected,
                   observed=None, why=f"inconclusive: {missing}")


def _timing_errors(turns: Sequence[TurnMetrics], measurement: MeasurementQuality | None, *,
                   first_audio: bool = False,
                   figure: str = "interruption_stop_latency_ms") -> dict[str, float]:
    """How far each untrusted turn's timing figure may be off (ms), by turn id. A figure is
    untrusted when its stamps may be late beyond the run's tolerances: judged per figure
    (``figure_error_bounds_ms``: the figure's own bound, when over ``max_loop_lag_max_ms``),
    per turn in a recording judged per stamp (``timing_degraded``, with its
    ``stamp_error_bound_ms``; with ``first_audio``, the first audio packet's own stamp:
    ``first_audio_degraded``, ``first_audio_error_bound_ms``), or, for a bundle judged on its
    whole trial, every turn of a degraded trial (by the trial's worst loop lag)."""
    if measurement is None or not measurement.degraded:
        return {}
    if measurement.scope == "turn" and first_audio:  # (judged before it had its own bound)
        return {t.turn_id: float(t.first_audio_error_bound_ms
                                 if t.first_audio_error_bound_ms is not None
                                 else t.stamp_error_bound_ms or 0.0) for t in turns
                if t.first_audio_degraded
                or (t.first_audio_degraded is None and t.timing_degraded)}
    if measurement.scope == "turn":
        tolerance = measurement.tolerances.max_loop_lag_max_ms
        errors = {t.turn_id: t.figure_error_bounds_ms.get(figure, 0.0) for t in turns
                  if t.figure_error_bounds_ms is not None}
        return {**{turn: error for turn, error in errors.items() if error > tolerance},
                **{t.turn_id: float(t.stamp_error_bound_ms or 0.0) for t in turns
                   if t.figure_error_bounds_ms is None and t.timing_degraded}}
    lag = measurement.loop_lag_ms
    worst = max((v for v in (lag.max, lag.p99) if v is not None), default=0.0) if lag else 0.0
    return {t.turn_id: float(worst) for t in turns}


def _decide_on_timing(name: str, *, limit_ms: float,
                      measured: Sequence[tuple[float, float | None]],
                      describe: Callable[[float], str],
                      measurement: MeasurementQuality | None) -> Verdict:
    """A timing verdict over figures that may each be off by a stated error (``None``: none).

    A figure decides when its whole error interval lies on one side of the limit: every figure
    at most the limit even if it is ``error`` too low, passed; some figure beyond the limit even
    if it is ``error`` too high, failed. Only when the worst case and the best case disagree is
    the verdict inconclusive: the error could change the answer."""
    expected = f"<= {limit_ms:g} ms"
    worst = max(value for value, _ in measured)
    error_of_worst = max((error or 0.0) for value, error in measured if value == worst)
    surely_over = [(value, error) for value, error in measured
                   if value - (error or 0.0) > limit_ms]
    maybe_over = [(value, error) for value, error in measured
                  if value + (error or 0.0) > limit_ms]
    if surely_over or not maybe_over:
        why = describe(worst)
        if error_of_worst:
            why += f" (possible timing error {error_of_worst:.1f} ms, limit {limit_ms:g} ms)"
        return Verdict(name=name, passed=not surely_over, expected=expected, observed=worst,
                       why=why)
    value, error = max(maybe_over, key=lambda pair: pair[0])
    reasons = "; ".join(measurement.reasons) if measurement is not None else ""
    return Verdict(name=name, passed=False, status="inconclusive", expected=expected,
                   observed=worst,
                   why=f"inconclusive: measured {value:.1f} ms, possible timing error "
                       f"{error or 0.0:.1f} ms, limit {limit_ms:g} ms: the evaluator's event "
                       f"loop lagged ({reasons}), so the clock stamps may be off by as much and "
                       f"the error could change the answer; measured: {describe(worst)}")


def pass_at_k(results: Sequence[bool]) -> bool:
    """True when at least one trial passed (discovery / capability questions)."""
    return any(results)


def pass_power_k(results: Sequence[bool]) -> bool:
    """True only when every trial passed (the CLI's quality gate); False for no trials."""
    return bool(results) and all(results)


TrialStatus = Literal["passed", "failed", "inconclusive", "unjudged"]
#: The status of a trial that executed and that nothing judged.
UNJUDGED: Final = "unjudged"


def trial_status(*, executed: bool, verdicts: Sequence[Verdict],
                 judges: Sequence[JudgeResult]) -> TrialStatus:
    """The trial gate: ``passed`` when it executed, every critical verdict passed and no
    critical judge failed or errored (advisory ones never count); ``failed`` when it did not
    execute, or a critical verdict or judge failed; ``inconclusive``: nothing failed, but a
    critical verdict could not be decided (not a pass: it fails closed once retries are spent);
    ``unjudged``: it executed and no critical verdict applied and no critical judge ran (an
    ingested call without a run file, or whose run file's verdicts all need a simulation):
    "nothing failed" is not a pass, and not a failure either."""
    from ._quality import judges_pass

    if not executed or not judges_pass(judges):
        return "failed"
    critical = [v for v in verdicts if v.critical and v.status != "not_applicable"]
    if any(v.status == "failed" for v in critical):
        return "failed"
    if any(v.status == "inconclusive" for v in critical):
        return "inconclusive"
    if not critical and not any(judge.critical for judge in judges):
        return UNJUDGED
    return "passed"


def gate_passed(report: TrialReport | TrialSummary) -> bool:
    """The trial lets a run's exit code stay 0: it passed, or nothing judged it (``unjudged``
    is reported as such, never counted as a pass)."""
    return report.passed or report.status == UNJUDGED


def trial_passed(*, executed: bool, verdicts: Sequence[Verdict],
                 judges: Sequence[JudgeResult]) -> bool:
    """True only when :func:`trial_status` is ``passed``."""
    return trial_status(executed=executed, verdicts=verdicts, judges=judges) == "passed"
