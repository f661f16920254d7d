"""Probe outcomes, self-interruptions, the selectivity table and the probe verdicts as pure
functions of recorded events."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from voicelab.artifacts import ProbeOutcome
from voicelab.config import (
    EnvironmentConfig,
    PersonaConfig,
    ScenarioConfig,
    ScriptConfig,
    ScriptTurn,
    StatisticsConfig,
)
from voicelab.metrics._selectivity import (
    overlap_ns,
    probe_outcomes,
    self_interruptions,
    talk_spurts,
)
from voicelab.personas import PersonaContext, PersonaEnd, ProductResponse, UserTurn
from voicelab.personas._scripted import ScriptedPersona
from voicelab.recording import (
    EnvironmentEcho,
    EventType,
    ProbeMarked,
    ProbeSkipped,
    Recording,
    ResponseDone,
    UserBargeIn,
)
from voicelab.scoring._selectivity import selectivity
from voicelab.scoring._statistics import proportion_interval
from voicelab.scoring._verdicts import deterministic_verdicts

MS = 1_000_000


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _recording() -> tuple[Recording, _Clock]:
    clock = _Clock()
    return Recording(session_id="s", trace_id="t" * 32, root_span_id="r" * 16, clock_ns=clock,
                     start_ns=0), clock


def _probe(recording: Recording, *, at_ms: int, kind: str, turn: str = "turn-000",
           probe_id: str = "probe-001", lead_ms: float = 40.0) -> None:
    for event_type, when in ((EventType.PROBE_STARTED, at_ms), (EventType.PROBE_ENDED,
                                                                 at_ms + 400)):
        recording.record(event_type, ProbeMarked(probe_id=probe_id, kind=kind,
                                                 response_turn_id=turn, label="x",
                                                 frame_lead_ms=lead_ms),
                         source="evaluator", direction="outbound", at_ns=when * MS, turn_id=None)


def _cancel(recording: Recording, *, at_ms: int, turn: str = "turn-000") -> None:
    recording.record(EventType.PRODUCT_RESPONSE_DONE, ResponseDone(status="cancelled"),
                     source="product", direction="inbound", at_ns=at_ms * MS, turn_id=turn)


def test_talk_spurts_join_pauses_shorter_than_the_hangover():
    segments = [(0, 100), (300, 500), (1500, 1600)]
    assert talk_spurts(segments, pause_ns=700) == [(0, 500), (1500, 1600)]
    assert overlap_ns([(0, 500), (1500, 1600)], [(400, 1550)]) == 150


def test_a_product_that_talks_on_kept_talking():
    recording, _ = _recording()
    _probe(recording, at_ms=1000, kind="backchannel")
    speech = [(0, 900 * MS), (1100 * MS, 4000 * MS)]  # a 200 ms pause across the probe
    (outcome,) = probe_outcomes(recording, speech)
    assert outcome.product_speaking and outcome.stopped is False and outcome.correct is True
    assert outcome.sent_ms == 960.0 and outcome.onset_ms == 1000.0
    assert outcome.speech_after_onset_ms == 2900.0


def test_a_stop_is_timed_from_the_frame_that_carried_the_probe():
    recording, _ = _recording()
    _probe(recording, at_ms=1000, kind="backchannel")
    _cancel(recording, at_ms=1100)
    speech = [(0, 1050 * MS), (2000 * MS, 3000 * MS)]  # it then answers the "mm-hmm"
    (outcome,) = probe_outcomes(recording, speech)
    assert outcome.stopped is True and outcome.stop_evidence == "cancelled"
    assert outcome.stop_ms == 90.0 and outcome.correct is False


def test_speech_ending_within_the_window_is_a_stop_without_wire_evidence():
    recording, _ = _recording()
    _probe(recording, at_ms=1000, kind="interruption")
    (outcome,) = probe_outcomes(recording, [(0, 1800 * MS)])
    assert outcome.stop_evidence == "speech_end" and outcome.stop_ms == 840.0
    assert outcome.correct is True
    recording, _ = _recording()
    _probe(recording, at_ms=1000, kind="interruption")
    (outcome,) = probe_outcomes(recording, [(0, 5000 * MS)])
    assert outcome.stopped is False and outcome.correct is False


def test_a_probe_into_silence_is_not_judged():
    recording, _ = _recording()
    _probe(recording, at_ms=3000, kind="noise")
    (outcome,) = probe_outcomes(recording, [(0, 1000 * MS)])
    assert outcome.product_speaking is False and outcome.correct is None


def test_self_interruptions_are_stops_and_answers_nothing_on_the_line_explains():
    recording, _ = _recording()
    recording.record(EventType.ENVIRONMENT_ECHO, EnvironmentEcho(delay_ms=40.0),
                     source="environment", direction="internal", at_ns=0)
    _cancel(recording, at_ms=1300)  # nobody spoke: its own echo stopped it
    speech = [(0, 1300 * MS), (2000 * MS, 3000 * MS),  # ... then it answered its echo
              (6000 * MS, 7000 * MS)]  # an answer to the user
    user = [(4000 * MS, 5500 * MS)]
    found = self_interruptions(recording, speech, user)
    assert [(s.kind, s.at_ms) for s in found] == [("stopped", 1300.0), ("answered", 2000.0)]
    assert found[0].after_product_speech_ms == 1300.0
    assert found[1].silence_before_ms == 700.0
    # a user speaking just before the stop explains it
    assert [s.kind for s in self_interruptions(recording, speech, [(800 * MS, 1200 * MS),
                                                                  *user])] == []


def _outcome(kind: str, correct: bool | None, stop_ms: float | None = None) -> ProbeOutcome:
    return ProbeOutcome(probe_id="p", kind=kind, response_turn_id="turn-000", onset_ms=1.0,  # type: ignore[arg-type]
                        sent_ms=1.0, product_speaking=correct is not None,
                        stopped=None if correct is None else (correct if kind == "interruption"
                                                              else not correct),
                        stop_ms=stop_ms, correct=correct)


def test_the_selectivity_table_counts_wrong_reactions_with_their_interval():
    trials = [(1, [_outcome("backchannel", False, 80.0), _outcome("interruption", True, 700.0)]),
              (2, [_outcome("backchannel", True), _outcome("backchannel", None)]),
              (3, [_outcome("interruption", False)])]
    rates, rows = selectivity(trials, StatisticsConfig())
    by_name = {rate.name: rate for rate in rates}
    assert set(by_name) == {"false_stop_rate_backchannel", "missed_stop_rate_interruption"}
    backchannel = by_name["false_stop_rate_backchannel"]
    expected = proportion_interval(1, 2)
    assert (backchannel.probes, backchannel.errors, backchannel.not_applicable) == (2, 1, 1)
    assert (backchannel.estimate, backchannel.low, backchannel.high) == \
        (expected.estimate, expected.low, expected.high)
    assert backchannel.stop_ms is not None and backchannel.stop_ms.max == 80.0
    assert by_name["missed_stop_rate_interruption"].errors == 1
    assert [row.trial for row in rows] == [1, 1, 2, 2, 3]


@pytest.mark.parametrize("probes, status, passed", [
    ([_outcome("backchannel", True), _outcome("noise", True)], "passed", True),
    ([_outcome("backchannel", True), _outcome("noise", False)], "failed", False),
    ([_outcome("backchannel", None)], "inconclusive", False)])
def test_keeps_talking_through_backchannel(probes, status, passed):
    scenario = ScenarioConfig(id="s", eval_spec={"keeps_talking_through_backchannel": True})
    verdicts = deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="endpoint_completion", outcome_status="available", outcome={},
        outcome_error=None, turn_metrics=[], probes=probes)
    (verdict,) = [v for v in verdicts if v.name == "keeps_talking_through_backchannel"]
    assert (verdict.status, verdict.passed) == (status, passed)


def test_stops_when_interrupted_is_only_judged_on_interruptions():
    scenario = ScenarioConfig(id="s", eval_spec={"stops_when_interrupted": True})
    verdicts = deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="endpoint_completion", outcome_status="available", outcome={},
        outcome_error=None, turn_metrics=[],
        probes=[_outcome("backchannel", False), _outcome("interruption", False)])
    (verdict,) = [v for v in verdicts if v.name == "stops_when_interrupted"]
    assert verdict.passed is False and verdict.observed == "0 of 1"


def test_without_an_echo_only_stops_are_self_interruptions():
    recording, _ = _recording()
    _cancel(recording, at_ms=1300)
    speech = [(0, 1300 * MS), (2000 * MS, 3000 * MS)]
    assert [s.kind for s in self_interruptions(recording, speech, [])] == ["stopped"]


def test_a_barge_in_explains_the_stop_it_asked_for():
    recording, _ = _recording()
    recording.record(EventType.USER_BARGE_IN,
                     UserBargeIn(response_turn_id="turn-000", cancel_sent=True),
                     source="evaluator", direction="outbound", at_ns=1290 * MS,
                     turn_id="turn-001")
    _cancel(recording, at_ms=1300)
    assert self_interruptions(recording, [(0, 1300 * MS)], [(1330 * MS, 2500 * MS)]) == []


@pytest.mark.parametrize("turn, message", [
    ({"response": "mm-hmm", "kind": "backchannel"}, "needs 'interrupt_after_seconds'"),
    ({"response": "stop", "kind": "interruption"}, "needs 'interrupt_after_seconds'"),
    ({"response": "mm", "kind": "backchannel", "interrupt_after_seconds": 1, "dtmf": "1"},
     "cannot press dtmf"),
    ({"response": "mm", "kind": "aside", "interrupt_after_seconds": 1}, "kind")])
def test_probe_turns_are_checked(turn, message):
    with pytest.raises(ValidationError) as caught:
        ScriptTurn.model_validate(turn)
    assert message in str(caught.value)


def test_probe_environment_fields_are_checked():
    environment = EnvironmentConfig.model_validate(
        {"noise_probes": [{"sound": "door.wav"}], "echo": {}})
    assert environment.noise_probes[0].on_reply == 1
    assert environment.echo is not None and environment.echo.echo_return_loss_db == 20.0
    assert [key for key, _ in environment.asset_paths()] == ["noise_probes[0].sound"]
    for wrong in ({"echo": {"delay_ms": -1}}, {"echo": {"rir": {"rt60_ms": 0}}},
                  {"noise_probes": [{"sound": "d.wav", "on_reply": 0}]}):
        with pytest.raises(ValidationError):
            EnvironmentConfig.model_validate(wrong)


def test_a_backchannel_is_never_an_opening_or_a_reply():
    script = ScriptConfig.model_validate({"turns": [
        {"response": "mm-hmm", "kind": "backchannel", "interrupt_after_seconds": 0.5},
        {"response": "The plan."}]})
    context = PersonaContext(scenario=ScenarioConfig(id="s"), persona=PersonaConfig(name="p"),
                             data={}, script=script)
    persona = ScriptedPersona({}, context)
    opening = asyncio.run(persona.opening())
    assert isinstance(opening, UserTurn) and opening.text == "The plan."
    armed = persona.barge_in(ProductResponse(index=0))
    assert armed is not None and armed.kind == "backchannel" and armed.text == "mm-hmm"
    assert isinstance(asyncio.run(persona.reply(ProductResponse(index=0))), PersonaEnd)


def test_a_skipped_noise_probe_is_reported_not_judged():
    recording, _ = _recording()
    recording.record(EventType.PROBE_SKIPPED, ProbeSkipped(
        probe_id="probe-002", kind="noise", response_turn_id="", label="door-close.wav",
        after_product_speech_ms=800.0, reason="no reply"),
        source="evaluator", direction="internal", at_ns=5000 * MS)
    (outcome,) = probe_outcomes(recording, [(4000 * MS, 6000 * MS)])
    assert outcome.played is False and outcome.product_speaking is False
    assert outcome.correct is None and outcome.onset_ms == 5000.0
