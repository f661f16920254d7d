"""What the agent heard and what it said: the scenario's key entities against fake products that
mishear or misspeak them on purpose, and who talked how much against the fake's own truth.

The fake product reports an input transcript (``input_transcript``); ``mishear_digits`` swaps
its last two digits, so the product "hears" 4417 where the user said 4471. With ``voice:
piper`` it speaks real words, and ``misspeak_digits`` makes its audio say its text with the
last two digits swapped while its transcript keeps the text: the recognizer catches it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import voicelab
from voicelab.analysis import load_frames
from voicelab.artifacts import read_json
from voicelab.audio import SILENCE_THRESHOLD, tone_speech
from voicelab.metrics import occurs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SAID = "My account number is 4471, see you on Tuesday."
ENTITIES = ('scenario.entities=[{name: account_number, value: "4471", kind: number}, '
            '{name: day, value: Tuesday, kind: date}]')


def _run(tmp_path: Path, *overrides: str) -> tuple[dict[str, Any], dict[str, Any], Path]:
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        artifacts_dir=tmp_path,
        overrides=[
        ENTITIES, f'script.turns=[{{"response": "{SAID}", "keywords": ["daily plan"]}}]',
        *overrides]))
    trial = outcome.bundle_path / "trial-001"
    return read_json(trial / "trial-report.json"), read_json(trial / "voice-metrics.json"), trial


def _verdict(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in report["verdicts"] if v["name"] == name)


@pytest.mark.parametrize("mishears", [False, True])
def test_the_product_heard_the_entities_from_its_input_transcript(tmp_path, mishears):
    report, metrics, trial = _run(
        tmp_path, "scenario.eval_spec.entities_heard=true",
        "endpoint.settings.input_transcript='my account number is 4471 see you on tuesday'",
        f"endpoint.settings.mishear_digits={str(mishears).lower()}")
    verdict = _verdict(report, "entities_heard")
    checks = {c["name"]: c for c in metrics["entities"]["input"]}
    assert set(checks) == {"account_number", "day"}
    assert all(c["source"] == "wire" and c["turn_id"] == "turn-001" for c in checks.values())
    assert checks["day"]["correct"] is True
    if not mishears:
        assert verdict["status"] == "passed", verdict
        assert checks["account_number"]["correct"] is True
        assert metrics["entities"]["input_accuracy"] == 1.0
        assert report["passed"]
    else:
        assert verdict["status"] == "failed", verdict
        assert checks["account_number"]["correct"] is False
        assert checks["account_number"]["numbers_found"] == ["4417"]
        assert "account_number in turn-001: not heard; the wire words say 4417" in verdict["why"]
        assert metrics["entities"]["input_accuracy"] == 0.5
        assert not report["passed"]
    # rescore reproduces the figures from the bundle alone
    before = (trial / "voice-metrics.json").read_bytes()
    voicelab.rescore(trial.parent, output=tmp_path / "again")
    assert (tmp_path / "again" / "trial-001" / "voice-metrics.json").read_bytes() == before


def test_without_an_input_transcript_the_wire_mode_is_inconclusive(tmp_path):
    report, metrics, _ = _run(tmp_path, "scenario.eval_spec.entities_heard=true",
                              "transcription.product_input=wire")
    verdict = _verdict(report, "entities_heard")
    assert verdict["status"] == "inconclusive", verdict
    assert "the product sent no input transcript" in verdict["why"]
    assert all(c["correct"] is None for c in metrics["entities"]["input"])


def test_an_entity_the_user_never_said_is_not_judged(tmp_path):
    report, metrics, _ = _run(
        tmp_path, "scenario.eval_spec.entities_heard=true",
        'scenario.entities=[{name: order, value: "9132", kind: number}]',
        "endpoint.settings.input_transcript='my account number is 4471'")
    assert metrics["entities"]["not_said"] == ["order"] and metrics["entities"]["input"] == []
    verdict = _verdict(report, "entities_heard")
    assert verdict["status"] == "inconclusive" and "(order)" in verdict["why"], verdict


def _audible_ms(text: str, seed: int) -> float:
    """Tone speech for ``text``: its first to last audible sample, in ms."""
    audio = tone_speech(text, seed=seed)
    loud = np.flatnonzero(np.abs(audio.samples.astype(np.int32)) > SILENCE_THRESHOLD)
    return (loud[-1] + 1 - loud[0]) * 1000 / audio.sample_rate_hz


def test_talk_metrics_against_the_fakes_own_truth(tmp_path):
    # one sentence each, no pause inside (tone speech's word gaps are 70 ms): each is one
    # stretch of speech; the fake sends its replies in real time, stamping when it sent the
    # first and the last audible sample of each (server_timing, on the shared monotonic clock)
    opening, reply = "Hello tell me your number", "Thank you it is noted"
    said = "My account number is four four seven one"
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        artifacts_dir=tmp_path,
        overrides=[
        f'script.turns=[{{"response": "{said}", "keywords": ["number"]}}]',
        f"endpoint.settings.opening_text='{opening}'", f"endpoint.settings.reply_text='{reply}'",
        "endpoint.settings.audio_pacing=realtime", "scenario.expected_topics=[]"]))
    trial = outcome.bundle_path / "trial-001"
    metrics = read_json(trial / "voice-metrics.json")
    talk = metrics["talk"]
    raw = read_json(trial / "raw-endpoint-events.json")["events"]
    timings = [e["raw"]["server_timing"] for e in raw if e["type"] == "turn_complete"]
    sent_ms = [(t["speech_end_ns"] - t["speech_start_ns"]) / 1e6 for t in timings]
    # the truth's path: a 40 ms frame, plus what the evaluator says its stamps may be off by
    tolerance = 40.0 + sum(float(t["stamp_error_bound_ms"] or 0.0) for t in metrics["turns"])
    assert len(sent_ms) == 2
    assert talk["product_talk_ms"] == pytest.approx(sum(sent_ms), abs=tolerance), \
        (talk, sent_ms)
    # and the audio the fake sent, up to a frame: a frame sent a few ms late in real time
    # leaves a gap on the listener's timeline, inside the speech as heard
    assert talk["product_talk_ms"] == pytest.approx(
        _audible_ms(opening, 7) + _audible_ms(reply, 7), abs=tolerance), talk
    # the user's turn plays as one contiguous piece: its audio's speech, to the sample
    assert talk["user_talk_ms"] == pytest.approx(_audible_ms(said, outcome_seed(trial)),
                                                 abs=0.001), talk
    assert talk["crosstalk_ms"] == 0.0  # turns taken one after the other
    assert talk["talk_ratio"] == pytest.approx(
        talk["product_talk_ms"] / talk["user_talk_ms"], abs=1e-4)
    # the words per minute: over each reply's speaking time (onset to last audible sample,
    # a gap the listener heard included), the replies' audio up to the same tolerance
    words = len(opening.split()) + len(reply.split())
    assert talk["product_words"] == words
    assert talk["product_speaking_ms"] == pytest.approx(
        _audible_ms(opening, 7) + _audible_ms(reply, 7), abs=tolerance), talk
    assert talk["product_words_per_minute"] == pytest.approx(
        words * 60_000 / talk["product_speaking_ms"], rel=1e-3), talk
    # a notebook reads them as trial columns
    trials = load_frames([outcome.bundle_path]).trials
    assert trials["talk_ratio"].iloc[0] == pytest.approx(talk["talk_ratio"])
    assert trials["crosstalk_ms"].iloc[0] == 0.0


def outcome_seed(trial: Path) -> int:
    """The seed the user's tone speech was made with (the trial's)."""
    return int(read_json(trial / "trial-report.json")["seed"])


SPOKEN = "I have the number 4 4 7 1 for Tuesday."
REPLY = "Your account number is 4 4 7 1, see you on Tuesday."


@pytest.mark.slow
@pytest.mark.parametrize("misspeaks", [False, True])
def test_recognized_entities_heard_from_the_users_audio_and_said_in_the_products(
        tmp_path, misspeaks):
    pytest.importorskip("pocketsphinx")
    pytest.importorskip("piper")
    # no input transcript on the wire: what the product received is recognized; the product
    # speaks with piper, its transcript says REPLY, its audio says it (or 4 4 1 7)
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        artifacts_dir=tmp_path,
        overrides=[
        ENTITIES, f'script.turns=[{{"response": "{SPOKEN}", "keywords": ["daily plan"]}}]',
        "speech_provider=piper", "endpoint.settings.voice=piper",
        f"endpoint.settings.reply_text='{REPLY}'", "scenario.expected_topics=[]",
        f"endpoint.settings.misspeak_digits={str(misspeaks).lower()}",
        "scenario.eval_spec.entities_heard=true", "scenario.eval_spec.entities_spoken=true",
        # the words are judged here, not the test machine's load
        "measurement={max_loop_lag_p99_ms: 1000, max_loop_lag_max_ms: 1000,"
        " max_first_audio_error_ms: 1000}"]))
    trial = outcome.bundle_path / "trial-001"
    report, metrics = read_json(trial / "trial-report.json"), read_json(trial / "voice-metrics.json")
    entities = metrics["entities"]
    heard = _verdict(report, "entities_heard")
    assert heard["status"] == "passed", heard
    assert {c["source"] for c in entities["input"]} == {"asr:pocketsphinx"}
    spoken = _verdict(report, "entities_spoken")
    said = {c["name"]: c for c in entities["output"]}
    assert set(said) == {"account_number", "day"}  # the reply's text says both
    assert said["day"]["correct"] is True
    if misspeaks:
        assert spoken["status"] == "failed", spoken
        assert said["account_number"]["correct"] is False
        assert said["account_number"]["numbers_found"] == ["4417"]
        assert "account_number in turn-001: not said in its audio" in spoken["why"]
        assert not report["passed"]
    else:
        assert spoken["status"] == "passed", spoken
        assert entities["output_accuracy"] == 1.0 and report["passed"]
    # the transcript keeps the product's text either way
    transcript = read_json(trial / "transcript.json")
    assert occurs("4471", "number", transcript["turns"][-1]["text"])
    # rescore recognizes the same words from the bundle alone
    before = (trial / "voice-metrics.json").read_bytes()
    voicelab.rescore(trial.parent, output=tmp_path / "again")
    assert (tmp_path / "again" / "trial-001" / "voice-metrics.json").read_bytes() == before


def test_an_entity_value_that_says_nothing_of_its_kind_is_a_configuration_error(tmp_path):
    process = subprocess.run(
        [sys.executable, "-m", "voicelab", "validate", str(EXAMPLE), "--set",
         'scenario.entities=[{name: when, value: "Tuesday", kind: time}]'],
        capture_output=True, text=True, timeout=120)
    assert process.returncode == 2, process.stdout + process.stderr
    assert "Traceback" not in process.stderr
    assert "entities[0].value" in process.stderr and "'Tuesday' is not a time" in process.stderr


def test_crosstalk_is_the_barge_in_heard_over_the_product(tmp_path):
    # the user barges in 1.0 s into the opening, which the fake streams in real time and does
    # not stop: both are audible from the barge-in's onset until the product's opening ends
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        artifacts_dir=tmp_path,
        overrides=[
        'script.turns=[{"response": "Wait one thing first", "interrupt_after_seconds": 1.0}]',
        "endpoint.settings.audio_pacing=realtime", "endpoint.settings.ignore_cancel=true",
        "pace_audio=true", "endpoint.settings.reply_text='Noted'",
        "endpoint.settings.opening_text='Hello tell me your daily plan and your reminder'",
        "scenario.expected_topics=[]"]))
    metrics = read_json(outcome.bundle_path / "trial-001" / "voice-metrics.json")
    talk = metrics["talk"]
    opening = metrics["turns"][0]
    assert opening["interrupted"] and opening["interruption_stop_latency_ms"] > 0, opening
    # the same overlap the per-response double talk measures: the user's speech there is its
    # turns' bounds (voice activity in 10 ms frames), here its audible segments (edges to the
    # sample), the same for tone speech without a pause but for a frame at each edge
    double_talk = sum(float(t["double_talk_ms"] or 0.0) for t in metrics["turns"])
    assert talk["crosstalk_ms"] > 0
    assert talk["crosstalk_ms"] == pytest.approx(double_talk, abs=20.0), (talk, double_talk)
