"""The menu verdicts of an IVR caller (docs/ivr.md), each asked for by ``eval_spec.ivr``:

* ``prompt_heard``: the product's speech before a user turn contains the prompt's words (the
  words of its transcript: the wire's, else its audio recognized, as every word verdict reads);
* ``keys_accepted``: after each key press the product spoke again within
  ``response_after_keys_seconds``, and a key barge-in stopped the prompt within ``stop_after_keys_seconds``:
  the menu moved on (read from the key columns of the prompts' rows, :mod:`voicelab.metrics`);
* ``reached_agent``: the product said one of ``agent_words`` within ``max_seconds_to_agent``
  of the call's connect.

Nothing to judge (no words where they are needed, no key pressed) is ``inconclusive``; a
timing whose stated error straddles its limit is too. On a recorded call (``ingest``) the
caller's keys and the connect are not known: a verdict that needs them is ``not_applicable``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..artifacts import TranscriptTurn, TurnMetrics, Verdict
from ..config import IvrPrompt, IvrSpec, MeasurementConfig
from ._evidence import TrialEvidence
from ._verdict_registry import verdict

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)?")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def says(text: str, phrase: str) -> bool:
    """``phrase``'s words occur in ``text`` one after another (case and punctuation aside)."""
    words, wanted = _tokens(text), _tokens(phrase)
    return bool(wanted) and any(words[i:i + len(wanted)] == wanted
                                for i in range(len(words) - len(wanted) + 1))


def _ivr(evidence: TrialEvidence) -> IvrSpec:
    spec = evidence.spec.ivr
    if spec is None:
        raise ValueError("the scenario has no eval_spec.ivr")
    return spec


def _turn_id(number: int) -> str:
    return f"turn-{number:03d}"


def _undecided(name: str, expected: object, why: str, *, observed: object = None) -> Verdict:
    return Verdict(name=name, passed=False, status="inconclusive", expected=expected,
                   observed=observed, why=f"inconclusive: {why}")


def _not_applicable(name: str, expected: object, why: str) -> Verdict:
    return Verdict(name=name, passed=False, status="not_applicable", expected=expected,
                   observed=None, why=f"not applicable: {why}")


# --- prompt_heard -----------------------------------------------------------------------------

def _prompt_check(prompt: IvrPrompt, assistant: Sequence[TranscriptTurn]) -> tuple[bool | None,
                                                                                   str]:
    """Whether the product's speech before ``prompt.before_turn`` said every word (``None``:
    it spoke there but has no words to look in), and why."""
    answered = _turn_id(prompt.before_turn - 1)
    said = [turn for turn in assistant if turn.turn_id == answered]
    label = f"before turn {prompt.before_turn}"
    if not said:
        return False, f"{label}: the product said nothing ({answered})"
    text = " ".join(turn.text for turn in said if turn.text)
    if not text.strip():
        return None, f"{label}: no words for {answered} (no transcript, nothing recognized)"
    missing = [word for word in prompt.words if not says(text, word)]
    if missing:
        return False, f"{label}: missing {', '.join(repr(w) for w in missing)} in {text!r}"
    return True, f"{label}: heard {', '.join(repr(w) for w in prompt.words)}"


@verdict("prompt_heard", needs=("transcript", "expectations"),
         when=lambda e: e.spec.ivr is not None and bool(e.spec.ivr.prompts))
def prompt_heard(evidence: TrialEvidence) -> Verdict:
    """Each configured prompt's words in the product's speech before its user turn."""
    prompts = _ivr(evidence).prompts
    expected = [{"before_turn": p.before_turn, "words": list(p.words)} for p in prompts]
    checks = [_prompt_check(p, evidence.assistant_turns) for p in prompts]
    observed = [ok for ok, _ in checks]
    wrong = [why for ok, why in checks if ok is False]
    if wrong:
        return Verdict(name="prompt_heard", passed=False, expected=expected,
                       observed=observed, why="; ".join(wrong))
    undecided = [why for ok, why in checks if ok is None]
    if undecided:
        return _undecided("prompt_heard", expected, "; ".join(undecided), observed=observed)
    return Verdict(name="prompt_heard", passed=True, expected=expected, observed=observed,
                   why="; ".join(why for _, why in checks))


# --- keys_accepted ----------------------------------------------------------------------------

def _against(value_ms: float | None, limit_ms: float, row: TurnMetrics, figure: str, *,
             tolerance_ms: float) -> bool | None:
    """``value_ms`` within ``limit_ms`` (``None``: the row's ``figure`` is not trusted and its
    stated error could change the answer)."""
    if value_ms is None:
        return False
    error = _error_of(row, figure, tolerance_ms=tolerance_ms)
    if error is not None and abs(value_ms - limit_ms) <= error:
        return None
    return value_ms <= limit_ms


def _error_of(row: TurnMetrics, figure: str, *, tolerance_ms: float) -> float | None:
    """How far the row's ``figure`` may be off when it is not trusted (``None``: trusted): its
    own bound when the row has one for it (untrusted over the tolerance), else the bound of
    the row's stamps when the row is ``timing_degraded`` (a recording judged per stamp; a
    figure that rests on another response, such as the reply to the keys)."""
    if not row.timing_degraded:
        return None
    own = (row.figure_error_bounds_ms or {}).get(figure)
    if own is None:
        return float(row.stamp_error_bound_ms or 0)
    return own if own > tolerance_ms else None


def _tolerance_ms(evidence: TrialEvidence) -> float:
    """The bound beyond which a figure is not trusted (the trial's ``measurement``)."""
    measurement = evidence.measurement
    return measurement.tolerances.max_loop_lag_max_ms if measurement is not None \
        else MeasurementConfig().max_loop_lag_max_ms


def _key_check(row: TurnMetrics, spec: IvrSpec, *, tolerance_ms: float
               ) -> tuple[bool | None, str]:
    """Whether the keys that answered ``row`` moved the menu on, and why."""
    keys = f"{row.key_digits!r} ({row.key_turn_id}, answering {row.turn_id})"
    checks: list[bool | None] = []
    reasons: list[str] = []
    if row.key_barge_in:
        stop_ms = row.key_stop_latency_ms
        checks.append(_against(stop_ms, spec.stop_after_keys_seconds * 1000, row,
                               "key_stop_latency_ms", tolerance_ms=tolerance_ms))
        reasons.append(f"stopped its prompt {stop_ms:.0f} ms after the key" if stop_ms
                       is not None else "its prompt was not heard")
    answer_ms = row.key_to_speech_ms
    checks.append(_against(answer_ms, spec.response_after_keys_seconds * 1000, row,
                           "key_to_speech_ms", tolerance_ms=tolerance_ms))
    reasons.append(f"spoke again {answer_ms:.0f} ms after the key" if answer_ms is not None
                   else "never spoke again")
    why = f"{keys}: {', '.join(reasons)}"
    if False in checks:
        return False, why
    return (None, why) if None in checks else (True, why)


@verdict("keys_accepted", needs=("turn_metrics", "timing", "expectations"),
         when=lambda e: e.spec.ivr is not None and e.spec.ivr.keys_accepted)
def keys_accepted(evidence: TrialEvidence) -> Verdict:
    """After each key press the product spoke again in time (a key barge-in: it stopped its
    prompt in time first)."""
    spec = _ivr(evidence)
    expected = (f"after each key, the product speaks again within "
                f"{spec.response_after_keys_seconds:g} s (a key barge-in: stops within "
                f"{spec.stop_after_keys_seconds:g} s)")
    rows = [row for row in evidence.turn_metrics if row.key_digits]
    if not rows:
        if evidence.recorded_call:
            return _not_applicable("keys_accepted", expected,
                                   "a recorded call does not say which keys the caller pressed")
        return _undecided("keys_accepted", expected, "no key was pressed after a prompt")
    checks = [_key_check(row, spec, tolerance_ms=_tolerance_ms(evidence)) for row in rows]
    observed = {str(row.key_turn_id): ok for row, (ok, _) in zip(rows, checks, strict=True)}
    wrong = [why for ok, why in checks if ok is False]
    if wrong:
        return Verdict(name="keys_accepted", passed=False, expected=expected,
                       observed=observed, why="; ".join(wrong))
    undecided = [why for ok, why in checks if ok is None]
    if undecided:
        return _undecided("keys_accepted", expected, "the stated timing error could change "
                          "the answer: " + "; ".join(undecided), observed=observed)
    return Verdict(name="keys_accepted", passed=True, expected=expected, observed=observed,
                   why="; ".join(why for _, why in checks))


# --- reached_agent ----------------------------------------------------------------------------

def _agent_turn(evidence: TrialEvidence, words: Sequence[str]) -> TranscriptTurn | None:
    return next((turn for turn in evidence.assistant_turns
                 if any(says(turn.text, word) for word in words)), None)


@verdict("reached_agent", needs=("transcript", "turn_metrics", "timing", "expectations"),
         when=lambda e: e.spec.ivr is not None and e.spec.ivr.max_seconds_to_agent is not None)
def reached_agent(evidence: TrialEvidence) -> Verdict:
    """The product said one of ``agent_words`` within ``max_seconds_to_agent`` of connect."""
    spec = _ivr(evidence)
    limit_s = float(spec.max_seconds_to_agent or 0)
    expected = f"one of {list(spec.agent_words)} said within {limit_s:g} s of connect"
    if evidence.connected_ms is None:
        if evidence.recorded_call:
            return _not_applicable("reached_agent", expected,
                                   "a recorded call has no connect to time from")
        return _undecided("reached_agent", expected, "the call's connect was not recorded")
    found = _agent_turn(evidence, spec.agent_words)
    if found is None:
        wordless = [t.turn_id for t in evidence.assistant_turns if not t.text.strip()]
        if wordless:
            return _undecided("reached_agent", expected, f"no agent words heard, and "
                              f"{', '.join(wordless)} have no words to look in")
        return Verdict(name="reached_agent", passed=False, expected=expected, observed=None,
                       why="the product never said any of the agent words")
    row = next((r for r in evidence.turn_metrics if r.turn_id == found.turn_id), None)
    start_ms = row.speech_start_ms if row is not None else None
    if row is None or start_ms is None:
        return _undecided("reached_agent", expected, f"{found.turn_id} said the agent words "
                          f"but its speech was not placed")
    seconds = round((start_ms - evidence.connected_ms) / 1000, 3)
    within = _against(seconds * 1000, limit_s * 1000, row, "speech_start_ms",
                      tolerance_ms=_tolerance_ms(evidence))
    why = f"{found.turn_id} ({found.text!r}) began {seconds:g} s after connect"
    if within is None:
        return _undecided("reached_agent", expected, f"{why}; its stated timing error "
                          f"({_error_of(row, 'speech_start_ms', tolerance_ms=_tolerance_ms(evidence))} "
                          f"ms) could change the answer",
                          observed=seconds)
    return Verdict(name="reached_agent", passed=within, expected=expected, observed=seconds,
                   why=why + ("" if within else f", later than {limit_s:g} s"))
