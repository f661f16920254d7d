"""The product's words from its audio, on wires that carry no transcript: voicelab launches the
Twilio and pipecat bot doubles speaking real words with piper (audio only: no text frames), and
judges ``expected_topics`` from their received audio recognized locally (``transcription:
auto``). A healthy bot passes; a bot that says the wrong thing fails for the words it missed;
``rescore`` recognizes the same words from the bundle alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from voicelab.artifacts import read_json
from voicelab.metrics import normalize_text

pytest.importorskip("pocketsphinx")
pytest.importorskip("piper")

GREETING = "Hello! Thanks for calling."
#: words pocketsphinx reads back reliably, also from 8 kHz mu-law (it hears "saved" as "hate")
HEALTHY = "I recorded your daily plan, and I saved the reminder."
WRONG = "Sorry, the weather today is sunny with a light breeze."
TOPICS = ["recorded", "daily plan", "reminder"]


def write_run(folder: Path, *, adapter: str, reply: str) -> Path:
    """One call to the bot double of ``adapter``: it greets, the caller asks once, it answers
    ``reply`` in piper's voice, sending no transcript of its words (JSON is YAML)."""
    folder.mkdir(parents=True, exist_ok=True)
    if adapter == "twilio":
        bot = {"greeting": GREETING, "replies": [reply], "voice": "piper",
               "hang_up_after_replies": 1}
        settings: dict[str, Any] = {"uri": "ws://127.0.0.1:{port}/"}
        expected_exit = "endpoint_completion"  # the bot hangs up
    else:
        bot = {"greeting": GREETING, "replies": [reply], "voice": "piper", "send_text": False}
        settings = {"uri": "ws://127.0.0.1:{port}/"}
        expected_exit = "script_exhaustion"
    files = {
        "scenario.yaml": {
            "id": f"{adapter}-words", "description": "the bot's words, from its audio",
            "expected_topics": TOPICS,
            "conversation": {"first_speaker": "product"},
            "eval_spec": {"expected_exit": expected_exit,
                          "limits": {"max_turns": 3, "max_time_seconds": 40}}},
        "persona.yaml": {"name": "Jordan", "communication_style": "friendly"},
        "script.yaml": {"post_script_completion_wait_seconds": 0,
                        "turns": [{"response": "Please record my plan and set a reminder."}]},
        "run.yaml": {
            "scenario_path": "scenario.yaml", "persona_path": "persona.yaml",
            "script_path": "script.yaml", "persona_mode": "scripted",
            "speech_provider": "tone", "pace_audio": True, "trial_seed": 7,
            "artifacts_dir": "artifacts",
            # the words are judged here, not the test machine's load
            "measurement": {"max_loop_lag_p99_ms": 1000, "max_loop_lag_max_ms": 1000,
                            "max_first_audio_error_ms": 1000},
            "endpoint": {
                "adapter": adapter, "settings": settings,
                "launch": {"command": [sys.executable, "-m", f"voicelab.doubles.{adapter}",
                                       "--port", "{port}", "--settings", json.dumps(bot)],
                           "ready_pattern": '"uri"', "ready_timeout_seconds": 60}}},
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    return folder / "run.yaml"


def voice_evaluator(*args: str) -> subprocess.CompletedProcess[str]:
    process = subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                             text=True, timeout=240)
    assert "Traceback" not in process.stderr, process.stdout + process.stderr
    return process


class Trial:
    def __init__(self, folder: Path):
        self.folder = folder
        self.report = read_json(folder / "trial-report.json")
        self.transcript = read_json(folder / "transcript.json")
        self.metrics = read_json(folder / "voice-metrics.json")

    def verdict(self, name: str) -> dict[str, Any]:
        return next(v for v in self.report["verdicts"] if v["name"] == name)

    @property
    def said(self) -> list[dict[str, Any]]:
        return [t for t in self.transcript["turns"] if t["role"] == "assistant"]


def call(tmp_path: Path, *, adapter: str, reply: str) -> Trial:
    run_file = write_run(tmp_path / adapter, adapter=adapter, reply=reply)
    validated = voice_evaluator("validate", str(run_file))
    assert validated.returncode == 0, validated.stderr
    # the recognizer is installed: nothing to warn about, and the summary says where the words
    # come from
    assert "warning" not in validated.stdout
    assert "else its audio recognized (asr:pocketsphinx)" in validated.stdout
    process = voice_evaluator("run", str(run_file))
    trial = Trial(next((tmp_path / adapter / "artifacts").glob("*/trial-001")))
    assert trial.report["execution_status"] == "succeeded", process.stdout + process.stderr
    print(f"{adapter}: the bot said {[GREETING, reply]}; recognized "
          f"{[t['text'] for t in trial.said]}; verdicts "
          f"{[(v['name'], v['status']) for v in trial.report['verdicts']]}")
    # the wire carried audio only: every response's words are its audio recognized
    assert [t["text_source"] for t in trial.said] == ["asr:pocketsphinx"] * 2
    assert [t["transcript_source"] for t in trial.metrics["turns"]] == ["asr:pocketsphinx"] * 2
    return trial


def heard(text: str, expected: str) -> float:
    """The fraction of ``expected``'s words found in ``text`` (recognition is not exact)."""
    words = set(normalize_text(text).split())
    wanted = normalize_text(expected).split()
    return sum(word in words for word in wanted) / len(wanted)


@pytest.mark.slow
@pytest.mark.parametrize("adapter", ["twilio", "pipecat"])
def test_a_healthy_bot_passes_expected_topics_from_its_recognized_audio(tmp_path, adapter):
    trial = call(tmp_path, adapter=adapter, reply=HEALTHY)
    topics = trial.verdict("expected_topics")
    assert topics["status"] == "passed" and topics["observed"] == TOPICS, topics
    assert trial.report["passed"], trial.report["verdicts"]
    greeting, answer = trial.said
    assert heard(greeting["text"], GREETING) >= 0.6, greeting
    assert heard(answer["text"], HEALTHY) >= 0.7, answer
    if adapter == "pipecat":
        # rescore recognizes the same words from the bundle alone
        before = (trial.folder / "transcript.json").read_bytes()
        rescored = voice_evaluator("rescore", str(trial.folder.parent))
        assert rescored.returncode == 0, rescored.stdout + rescored.stderr
        assert (trial.folder / "transcript.json").read_bytes() == before


@pytest.mark.slow
def test_a_bot_that_says_the_wrong_thing_fails_expected_topics_for_its_words(tmp_path):
    # on Twilio's 8 kHz mu-law, where recognition is hardest (pipecat: the same, measured)
    trial = call(tmp_path, adapter="twilio", reply=WRONG)
    topics = trial.verdict("expected_topics")
    assert topics["status"] == "failed", topics
    assert topics["why"] == f"missing from the assistant transcript: {', '.join(TOPICS)}"
    assert not trial.report["passed"]
    assert heard(trial.said[1]["text"], WRONG) >= 0.5, trial.said[1]
