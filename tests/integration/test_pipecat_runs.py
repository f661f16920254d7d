"""Full runs through the command line against the pipecat-protocol bot, launched by voicelab
(``endpoint.launch``) for each trial: the bot greets or waits, a user who barges in on a bot
that stops and on one that talks on; voicelab's timing figures against the bot's own send
times, what the bot heard, product.log; and settings errors as one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from voicelab.artifacts import read_json, read_voice_events

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: voicelab's response latency against the truth (the bot's first speech sample sent, from the
#: user's last speech sample sent): measured errors are a few ms (the socket, the event loop)
LATENCY_TOLERANCE_MS = 30.0

GREETING = ("Hello! Tell me your daily plan and the reminder you want saved, with every detail "
            "you can think of, please.")
BARGE_SCRIPT = {
    "persona_voice": "en-US-AvaNeural", "post_script_completion_wait_seconds": 0,
    "turns": [{"response": "Wait, one thing first.", "keywords": ["plan"],
               "interrupt_after_seconds": 0.8},
              {"response": "Please record the plan and save the reminder.",
               "keywords": ["else", "plan", "one"]}]}
BARGE_BOT = {"greeting": GREETING,
             "replies": ["Sure, what else belongs in your daily plan?",
                         "Your daily plan is recorded and the reminder is saved."],
             "heard": ["wait one thing first", "please record the plan and save the reminder"]}

CASES: dict[str, dict[str, Any]] = {
    "product first": {"bot": {}, "conversation": {}},
    "user first": {"bot": {"greeting": ""}, "conversation": {"first_speaker": "user"}},
    "barge-in, the bot stops": {"bot": BARGE_BOT, "script": BARGE_SCRIPT,
                                "eval_spec": {"max_interruption_stop_ms": 600}},
    "barge-in, the bot talks on": {"bot": {**BARGE_BOT, "stop_on_speech_ms": None},
                                   "script": BARGE_SCRIPT,
                                   "eval_spec": {"max_interruption_stop_ms": 600}},
}


def write_suite(folder: Path, case: dict[str, Any]) -> Path:
    folder.mkdir(parents=True)
    timings = folder / "bot-timings.json"
    (folder / "bot.json").write_text(json.dumps({**case["bot"], "timings_path": str(timings)}))
    scenario = {
        "id": "pipecat-bot-exchange", "description": "Confirm a daily plan with a pipecat bot",
        "expected_topics": ["plan recorded", "reminder saved"],
        "conversation": {"max_turns": 4, "required_capabilities": [
            "streaming_input", "streaming_output", "input_transcripts"],
            **case.get("conversation", {})},
        "eval_spec": {"expected_exit": "script_exhaustion",
                      "limits": {"max_turns": 4, "max_time_seconds": 40},
                      **case.get("eval_spec", {})}}
    (folder / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    script = EXAMPLES / "script-workload-neutral-voice.yaml"
    if "script" in case:
        script = folder / "script.yaml"
        script.write_text(yaml.safe_dump(case["script"]))
    run = {
        "scenario_path": "scenario.yaml",
        "persona_path": str(EXAMPLES / "persona-workload-neutral-voice.yaml"),
        "data_path": str(EXAMPLES / "data-workload-neutral-voice.yaml"),
        "script_path": str(script), "persona_mode": "scripted", "speech_provider": "tone",
        "trial_seed": 42, "pace_audio": True, "artifacts_dir": "artifacts",
        # the bot's timings are judged here, not the test machine's load
        "measurement": {"max_loop_lag_p99_ms": 1000, "max_loop_lag_max_ms": 1000,
                        "max_first_audio_error_ms": 1000},
        "endpoint": {
            "adapter": "pipecat",
            "settings": {"uri": "ws://127.0.0.1:{port}/"},
            "launch": {"command": [sys.executable, "-m", "voicelab.doubles.pipecat", "--port",
                                   "{port}", "--settings", f"@{folder / 'bot.json'}"],
                       "ready_pattern": '"uri"', "ready_timeout_seconds": 30}}}
    (folder / "run.yaml").write_text(yaml.safe_dump(run))
    return folder / "run.yaml"


@dataclass
class Outcome:
    code: int
    output: str
    trial: Path
    timings: list[dict[str, Any]]

    def files(self) -> tuple[dict, dict, list[dict]]:
        return (read_json(self.trial / "trial-report.json"),
                read_json(self.trial / "voice-metrics.json"),
                read_voice_events(self.trial / "voice-events.jsonl"))


def run_case(folder: Path, name: str) -> Outcome:
    run_file = write_suite(folder, CASES[name])
    process = subprocess.run([sys.executable, "-m", "voicelab", "run", str(run_file),
                              "--quiet"], capture_output=True, text=True, timeout=240)
    bundle = next((folder / "artifacts").glob("*/run-report.json")).parent
    timings = json.loads((folder / "bot-timings.json").read_text())["calls"][0]
    return Outcome(process.returncode, process.stdout + process.stderr, bundle / "trial-001",
                   timings)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every case run once; two at a time (real-time calls that mostly wait)."""
    root = tmp_path_factory.mktemp("pipecat-runs")
    names = list(CASES)
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = pool.map(lambda index: run_case(root / f"case-{index}", names[index]),
                        range(len(names)))
        return dict(zip(names, runs, strict=True))


def line_times(events: list[dict]) -> tuple[dict[str, int], dict[str, int]]:
    """Monotonic ns of each user turn's first and last speech sample sent on the line."""
    start_ns = events[0]["attributes"]["clock_start_ns"]

    def of(kind: str) -> dict[str, int]:
        return {e["turn_id"]: start_ns + e["monotonic_offset_ns"] for e in events
                if e["event_type"] == kind}

    return of("user.speech_started"), of("user.speech_ended")


def latency_errors(outcome: Outcome) -> list[float]:
    """Measured minus true response latency, per answered user turn."""
    _, metrics, events = outcome.files()
    _, ended = line_times(events)
    truth = {f"turn-{reply['utterance']:03d}": reply for reply in outcome.timings
             if reply["utterance"] is not None and reply["speech_start_ns"] is not None}
    errors = []
    for turn in metrics["turns"]:
        reply = truth.get(turn["turn_id"])
        if reply is not None and turn["response_latency_ms"] is not None:
            true_ms = (reply["speech_start_ns"] - ended[turn["turn_id"]]) / 1e6
            errors.append(turn["response_latency_ms"] - true_ms)
    return errors


@pytest.mark.parametrize("name", ["product first", "user first"])
def test_a_call_with_a_pipecat_bot_through_the_cli(outcomes, name):
    outcome = outcomes[name]
    report, metrics, events = outcome.files()
    assert outcome.code == 0, outcome.output
    assert "trial-001 seed 42: pass (exit script_exhaustion)" in outcome.output
    expected_turns = ["turn-000", "turn-001"] if name == "product first" else ["turn-001"]
    assert [t["turn_id"] for t in metrics["turns"]] == expected_turns
    # never a commit on this wire: the bot heard the end of the user's speech itself
    assert not [e for e in events if e["event_type"] == "user.turn_committed"]
    errors = latency_errors(outcome)
    assert len(errors) == 1 and abs(errors[0]) <= LATENCY_TOLERANCE_MS, errors
    transcript = read_json(outcome.trial / "transcript.json")
    user = [t for t in transcript["turns"] if t["role"] == "user"]
    assert [t["heard_as"] for t in user] == ["please record the plan and save the reminder"]
    assistant = [t["text"] for t in transcript["turns"] if t["role"] == "assistant"]
    assert assistant[-1] == "Your daily plan is recorded and the reminder is saved."
    log = (outcome.trial / "product.log").read_text()
    assert '"uri": "ws://127.0.0.1:' in log and "ready" in log
    assert "product.log" in report["files"]


def test_a_barge_in_on_a_bot_that_stops(outcomes):
    outcome = outcomes["barge-in, the bot stops"]
    report, metrics, events = outcome.files()
    assert outcome.code == 0, outcome.output
    greeting = metrics["turns"][0]
    assert greeting["turn_id"] == "turn-000" and greeting["interrupted"] is True
    assert greeting["interruption_stop_latency_ms"] <= 400
    # the bot's interruption frame: it stopped and the audio it had queued was dropped
    stopped = [e for e in events if e["event_type"] == "product.interruption"]
    assert len(stopped) == 1 and stopped[0]["attributes"]["flush"] is True
    assert stopped[0]["attributes"]["dropped_ms"] >= 0
    assert outcome.timings[0]["stopped_ns"] is not None
    # the true stop latency: the bot's last speech sample sent (no later than its interruption
    # frame), from the first sample of the user's barge-in speech
    started, _ = line_times(events)
    bot = outcome.timings[0]
    true_ms = (min(bot["speech_end_ns"], bot["stopped_ns"]) - started["turn-001"]) / 1e6
    stop_error_ms = greeting["interruption_stop_latency_ms"] - max(0.0, true_ms)
    # never later than the bot's own stop
    assert stop_error_ms <= LATENCY_TOLERANCE_MS, true_ms
    if bot["speech_end_ns"] < bot["stopped_ns"]:
        # the bot had fallen silent before its interruption frame: all it said was heard
        assert abs(stop_error_ms) <= LATENCY_TOLERANCE_MS, true_ms
    # else the frame cut a sound short and the listener flushed what it had not played yet
    # (dropped_ms): the bot cannot know which of its sounds were heard, so its stop is only
    # an upper bound of the heard one
    verdicts = {v["name"]: v for v in report["verdicts"]}
    assert verdicts["interruption_honoured"]["passed"] is True
    assert all(abs(error) <= LATENCY_TOLERANCE_MS for error in latency_errors(outcome))
    transcript = read_json(outcome.trial / "transcript.json")
    assert [t["heard_as"] for t in transcript["turns"] if t["role"] == "user"] == \
        ["wait one thing first", "please record the plan and save the reminder"]


def test_a_barge_in_on_a_bot_that_talks_on(outcomes):
    outcome = outcomes["barge-in, the bot talks on"]
    report, metrics, events = outcome.files()
    greeting = metrics["turns"][0]
    assert greeting["interrupted"] is True
    assert greeting["interruption_stop_latency_ms"] > 1000  # it finished its greeting
    assert not [e for e in events if e["event_type"] == "product.interruption"]
    assert outcome.timings[0]["stopped_ns"] is None
    verdicts = {v["name"]: v for v in report["verdicts"]}
    assert verdicts["interruption_honoured"]["passed"] is False
    assert outcome.code == 3, outcome.output


@pytest.mark.parametrize(("setting", "words"), [
    ("endpoint.settings.sample_rate_hz=96000", "endpoint.settings.sample_rate_hz"),
    ("endpoint.settings.uri=http://127.0.0.1:1/", "must be a ws:// or wss:// URI"),
    ("endpoint.settings.turn_detection=client", "endpoint.settings.turn_detection"),
])
def test_bad_settings_are_one_line_and_exit_2(tmp_path, setting, words):
    run_file = write_suite(tmp_path / "suite", CASES["product first"])
    process = subprocess.run([sys.executable, "-m", "voicelab", "validate", str(run_file),
                              "--set", setting], capture_output=True, text=True, timeout=60)
    assert process.returncode == 2, process.stdout + process.stderr
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in process.stderr
    assert lines[0].startswith("voice-evaluator: error: ") and words in lines[0]
    valid = subprocess.run([sys.executable, "-m", "voicelab", "validate", str(run_file)],
                           capture_output=True, text=True, timeout=60)
    assert valid.returncode == 0 and "turn taking: server_vad" in valid.stdout
