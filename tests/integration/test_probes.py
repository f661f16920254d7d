"""Selectivity probes and the speakerphone echo against the fake product on a live line
(``server_vad``), over several seeded trials: each probe must tell the good behaviour from the
bad one in every trial.

Fake behaviours: ``stop_on_speech_ms: 0`` stops on any sound; ``stop_on_speech_ms: 700`` with
``min_turn_ms: 700`` stops only for speech longer than 700 ms (and lets "mm-hmm" pass);
``stop_on_speech_ms: null`` ignores everything; ``echo_cancellation`` true or false.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

import voicelab
import voicelab.analysis as va
from voicelab.artifacts import read_json, read_voice_events
from voicelab.errors import ConfigError
from voicelab.runner._rescore_trial import RESCORED_FILES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
DOOR = ROOT / "datasets" / "environments" / "door-close.wav"
COUGH = ROOT / "datasets" / "environments" / "cough.wav"
TRIALS = 3
LISTENING = ["pace_audio=true", "endpoint.settings.turn_detection=server_vad",
             f"concurrency={TRIALS}",
             "endpoint.settings.opening_text=Hello! Tell me your daily plan and the reminder "
             "you want saved, with the time, please.",
             "endpoint.settings.reply_text=Your daily plan is recorded and the reminder saved.",
             "endpoint.settings.complete_after_turns=2"]
SELECTIVE = ["endpoint.settings.stop_on_speech_ms=700", "endpoint.settings.min_turn_ms=700"]
ANY_SOUND = ["endpoint.settings.stop_on_speech_ms=0"]
IGNORES = ["endpoint.settings.stop_on_speech_ms=null"]
CLOSING = {"response": "Please record the plan and save the reminder at four."}


def script(*turns: dict) -> str:
    return f"script.turns={json.dumps([*turns, CLOSING, CLOSING])}"


def environment(tmp_path: Path, **fields: object) -> str:
    path = tmp_path / "environment.yaml"
    path.write_text(yaml.safe_dump({"name": "probes", **fields}))
    return f"environment_path={path}"


def run(tmp_path: Path, *overrides: str):
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=TRIALS,
        artifacts_dir=tmp_path,
        overrides=[*LISTENING, *overrides]))
    trials = []
    for index in range(1, TRIALS + 1):
        folder = outcome.bundle_path / f"trial-{index:03d}"
        trials.append((read_json(folder / "trial-report.json"),
                       read_json(folder / "voice-metrics.json"),
                       read_voice_events(folder / "voice-events.jsonl")))
    return outcome, trials, read_json(outcome.bundle_path / "run-report.json")


def both(good: Callable[[], tuple], bad: Callable[[], tuple]) -> tuple[tuple, tuple]:
    """The good and the bad behaviour's runs at once (each paced in real time: half the wait)."""
    with ThreadPoolExecutor(2) as pool:
        runs = pool.submit(good), pool.submit(bad)
        return runs[0].result(), runs[1].result()


def only_probe(metrics: dict, kind: str) -> dict:
    probes = [p for p in metrics["probes"] if p["kind"] == kind]
    assert len(probes) == 1, metrics["probes"]
    return probes[0]


BACKCHANNEL = script({"response": "mm-hmm", "kind": "backchannel",
                      "interrupt_after_seconds": 0.8})


def test_a_backchannel_separates_a_selective_product_from_one_that_stops_on_any_sound(
        tmp_path):
    (_, good, good_report), (outcome, bad, bad_report) = both(
        lambda: run(tmp_path / "good", BACKCHANNEL, *SELECTIVE,
                    "scenario.eval_spec.keeps_talking_through_backchannel=true"),
        lambda: run(tmp_path / "bad", BACKCHANNEL, *ANY_SOUND,
                    "scenario.eval_spec.keeps_talking_through_backchannel=true"))
    for report, metrics, events in good:
        probe = only_probe(metrics, "backchannel")
        assert probe["product_speaking"] and probe["stopped"] is False, probe
        assert probe["correct"] is True and probe["stop_ms"] is None
        assert probe["label"] == "mm-hmm" and probe["response_turn_id"] == "turn-000"
        # the probe is on the line: its first and last sample sent, and the user's speech
        started = next(e for e in events if e["event_type"] == "probe.started")
        assert started["turn_id"] == probe["turn_id"]
        assert any(e["event_type"] == "user.speech_started"
                   and e["turn_id"] == probe["turn_id"] for e in events)
        # the reply talked on over it: double talk on the opening, and it completed
        opening = metrics["turns"][0]
        assert opening["status"] == "completed" and opening["double_talk_ms"] > 300
        verdict = next(v for v in report["verdicts"]
                       if v["name"] == "keeps_talking_through_backchannel")
        assert verdict["passed"] is True, verdict
    rate = next(r for r in good_report["selectivity"]
                if r["name"] == "false_stop_rate_backchannel")
    assert (rate["probes"], rate["errors"], rate["estimate"]) == (TRIALS, 0, 0.0)
    assert rate["low"] == 0.0 and 0 < rate["high"] < 1
    assert len(good_report["probes"]) == TRIALS

    for report, metrics, _ in bad:
        probe = only_probe(metrics, "backchannel")
        assert probe["stopped"] is True and probe["correct"] is False, probe
        assert probe["stop_evidence"] in ("cancelled", "interruption")
        assert probe["stop_ms"] >= 0  # how soon is timing: see benchmarks/bench_probes.py
        verdict = next(v for v in report["verdicts"]
                       if v["name"] == "keeps_talking_through_backchannel")
        assert verdict["passed"] is False
    rate = next(r for r in bad_report["selectivity"]
                if r["name"] == "false_stop_rate_backchannel")
    assert (rate["probes"], rate["errors"], rate["estimate"]) == (TRIALS, TRIALS, 1.0)
    assert rate["stop_ms"]["count"] == TRIALS
    assert outcome.exit_code == 3  # the verdict fails the quality gate
    # the probes are evidence: re-scoring the bundle reproduces every document
    voicelab.rescore(outcome.bundle_path, output=tmp_path / "again")
    for index in range(1, TRIALS + 1):
        for name in RESCORED_FILES:
            trial = f"trial-{index:03d}"
            assert (tmp_path / "again" / trial / name).read_bytes() == \
                (outcome.bundle_path / trial / name).read_bytes(), (trial, name)
    assert (tmp_path / "again" / "run-report.json").read_bytes() == \
        (outcome.bundle_path / "run-report.json").read_bytes()


NOISE_ENVIRONMENT = {"noise_probes": [
    {"sound": str(DOOR), "volume": 0.8, "on_reply": 1, "after_seconds": 0.8},
    {"sound": str(COUGH), "volume": 0.8, "on_reply": 1, "after_seconds": 2.4},
    {"sound": str(COUGH), "on_reply": 9}]}  # the call has fewer replies: reported skipped


def test_a_door_and_a_cough_separate_a_speech_only_product_from_one_that_stops_on_any_sound(
        tmp_path):
    closing, noises = script(), environment(tmp_path, **NOISE_ENVIRONMENT)
    (_, good, good_report), (_, bad, bad_report) = both(
        lambda: run(tmp_path / "good", closing, *SELECTIVE, noises),
        lambda: run(tmp_path / "bad", closing, *ANY_SOUND, noises))
    for _, metrics, events in good:
        door, cough, never = metrics["probes"]
        assert never["played"] is False and never["correct"] is None
        skipped = next(e for e in events if e["event_type"] == "probe.skipped")
        assert "the call had" in skipped["attributes"]["reason"]
        assert (door["label"], cough["label"]) == ("door-close.wav", "cough.wav")
        for probe in (door, cough):
            assert probe["kind"] == "noise" and probe["turn_id"] is None
            assert probe["product_speaking"] and probe["correct"] is True, probe
        # a noise is no user turn: the line carries it between turns
        started = next(e for e in events if e["event_type"] == "probe.started")
        assert started["turn_id"] is None
    for _, metrics, _ in bad:
        door, cough, _ = metrics["probes"]
        assert door["stopped"] is True and door["correct"] is False, door
        # the door already stopped it: the cough found it silent, or answering the door, or
        # the reply was over before the cough's moment (said so, not dropped)
        assert cough["correct"] in (None, False), cough
        assert cough["played"] or (cough["product_speaking"] is False
                                   and cough["correct"] is None)
    good_rate, bad_rate = (next(r for r in report["selectivity"]
                                if r["name"] == "false_stop_rate_noise")
                           for report in (good_report, bad_report))
    assert (good_rate["errors"], good_rate["probes"]) == (0, 2 * TRIALS)
    assert good_rate["not_applicable"] == TRIALS
    assert bad_rate["errors"] == bad_rate["probes"] >= TRIALS


INTERRUPTION = script({"response": "Wait, one thing first, about the reminder time.",
                       "kind": "interruption", "interrupt_after_seconds": 0.8})


def test_an_interruption_separates_a_product_that_stops_from_one_that_ignores_it(tmp_path):
    (_, good, good_report), (_, bad, bad_report) = both(
        lambda: run(tmp_path / "good", INTERRUPTION, *SELECTIVE,
                    "scenario.eval_spec.stops_when_interrupted=true"),
        lambda: run(tmp_path / "bad", INTERRUPTION, *IGNORES,
                    "scenario.eval_spec.stops_when_interrupted=true"))
    for report, metrics, events in good:
        probe = only_probe(metrics, "interruption")
        assert probe["stopped"] is True and probe["correct"] is True, probe
        # it needs 700 ms of speech before it stops (less a line frame: a frame's samples
        # reach it at once); how much later is timing (benchmarks/bench_probes.py)
        assert probe["stop_ms"] >= 550
        barge = next(e for e in events if e["event_type"] == "user.barge_in")
        assert barge["attributes"]["kind"] == "interruption"
        assert next(v for v in report["verdicts"]
                    if v["name"] == "stops_when_interrupted")["passed"] is True
    for report, metrics, _ in bad:
        probe = only_probe(metrics, "interruption")
        assert probe["stopped"] is False and probe["correct"] is False, probe
        assert next(v for v in report["verdicts"]
                    if v["name"] == "stops_when_interrupted")["passed"] is False
    good_rate, bad_rate = (next(r for r in report["selectivity"]
                                if r["name"] == "missed_stop_rate_interruption")
                           for report in (good_report, bad_report))
    assert (good_rate["errors"], bad_rate["errors"]) == (0, TRIALS)


ECHO = {"echo": {"delay_ms": 60, "echo_return_loss_db": 20, "rir": {"rt60_ms": 250}}}


def test_echo_separates_a_product_with_echo_cancellation_from_one_without(tmp_path):
    closing, echo = script(), environment(tmp_path, **ECHO)
    (_, good, _), (_, bad, _) = both(
        lambda: run(tmp_path / "good", closing, echo, "endpoint.settings.echo_cancellation=true"),
        lambda: run(tmp_path / "bad", closing, echo, "endpoint.settings.echo_cancellation=false",
                    "scenario.eval_spec.limits.max_time_seconds=20"))
    for report, metrics, events in good:
        assert metrics["self_interruptions"] == [], metrics["self_interruptions"]
        assert metrics["echo"]["echo_return_loss_db"] == 20
        assert report["exit_reason"] == "endpoint_completion", report["failures"]
        # the echo is on the line: frames sent while only the product spoke are not silent
        assert any(e["event_type"] == "environment.echo" for e in events)
    for _, metrics, _ in bad:
        stops = [s for s in metrics["self_interruptions"] if s["kind"] == "stopped"]
        assert stops, metrics["self_interruptions"]
        # it heard 150 ms of its own voice come back, a frame and the echo delay later
        assert stops[0]["after_product_speech_ms"] > 150


@pytest.mark.parametrize("key, value", [
    ("environment", {"noise_probes": [{"sound": str(DOOR)}]}),
    ("environment", {"echo": {}}),
    ("script", None)])
def test_probes_need_a_live_line(tmp_path, key, value):
    overrides = ["endpoint.settings.turn_detection=client"]
    if key == "environment":
        overrides.append(environment(tmp_path, **value))
        expected = "noise_probes" if "noise_probes" in value else "echo"
    else:
        overrides.append(BACKCHANNEL)
        expected = "turns[0].kind"
    with pytest.raises(ConfigError) as caught:
        voicelab.run(EXAMPLE, voicelab.RunOptions(artifacts_dir=tmp_path, overrides=overrides))
    assert expected in str(caught.value) and "server_vad" in str(caught.value)


def test_the_probes_example_runs_clean(tmp_path):
    """examples/run-probes.yaml: a backchannel and a door into the opening and a speakerphone
    echo, against the fake's good behaviour."""
    outcome = voicelab.run(ROOT / "examples" / "run-probes.yaml", voicelab.RunOptions(
        artifacts_dir=tmp_path,
        overrides=["scenario.eval_spec.keeps_talking_through_backchannel="
                                      "true"]))
    folder = outcome.bundle_path / "trial-001"
    report, metrics = (read_json(folder / "trial-report.json"),
                       read_json(folder / "voice-metrics.json"))
    assert outcome.exit_code == 0, (report["failures"], report["verdicts"])
    assert sorted(p["kind"] for p in metrics["probes"]) == ["backchannel", "noise"]
    assert all(p["correct"] is True for p in metrics["probes"]), metrics["probes"]
    assert metrics["self_interruptions"] == [] and metrics["echo"]["delay_ms"] == 40
    # the report notebook's tables
    frames = va.load_frames([outcome.bundle_path])
    table = va.selectivity_table(frames)
    assert sorted(table["name"]) == ["false_stop_rate_backchannel", "false_stop_rate_noise"]
    assert list(table["errors"]) == [0, 0] and list(table["probes"]) == [1, 1]
    assert sorted(va.probes_table(frames)["kind"]) == ["backchannel", "noise"]


def test_probes_run_in_worker_processes_reach_the_run_report(tmp_path):
    """With worker processes the probes come back with each trial's summary: the selectivity
    table counts every trial's probes, as an in-process run does."""
    outcome = voicelab.run(ROOT / "examples" / "run-probes.yaml", voicelab.RunOptions(
        artifacts_dir=tmp_path,
        trials=2,
        concurrency=2,
        executor="local",
        workers=2))
    report = read_json(outcome.bundle_path / "run-report.json")
    rates = {rate["name"]: rate for rate in report["selectivity"]}
    assert set(rates) == {"false_stop_rate_backchannel", "false_stop_rate_noise"}, rates
    assert [rates[name]["probes"] for name in sorted(rates)] == [2, 2]
    assert sorted(row["trial"] for row in report["probes"]) == [1, 1, 2, 2]
