"""Hesitation turns on every listening wire: a caller who pauses mid-turn ("my account number
is ... 4 4 7 1") and a product whose end-of-turn silence is a setting. A pause longer than
the product's silence threshold is cut into (``product_cut_in``, the ``no_cut_in`` verdict
fails for that reason); a shorter one is not. The fake product over protocol v1, the Twilio
Media Streams bot and the pipecat bot, each launched on 127.0.0.1; each call is a few seconds
of real time."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import voicelab
from voicelab.artifacts import read_json, read_voice_events

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HESITATION = "My account number is {pause} 4 4 7 1"


def _launched(module: str, settings: dict[str, Any], adapter: str) -> dict[str, Any]:
    return {"adapter": adapter, "settings": {"uri": "ws://127.0.0.1:{port}/"},
            "launch": {"command": [sys.executable, "-m", module, "--port", "{port}",
                                   "--settings", json.dumps(settings)],
                       "ready_pattern": '"uri"', "ready_timeout_seconds": 30}}


def endpoint(wire: str, *, silence_ms: float) -> dict[str, Any]:
    """A listening product on ``wire`` that ends the caller's turn after ``silence_ms``."""
    if wire == "fake":
        return {"adapter": "fake", "settings": {
            "turn_detection": "server_vad", "vad_silence_ms": silence_ms,
            "opening_text": "Hello, your account number please?",
            "reply_text": "Thank you, that is noted."}}
    if wire == "twilio":
        return _launched("voicelab.doubles.twilio", {
            "greeting": "Hello, your account number please?", "reply_text": "Thank you.",
            "vad_silence_ms": silence_ms, "reply_latency_ms": 0}, "twilio")
    return _launched("voicelab.doubles.pipecat", {
        "greeting": "Hello, your account number please?", "replies": ["Thank you."],
        "vad_silence_ms": silence_ms}, "pipecat")


def write_run(folder: Path, wire: str, *, silence_ms: float, pause_seconds: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    scenario = {"id": "hesitation", "description": "a caller who pauses mid-number",
                "conversation": {"first_speaker": "product"},
                "eval_spec": {"no_cut_in": True,
                              "limits": {"max_turns": 2, "max_time_seconds": 30}}}
    script = {"post_script_completion_wait_seconds": 0,
              "turns": [{"response": HESITATION, "pauses": [pause_seconds]}]}
    run = {"scenario_path": "scenario.yaml", "script_path": "script.yaml",
           "persona_path": str(EXAMPLES / "persona-workload-neutral-voice.yaml"),
           "data_path": str(EXAMPLES / "data-workload-neutral-voice.yaml"),
           "persona_mode": "scripted", "speech_provider": "tone", "trial_seed": 5,
           "pace_audio": True,
           # the product's timings are judged here, not the test machine's load
           "measurement": {"max_loop_lag_p99_ms": 1000, "max_loop_lag_max_ms": 1000,
                           "max_first_audio_error_ms": 1000},
           "endpoint": endpoint(wire, silence_ms=silence_ms)}
    for name, document in (("scenario.yaml", scenario), ("script.yaml", script),
                           ("run.yaml", run)):
        (folder / name).write_text(yaml.safe_dump(document), encoding="utf-8")
    return folder / "run.yaml"


def call(folder: Path, wire: str, *, silence_ms: float, pause_seconds: float
         ) -> tuple[Any, dict, dict, list[dict]]:
    outcome = voicelab.run(write_run(folder, wire, silence_ms=silence_ms,
                                     pause_seconds=pause_seconds), voicelab.RunOptions(
        trials=1,
        artifacts_dir=folder / "artifacts"))
    trial = outcome.bundle_path / "trial-001"
    return (outcome, read_json(trial / "trial-report.json"),
            read_json(trial / "voice-metrics.json"),
            read_voice_events(trial / "voice-events.jsonl"))


def hesitation_turn(metrics: dict) -> dict:
    (turn,) = [t for t in metrics["turns"] if t.get("user_pauses_ms") is not None]
    return turn


def verdict(report: dict) -> dict:
    return next(v for v in report["verdicts"] if v["name"] == "no_cut_in")


@pytest.mark.parametrize("wire", ["fake", "twilio", "pipecat"])
def test_a_pause_longer_than_the_products_silence_is_cut_into(tmp_path, wire):
    outcome, report, metrics, events = call(tmp_path, wire, silence_ms=400, pause_seconds=1.2)
    started = next(e for e in events if e["event_type"] == "user.turn_started")
    # the bundle says where the pause is: 1.2 s of silence between the two pieces
    (start, end), = started["attributes"]["pauses"]
    assert end - start == 1.2 * 24_000
    assert started["attributes"]["text"] == "My account number is 4 4 7 1"
    turn = hesitation_turn(metrics)
    assert turn["user_pauses_ms"] == [1200.0]
    assert turn["product_cut_in"] is True and turn["cut_in_pause_index"] == 0
    # the product answered once it had heard its 400 ms of silence (its own 10 ms frames,
    # the wire's frames and its reply's attack): inside the pause, not after it
    assert 350 <= turn["cut_in_after_pause_ms"] < 1200
    failed = verdict(report)
    assert failed["status"] == "failed" and failed["critical"]
    assert f"{turn['turn_id']}: " in failed["why"] and "into pause 1 of 1200 ms" in failed["why"]
    assert outcome.exit_code == 3 and report["status"] == "failed"  # the quality gate
    # a cut-into turn has no latency: what follows the caller's end is no answer to it
    assert turn["response_latency_ms"] is None and turn["first_audio_latency_ms"] is None
    if wire == "fake":
        # the fake stops its cut-in reply when the caller speaks again, and answers after
        # its 400 ms of silence: that answer's latency is kept on its own
        assert 350 <= turn["answer_after_cut_in_ms"] <= 2500


def test_a_cut_in_reply_still_playing_when_the_caller_finishes_is_no_latency(tmp_path):
    """The product decides 400 ms into a 800 ms pause, speaks 600 ms later (in the words after
    the pause) and does not stop for the caller: its reply is still playing when the caller
    finishes. Its words then are no answer and its packets no first audio: the turn has no
    latency, no summary counts it, and no latency limit passes it."""
    folder = tmp_path / "run"
    run_file = write_run(folder, "fake", silence_ms=400, pause_seconds=0.8)
    run = yaml.safe_load(run_file.read_text())
    run["endpoint"]["settings"].update(
        stop_on_speech_ms=None, reply_latency_ms=600,
        reply_text="Thank you, I have noted that, one moment while I look it up for you.")
    run_file.write_text(yaml.safe_dump(run))
    scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
    scenario["eval_spec"]["max_first_audio_latency_ms"] = 2000
    (folder / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    outcome = voicelab.run(run_file, voicelab.RunOptions(
        trials=1,
        artifacts_dir=folder / "artifacts"))
    trial = outcome.bundle_path / "trial-001"
    report, metrics = read_json(trial / "trial-report.json"), read_json(trial / "voice-metrics.json")
    turn = hesitation_turn(metrics)
    assert turn["product_cut_in"] is True and turn["cut_in_after_pause_ms"] > 800
    # the reply runs on past the caller's end: no latency, no answer told apart from it
    assert turn["playback_end_ms"] > turn["user_speech_end_ms"] + 500
    assert turn["response_latency_ms"] is None and turn["first_audio_latency_ms"] is None
    # tone speech lies inside the telephone band: the line carries the nominal pause
    assert abs(turn["user_pauses_phone_band_ms"][0] - 800) < 10
    summary = metrics["summary"]
    assert summary["response_latency_ms"]["count"] == 0
    assert summary["first_audio_latency_ms"]["count"] == 1  # the opening only
    assert report["metrics_summary"]["first_audio_latency_ms"]["count"] == 1
    verdicts = {v["name"]: v for v in report["verdicts"]}
    # began after the pause had ended: said so, not "962 ms into pause 1 of 800 ms"
    where = f"{turn['turn_id']}: {turn['cut_in_after_pause_ms'] - 800:.0f} ms into the words " \
            f"after pause 1 of 800 ms"
    assert where in verdicts["no_cut_in"]["why"]
    assert verdicts["first_audio_latency"]["status"] == "failed"
    assert where in verdicts["first_audio_latency"]["why"]


@pytest.mark.parametrize("wire", ["fake", "pipecat"])
def test_a_pause_shorter_than_the_products_silence_is_waited_through(tmp_path, wire):
    outcome, report, metrics, _ = call(tmp_path, wire, silence_ms=900, pause_seconds=0.3)
    turn = hesitation_turn(metrics)
    assert turn["product_cut_in"] is False and "cut_in_after_pause_ms" not in turn
    # the reply came after the whole turn: its latency is the product's silence and more
    assert turn["response_latency_ms"] is not None and turn["response_latency_ms"] >= 800
    assert verdict(report)["status"] == "passed"


def test_a_hesitation_bundle_rescores_to_the_same_bytes(tmp_path):
    outcome, _, _, _ = call(tmp_path, "fake", silence_ms=400, pause_seconds=0.8)
    trial = outcome.bundle_path / "trial-001"
    before = {name: (trial / name).read_bytes() for name in
              ("voice-metrics.json", "trial-report.json")}
    result = voicelab.rescore(outcome.bundle_path, output=tmp_path / "again")
    assert not any(t.changed_verdicts for t in result.trials)
    again = tmp_path / "again" / "trial-001"
    assert (again / "voice-metrics.json").read_bytes() == before["voice-metrics.json"]
    assert json.loads((again / "trial-report.json").read_bytes())["verdicts"] == \
        json.loads(before["trial-report.json"])["verdicts"]
