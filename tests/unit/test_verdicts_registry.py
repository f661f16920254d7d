"""Verdicts as registered functions: the built-in order, applicability (omitted, not
applicable, applicable), a verdict that raises, and the run file's own verdicts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import TranscriptTurn, Verdict
from voicelab.config import LoadedRun, PersonaConfig, RunConfig, ScenarioConfig
from voicelab.errors import ConfigError
from voicelab.metrics import ResponseTurn, run_turn_metrics, turn_metric
from voicelab.scoring import (
    BUILTIN_VERDICTS,
    CALL_ENDED,
    TrialEvidence,
    judge_verdicts,
    recorded_plugin_verdicts,
    trial_status,
    verdict,
    verdict_checks,
)

SCENARIO = ScenarioConfig.model_validate({
    "id": "s", "expected_topics": ["plan recorded"],
    "eval_spec": {"expected_exit": "endpoint_completion",
                  "outcome_spec": {"follow_up_created": True}}})
TRANSCRIPT = [TranscriptTurn(turn_id="t1", index=0, role="assistant",
                             text="Your plan recorded, thanks.")]


def _evidence(exit_reason: str = "endpoint_completion", **fields: object) -> TrialEvidence:
    return TrialEvidence(scenario=SCENARIO, persona=PersonaConfig(name="p"),
                         transcript=TRANSCRIPT, exit_reason=exit_reason,
                         outcome_status="available", outcome={"follow_up_created": True},
                         **fields)  # type: ignore[arg-type]


@verdict("says_thanks", needs=("transcript",))
def says_thanks(evidence: TrialEvidence) -> Verdict:
    said = any("thanks" in t.text for t in evidence.assistant_turns)
    return Verdict(name="says_thanks", passed=said, expected="thanks", observed=said)


@verdict("reads_outcome", needs=("outcome",))
def reads_outcome(evidence: TrialEvidence) -> Verdict:
    return Verdict(name="reads_outcome", passed=True, expected="a record")


@verdict("broken", needs=("transcript",))
def broken(evidence: TrialEvidence) -> Verdict:
    raise RuntimeError("the store is down")


def test_the_built_in_verdicts_keep_the_order_trial_reports_list_them_in():
    assert [check.name for check in BUILTIN_VERDICTS] == [
        "expected_topics", "expected_exit", "concise", "outcome_<key>",
        "interruption_honoured", "first_audio_latency", "keeps_talking_through_backchannel",
        "stops_when_interrupted", "no_cut_in", "script_turns_said", "entities_heard",
        "entities_spoken", "prompt_heard", "keys_accepted", "reached_agent"]


def test_a_verdict_the_scenario_does_not_ask_for_is_omitted():
    names = [v.name for v in judge_verdicts(_evidence(), BUILTIN_VERDICTS)]
    # no latency limit, no concise persona, no script: those verdicts are not in the report
    assert names == ["expected_topics", "expected_exit", "outcome_follow_up_created"]


def test_a_verdict_reading_what_a_recorded_call_lacks_is_not_applicable():
    checks = (*BUILTIN_VERDICTS, says_thanks, reads_outcome)
    verdicts = {v.name: v for v in judge_verdicts(_evidence(CALL_ENDED), checks)}
    assert verdicts["expected_topics"].status == "passed"  # the transcript is there
    assert verdicts["says_thanks"].status == "passed"
    for name in ("expected_exit", "outcome_follow_up_created", "reads_outcome"):
        assert verdicts[name].status == "not_applicable", name
        assert verdicts[name].why.startswith("not applicable: ")
    assert verdicts["reads_outcome"].why.endswith("after a recorded call")
    # simulated, the same verdicts apply
    assert {v.status for v in judge_verdicts(_evidence(), checks)} == {"passed"}


def test_a_verdict_that_raises_fails_with_its_reason_and_the_trial_with_it():
    verdicts = judge_verdicts(_evidence(), (says_thanks, broken))
    failed = verdicts[1]
    assert (failed.name, failed.status, failed.passed) == ("broken", "failed", False)
    assert failed.why == "could not be evaluated: RuntimeError: the store is down"
    assert trial_status(executed=True, verdicts=verdicts, judges=[]) == "failed"


def test_a_verdict_returning_no_verdict_fails_the_same_way():
    @verdict("wrong_type", needs=())
    def wrong_type(evidence: TrialEvidence) -> Verdict:
        return "yes"  # type: ignore[return-value]

    found, = judge_verdicts(_evidence(), (wrong_type,))
    assert found.status == "failed" and "TypeError" in found.why


def test_advisory_verdicts_are_not_critical_whoever_wrote_them():
    scenario = SCENARIO.model_copy(update={"eval_spec": SCENARIO.eval_spec.model_copy(
        update={"advisory_verdicts": ["says_thanks"]})})
    evidence = TrialEvidence(scenario=scenario, persona=PersonaConfig(name="p"),
                             transcript=TRANSCRIPT, exit_reason="endpoint_completion")
    found, = judge_verdicts(evidence, (says_thanks,))
    assert found.critical is False


def test_an_unknown_need_is_refused_when_the_verdict_is_declared():
    with pytest.raises(ValueError, match="unknown needs"):
        verdict("x", needs=("weather",))  # type: ignore[arg-type]


def _checks_module(tmp_path: Path, name: str) -> None:
    (tmp_path / f"{name}.py").write_text(
        "from voicelab.artifacts import Verdict\n"
        "from voicelab.metrics import turn_metric\n"
        "from voicelab.scoring import verdict\n\n"
        "@turn_metric('reply_words', unit='count')\n"
        "def reply_words(turn):\n"
        "    return len(turn.found.transcript.split())\n\n"
        "@turn_metric('dead_air_ms', unit='ms')\n"
        "def dead_air_ms(turn):\n"
        "    return 0.0\n\n"
        "@verdict('short_call', needs=('turn_metrics',))\n"
        "def short_call(evidence):\n"
        "    return Verdict(name='short_call', passed=len(evidence.turn_metrics) < 9)\n\n"
        "@verdict('concise', needs=('transcript',))\n"
        "def concise(evidence):\n"
        "    return Verdict(name='concise', passed=True)\n\n"
        "def plain(evidence):\n"
        "    return None\n")


ROOT = Path(__file__).resolve().parents[2]


def _loaded(tmp_path: Path, *paths: str, key: str = "verdicts") -> LoadedRun:
    examples = ROOT / "examples"
    run_file = tmp_path / "run.yaml"
    run_file.write_text(
        f"scenario_path: {examples / 'scenario-workload-neutral-voice.yaml'}\n"
        f"persona_path: {examples / 'persona-workload-neutral-voice.yaml'}\n"
        f"{key}: [{', '.join(paths)}]\n")
    return voicelab.load_run(run_file)


def test_the_run_files_verdicts_resolve_by_dotted_path_after_the_built_in_ones(tmp_path):
    _checks_module(tmp_path, "checks_resolve")
    try:
        checks = verdict_checks(_loaded(tmp_path, "checks_resolve.short_call"))
    finally:
        sys.modules.pop("checks_resolve", None)
    assert checks[:len(BUILTIN_VERDICTS)] == BUILTIN_VERDICTS
    assert [c.name for c in checks[len(BUILTIN_VERDICTS):]] == ["short_call"]


@pytest.mark.parametrize(("path", "message"), [
    ("checks_refused.plain", "is not a verdict"),
    ("checks_refused.concise", "which another verdict already is"),
    ("checks_refused.missing", "has no attribute"),
])
def test_a_run_file_naming_no_verdict_is_a_configuration_error(tmp_path, path, message):
    _checks_module(tmp_path, "checks_refused")
    loaded = _loaded(tmp_path, "checks_refused.short_call", path)
    try:
        with pytest.raises(ConfigError, match=message) as raised:
            verdict_checks(loaded)
    finally:
        sys.modules.pop("checks_refused", None)
    assert raised.value.key == "verdicts[1]"
    assert str(tmp_path / "run.yaml") in str(raised.value)


def test_a_rescore_keeps_the_run_files_verdicts_as_recorded():
    recorded = [Verdict(name="expected_exit", passed=True),
                Verdict(name="outcome_follow_up_created", passed=True),
                Verdict(name="entities_heard", passed=True),
                Verdict(name="says_thanks", passed=False, why="no thanks")]
    assert [v.name for v in recorded_plugin_verdicts(recorded)] == ["says_thanks"]
    kept = judge_verdicts(_evidence(), (), kept=recorded_plugin_verdicts(recorded))
    assert kept == [recorded[-1]] and kept[0] is not recorded[-1]


def test_a_run_without_its_own_verdicts_is_written_as_before():
    bare = RunConfig(scenario_path=Path("s.yaml"), persona_path=Path("p.yaml"))
    assert "verdicts" not in bare.model_dump(mode="json")
    named = bare.model_copy(update={"verdicts": ["checks.short_call"]})
    assert named.model_dump(mode="json")["verdicts"] == ["checks.short_call"]


def test_the_run_files_metrics_resolve_and_a_taken_column_is_refused(tmp_path):
    _checks_module(tmp_path, "checks_metrics")
    try:
        found = run_turn_metrics(_loaded(tmp_path, "checks_metrics.reply_words",
                                         key="turn_metrics"))
        assert [(m.name, m.unit) for m in found] == [("reply_words", "count")]
        for path, message in (("checks_metrics.dead_air_ms", "voice-metrics.json already has"),
                              ("checks_metrics.short_call", "is not a per-response metric")):
            with pytest.raises(ConfigError, match=message) as raised:
                run_turn_metrics(_loaded(tmp_path, path, key="turn_metrics"))
            assert raised.value.key == "turn_metrics[0]"
    finally:
        sys.modules.pop("checks_metrics", None)


def test_a_metric_that_raises_or_returns_no_value_leaves_its_column_empty():
    @turn_metric("raises", unit="ms")
    def raises(turn: ResponseTurn) -> float:
        raise KeyError("x")

    @turn_metric("array", unit="ms")
    def array(turn: ResponseTurn) -> float:
        return [1.0]  # type: ignore[return-value]

    turn = _FakeTurn()
    assert raises.guarded(turn) is None  # type: ignore[arg-type]
    assert array.guarded(turn) is None  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown needs"):
        turn_metric("x", unit="ms", needs=("weather",))  # type: ignore[arg-type]


class _FakeTurn:
    turn_id = "turn-1"
