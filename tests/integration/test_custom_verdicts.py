"""The run file's own verdicts and per-response metrics in a real run: judged and measured
after the built-in ones (in the scoring process, which imports them from the run file's
folder), a raising verdict failed with its reason, a raising metric an empty column, and a
rescore that reproduces every scored file byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import read_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CHECKS = '''
from voicelab.artifacts import Verdict
from voicelab.metrics import ResponseTurn, turn_metric
from voicelab.scoring import TrialEvidence, verdict


@turn_metric("reply_words", unit="count", needs=("response",))
def reply_words(turn: ResponseTurn) -> int:
    return len(turn.found.transcript.split())


@turn_metric("broken_column", unit="ms")
def broken_column(turn: ResponseTurn) -> float:
    raise ZeroDivisionError("no")


@verdict("no_apology", needs=("transcript",))
def no_apology(evidence: TrialEvidence) -> Verdict:
    sorry = [t.turn_id for t in evidence.assistant_turns if "sorry" in t.text.lower()]
    return Verdict(name="no_apology", passed=not sorry, expected="no apology",
                   observed=sorry, why="the product never apologized" if not sorry
                   else "it apologized in " + ", ".join(sorry))


@verdict("store_reachable", needs=("outcome",))
def store_reachable(evidence: TrialEvidence) -> Verdict:
    raise ConnectionError("the store is down")
'''


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("suite")
    (folder / "house_checks.py").write_text(CHECKS)
    run_file = folder / "run.yaml"
    run_file.write_text("\n".join([
        f"scenario_path: {EXAMPLES / 'scenario-workload-neutral-voice.yaml'}",
        f"persona_path: {EXAMPLES / 'persona-workload-neutral-voice.yaml'}",
        f"data_path: {EXAMPLES / 'data-workload-neutral-voice.yaml'}",
        f"script_path: {EXAMPLES / 'script-workload-neutral-voice.yaml'}",
        "endpoint: {adapter: fake}", "trial_seed: 42", "pace_audio: false",
        "verdicts: [house_checks.no_apology, house_checks.store_reachable]",
        "turn_metrics: [house_checks.reply_words, house_checks.broken_column]", ""]))
    outcome = voicelab.run(run_file, voicelab.RunOptions(
        trials=1,
        artifacts_dir=folder / "runs",
        overrides=[
        "scenario.eval_spec.max_first_audio_latency_ms=5000", "scenario.eval_spec.no_cut_in=true"]))
    return outcome.bundle_path


def test_the_run_files_verdicts_follow_the_built_in_ones(bundle):
    report = read_json(bundle / "trial-001" / "trial-report.json")
    names = [v["name"] for v in report["verdicts"]]
    assert names == ["expected_topics", "expected_exit", "concise",
                     "outcome_follow_up_created", "outcome_report_fields_complete",
                     "first_audio_latency", "no_cut_in", "script_turns_said",
                     "no_apology", "store_reachable"]
    verdicts = {v["name"]: v for v in report["verdicts"]}
    assert verdicts["no_apology"]["status"] == "passed"
    assert verdicts["store_reachable"]["status"] == "failed"
    assert verdicts["store_reachable"]["why"] == \
        "could not be evaluated: ConnectionError: the store is down"
    assert report["passed"] is False


def test_the_run_files_metrics_are_columns_after_the_documents_own(bundle):
    turns = read_json(bundle / "trial-001" / "voice-metrics.json")["turns"]
    assert turns
    for turn in turns:
        assert list(turn)[-2:] == ["reply_words", "broken_column"]
        assert turn["reply_words"] == len(turn["transcript"].split())
        assert turn["broken_column"] is None
    assert any(turn["reply_words"] > 0 for turn in turns)
    log = (bundle / "evaluator.log").read_text()
    assert "turn metric broken_column could not be computed" in log


def test_a_rescore_reproduces_the_scored_files_byte_for_byte(bundle, tmp_path):
    result = voicelab.rescore(bundle, output=tmp_path / "again")
    scored = sorted(path.name for path in (bundle / "trial-001").iterdir())
    assert "trial-report.json" in scored and "voice-metrics.json" in scored
    for name in scored:  # every file of the trial: the rewritten ones and the kept ones
        assert (tmp_path / "again" / "trial-001" / name).read_bytes() == \
            (bundle / "trial-001" / name).read_bytes(), name
    assert (tmp_path / "again" / "run-report.json").read_bytes() == \
        (bundle / "run-report.json").read_bytes()
    assert not result.trials[0].changed_verdicts
