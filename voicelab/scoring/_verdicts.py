"""Deterministic verdicts: explainable, cheap, suitable for critical CI gates."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..artifacts import (
    JudgeResult,
    MeasurementQuality,
    ProbeOutcome,
    TranscriptTurn,
    TurnMetrics,
    Verdict,
)
from ..config import PersonaConfig, ScenarioConfig

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)?")

#: Verdicts judged on clock stamps: inconclusive when a turn they rest on is timing-degraded
#: (or, for a bundle judged on its whole trial, when the trial is degraded).
TIMING_VERDICTS = ("interruption_honoured", "first_audio_latency")


def normalize_tokens(text: str) -> list[str]:
    """Lowercased word tokens; punctuation and spacing never decide a verdict."""
    return _TOKEN.findall(text.casefold())


def topic_covered(topic: str, assistant_tokens: set[str]) -> bool:
    """A topic is covered when every one of its tokens occurs in the assistant's transcript."""
    tokens = normalize_tokens(topic)
    return bool(tokens) and all(token in assistant_tokens for token in tokens)


def _values_equal(expected: Any, observed: Any) -> bool:
    if isinstance(expected, bool) or isinstance(observed, bool):
        return expected is observed or (isinstance(observed, bool) and expected == observed
                                        and isinstance(expected, bool))
    if isinstance(expected, int | float) and isinstance(observed, int | float):
        return float(expected) == float(observed)
    return expected == observed


def deterministic_verdicts(*, scenario: ScenarioConfig, persona: PersonaConfig,
                           transcript: Sequence[TranscriptTurn], exit_reason: str,
                           outcome_status: str, outcome: Mapping[str, Any] | None,
                           outcome_error: str | None, turn_metrics: Sequence[TurnMetrics],
                           probes: Sequence[ProbeOutcome] = (),
                           measurement: MeasurementQuality | None = None) -> list[Verdict]:
    """``measurement``: when it is ``degraded``, the timing verdicts (``TIMING_VERDICTS``) that
    rest on a timing-degraded turn (``interruption_honoured``: the interrupted turns;
    ``first_audio_latency``: the turns with a first audio) are ``inconclusive``, whatever the
    figures say (they are still in ``observed``)."""
    spec = scenario.eval_spec
    verdicts: list[Verdict] = []
    assistant_turns = [t for t in transcript if t.role == "assistant"]
    assistant_tokens = {tok for t in assistant_turns for tok in normalize_tokens(t.text)}

    spoke = any(t.text.strip() for t in assistant_turns)
    if scenario.expected_topics and not spoke:
        verdicts.append(_inconclusive("expected_topics", scenario.expected_topics,
                                      "the product produced no transcript to look for topics in"))
    elif scenario.expected_topics:
        missing = [topic for topic in scenario.expected_topics
                   if not topic_covered(topic, assistant_tokens)]
        verdicts.append(Verdict(
            name="expected_topics", passed=not missing, expected=scenario.expected_topics,
            observed=[t for t in scenario.expected_topics if t not in missing],
            why="every expected topic occurs in the assistant transcript" if not missing
            else f"missing from the assistant transcript: {', '.join(missing)}"))

    if spec.expected_exit is not None:
        verdicts.append(Verdict(
            name="expected_exit", passed=exit_reason == spec.expected_exit,
            expected=spec.expected_exit, observed=exit_reason,
            why=f"the conversation ended with {exit_reason}"
            + ("" if exit_reason == spec.expected_exit else f", not {spec.expected_exit}")))

    if persona.is_concise and not spoke:
        verdicts.append(_inconclusive("concise", f"<= {spec.concise_max_words} words per "
                                      f"response", "the product produced no transcript to count "
                                      "words in"))
    elif persona.is_concise:
        budget = spec.concise_max_words
        longest = max(assistant_turns, key=lambda t: len(normalize_tokens(t.text)), default=None)
        words = len(normalize_tokens(longest.text)) if longest else 0
        verdicts.append(Verdict(
            name="concise", passed=words <= budget, expected=f"<= {budget} words per response",
            observed=words,
            why=f"the longest assistant response has {words} words (budget {budget})"))

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

    if spec.max_interruption_stop_ms is not None:
        interrupted = [t for t in turn_metrics if t.interrupted]
        if interrupted:
            worst = max(float(t.interruption_stop_latency_ms or 0.0) for t in interrupted)
            ok = worst <= spec.max_interruption_stop_ms
            verdicts.append(Verdict(
                name="interruption_honoured", passed=ok,
                expected=f"<= {spec.max_interruption_stop_ms} ms", observed=worst,
                why=f"the product stopped {worst:.0f} ms after the cancel at worst"))
        else:
            verdicts.append(_inconclusive(
                "interruption_honoured", f"<= {spec.max_interruption_stop_ms} ms",
                "the scenario bounds interruption but no barge-in happened"))

    if spec.max_first_audio_latency_ms is not None:
        latencies = [t.first_audio_latency_ms for t in turn_metrics
                     if t.first_audio_latency_ms is not None]
        if not latencies:
            verdicts.append(_inconclusive("first_audio_latency",
                                          f"<= {spec.max_first_audio_latency_ms} ms",
                                          "no product audio was received to time"))
        else:
            worst_latency = max(latencies)
            verdicts.append(Verdict(
                name="first_audio_latency",
                passed=worst_latency <= spec.max_first_audio_latency_ms,
                expected=f"<= {spec.max_first_audio_latency_ms} ms", observed=worst_latency,
                why=f"the slowest first audio took {worst_latency:.0f} ms"))

    if spec.keeps_talking_through_backchannel:
        verdicts.append(_probe_verdict("keeps_talking_through_backchannel", probes,
                                       ("backchannel", "noise"), "keeps talking"))
    if spec.stops_when_interrupted:
        verdicts.append(_probe_verdict("stops_when_interrupted", probes, ("interruption",),
                                       "stops"))

    if measurement is not None and measurement.degraded:
        rests_on = {"interruption_honoured": [t for t in turn_metrics if t.interrupted],
                    "first_audio_latency": [t for t in turn_metrics
                                            if t.first_audio_latency_ms is not None]}
        verdicts = [_untrusted(v, measurement, rests_on[v.name])
                    if v.name in TIMING_VERDICTS and v.status != "inconclusive" else v
                    for v in verdicts]
    advisory = set(spec.advisory_verdicts)
    for verdict in verdicts:
        if verdict.name in advisory:
            verdict.critical = False
    return verdicts


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


def _inconclusive(name: str, expected: Any, missing: str) -> Verdict:
    """A verdict with nothing to judge: never a pass; its reason says what was missing."""
    return Verdict(name=name, passed=False, status="inconclusive", expected=expected,
                   observed=None, why=f"inconclusive: {missing}")


def _untrusted(verdict: Verdict, measurement: MeasurementQuality,
               turns: Sequence[TurnMetrics]) -> Verdict:
    """A timing verdict of a degraded trial: the figure is kept, the judgement withheld when it
    rests on a turn whose timings are degraded (judged per turn), or on any turn of a trial
    judged whole (a bundle without late ticks)."""
    reasons = measurement.reasons
    if measurement.scope == "turn":
        affected = {t.turn_id for t in turns if t.timing_degraded}
        if not affected:
            return verdict
        reasons = [r for r in reasons if r.split(":", 1)[0] in affected]
    return Verdict(name=verdict.name, passed=False, status="inconclusive",
                   critical=verdict.critical, expected=verdict.expected,
                   observed=verdict.observed,
                   why=f"inconclusive: the evaluator's event loop lagged "
                       f"({'; '.join(reasons)}), so its clock stamps may be late "
                       f"by as much; measured: {verdict.why}")


def pass_at_k(results: Sequence[bool]) -> bool:
    """True when at least one trial passed (discovery / capability questions)."""
    return any(results)


def pass_power_k(results: Sequence[bool]) -> bool:
    """True only when every trial passed (the CLI's quality gate); False for no trials."""
    return bool(results) and all(results)


def trial_passed(*, executed: bool, verdicts: Sequence[Verdict],
                 judges: Sequence[JudgeResult]) -> bool:
    """The trial gate: it executed, every critical verdict passed and no critical judge failed
    or errored (advisory ones never count)."""
    from ._quality import judges_pass

    return executed and all(v.passed for v in verdicts if v.critical) and judges_pass(judges)
