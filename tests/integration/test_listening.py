"""Listening turn taking (``turn_detection: server_vad``) over real sockets with the fake
product: a live line, a simulated user that decides from the product's audio when a reply is
over, speech-based latency, barge-in by speaking, first_speaker auto, vacuous verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import read_json, read_voice_events

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
#: the product's timings are judged here, not the test machine's load
TRUSTED_TIMINGS = ("measurement={max_loop_lag_p99_ms: 1000, max_loop_lag_max_ms: 1000,"
                   " max_first_audio_error_ms: 1000}")
LISTENING = ["pace_audio=true", "endpoint.settings.turn_detection=server_vad", TRUSTED_TIMINGS]
SHORT = ["endpoint.settings.opening_text=Hello, your daily plan please?",
         "endpoint.settings.reply_text=Your daily plan is recorded and the reminder saved."]


def run(tmp_path: Path, *overrides: str, trials: int = 1):
    return voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=trials,
        artifacts_dir=tmp_path,
        overrides=[*LISTENING, *SHORT, *overrides]))


def trial_files(outcome, index: int = 1) -> tuple[dict, dict, list[dict]]:
    folder = outcome.bundle_path / f"trial-{index:03d}"
    return (read_json(folder / "trial-report.json"), read_json(folder / "voice-metrics.json"),
            read_voice_events(folder / "voice-events.jsonl"))


def test_product_first_conversation_on_a_live_line(tmp_path):
    outcome = run(tmp_path)
    report, metrics, events = trial_files(outcome)
    assert outcome.exit_code == 0, report["failures"]
    assert report["exit_reason"] == "endpoint_completion"
    # no commit or response.create was ever sent: the fake refuses them in server_vad
    assert not [e for e in events if e["event_type"] == "user.turn_committed"]
    line = [e for e in events if e["event_type"] == "user.audio_chunk"]
    assert all(e["attributes"]["line"] for e in line)
    # the line streams from connect to hang-up: frames before and after the user's speech
    assert line[0]["turn_id"] is None and line[-1]["turn_id"] is None
    assert {e["turn_id"] for e in line} == {None, "turn-001"}
    ended = next(e for e in events if e["event_type"] == "user.speech_ended")
    assert ended["attributes"]["expects_response"] == "turn-001"
    reply = metrics["turns"][1]
    assert reply["turn_id"] == "turn-001" and reply["reference"] == "speech_end"
    # the fake ends the caller's turn after 500 ms of silence (by its own detector, whose
    # frames differ from the evaluator's): the latency is about that
    assert 400 <= reply["response_latency_ms"] <= 2500
    assert reply["first_audio_latency_ms"] <= reply["response_latency_ms"]
    assert reply["playback_stall_ms"] is not None  # its size is timing: see bench_runner.py
    assert metrics["listener"] == {"jitter_buffer_ms": 60.0, "reply_end_hangover_ms": 700.0}


def test_user_first_and_auto_when_the_product_waits(tmp_path):
    for first_speaker in ("user", "auto"):
        outcome = run(tmp_path / first_speaker, "endpoint.settings.opening_text=",
                      f"scenario.conversation.first_speaker={first_speaker}",
                      "scenario.conversation.first_speaker_wait_seconds=1")
        report, metrics, _ = trial_files(outcome)
        assert outcome.exit_code == 0, report["failures"]
        assert [t["turn_id"] for t in metrics["turns"]] == ["turn-001"]


def test_auto_lets_a_product_that_speaks_open(tmp_path):
    outcome = run(tmp_path, "scenario.conversation.first_speaker=auto")
    report, metrics, _ = trial_files(outcome)
    assert outcome.exit_code == 0, report["failures"]
    assert [t["turn_id"] for t in metrics["turns"]] == ["turn-000", "turn-001"]


def test_a_product_expected_to_open_that_waits_says_what_to_change(tmp_path):
    outcome = run(tmp_path, "endpoint.settings.opening_text=",
                  "scenario.eval_spec.response_timeout_seconds=1")
    report, _, _ = trial_files(outcome)
    assert outcome.exit_code == 4 and report["exit_reason"] == "no_response"
    message = report["failures"][0]["message"]
    assert "did not speak first" in message and "first_speaker: user" in message


@pytest.mark.parametrize("mode", ["client", "server_vad"])
def test_silence_before_speech_is_not_an_answer(tmp_path, mode):
    """A product that streams 800 ms of silence frames before it speaks: the first packet comes
    at once, the speech 800 ms later, and response_latency_ms says so."""
    overrides = [f"endpoint.settings.turn_detection={mode}",
                 "endpoint.settings.leading_silence_ms=800",
                 "endpoint.settings.audio_pacing=realtime"]
    outcome = run(tmp_path, *overrides)
    report, metrics, _ = trial_files(outcome)
    assert outcome.exit_code == 0, report["failures"]
    reply = metrics["turns"][1]
    gap = reply["response_latency_ms"] - reply["first_audio_latency_ms"]
    # 800 ms of silence plus the 40 ms lead-in of tone speech; in client mode the latency is
    # timed from the end of the speech, the first packet from the commit
    assert 780 <= gap <= 1000 if mode == "server_vad" else gap >= 780


def test_a_product_streaming_silence_between_replies(tmp_path):
    outcome = run(tmp_path, "endpoint.settings.idle_silence=true")
    report, metrics, events = trial_files(outcome)
    assert outcome.exit_code == 0, report["failures"]
    reply = metrics["turns"][1]
    # silence frames arrive all the time: the first packet after the user's speech is one of
    # them, the answer's speech comes after the fake's 500 ms end-of-turn silence
    assert reply["first_audio_latency_ms"] < 200
    assert reply["response_latency_ms"] >= 400


BARGE = ['script.turns=[{"response": "Wait, one thing first.", "keywords": ["plan"], '
         '"interrupt_after_seconds": 0.8}, {"response": "Please record the plan and save the '
         'reminder.", "keywords": ["else", "plan", "one"]}]',
         "endpoint.settings.complete_after_turns=2",
         "endpoint.settings.opening_text=Hello! Tell me your daily plan and the reminder you "
         "want saved, with every detail you can think of, please.",
         "scenario.eval_spec.max_interruption_stop_ms=600"]


def test_barge_in_by_speaking_to_a_product_that_stops_on_speech(tmp_path):
    outcome = run(tmp_path, *BARGE)
    report, metrics, events = trial_files(outcome)
    opening = metrics["turns"][0]
    assert opening["interrupted"] is True, report
    barge = next(e for e in events if e["event_type"] == "user.barge_in")
    assert barge["attributes"]["cancel_sent"] is False  # on a line, the caller only speaks
    # the fake stops once it has heard 150 ms of the caller's speech (the line's 100 ms
    # frames reach it whole); its speech may end earlier, in a pause between two words
    assert opening["status"] == "cancelled"
    assert opening["interruption_stop_latency_ms"] <= 400
    verdicts = {v["name"]: v for v in report["verdicts"]}
    assert verdicts["interruption_honoured"]["passed"] is True
    assert outcome.exit_code == 0, report["failures"]


def test_a_product_that_ignores_the_caller_fails_the_bound(tmp_path):
    outcome = run(tmp_path, *BARGE, "endpoint.settings.stop_on_speech_ms=null")
    report, metrics, _ = trial_files(outcome)
    opening = metrics["turns"][0]
    assert opening["interrupted"] is True
    assert opening["interruption_stop_latency_ms"] > 1000  # it talked on over the caller
    verdicts = {v["name"]: v for v in report["verdicts"]}
    assert verdicts["interruption_honoured"]["passed"] is False
    assert outcome.exit_code == 3


def test_client_mode_barge_in_is_timed_from_the_barge_in_speech(tmp_path):
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        artifacts_dir=tmp_path,
        overrides=[
        *SHORT[1:], *BARGE, "endpoint.settings.audio_pacing=realtime", TRUSTED_TIMINGS]))
    report, metrics, events = trial_files(outcome)
    assert outcome.exit_code == 0, report["failures"]
    opening = metrics["turns"][0]
    assert opening["interrupted"] is True
    assert opening["interruption_stop_latency_ms"] < 300
    started = next(e for e in events if e["event_type"] == "user.turn_started"
                   and e["turn_id"] == "turn-001")
    assert started["attributes"]["speech_start_sample"] is not None


def test_nothing_to_judge_is_inconclusive_and_fails_the_gate(tmp_path):
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        artifacts_dir=tmp_path,
        overrides=["endpoint.settings.transcripts=false"]))
    report, _, _ = trial_files(outcome)
    verdicts = {v["name"]: v for v in report["verdicts"]}
    for name in ("expected_topics", "concise"):
        assert verdicts[name]["status"] == "inconclusive" and not verdicts[name]["passed"]
        assert "no transcript" in verdicts[name]["why"]
    assert outcome.exit_code == 3


def test_server_vad_needs_a_paced_line(tmp_path):
    import subprocess
    import sys

    process = subprocess.run(
        [sys.executable, "-m", "voicelab", "validate", str(EXAMPLE), "--set",
         "endpoint.settings.turn_detection=server_vad"], capture_output=True, text=True,
        timeout=60)
    assert process.returncode == 2
    assert "pace_audio: turn_detection server_vad" in process.stderr
    ok = subprocess.run([sys.executable, "-m", "voicelab", "validate", str(EXAMPLE), "--set",
                         "endpoint.settings.turn_detection=server_vad", "--set",
                         "pace_audio=true"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "turn taking: server_vad" in ok.stdout
    json.dumps(ok.stdout)


def test_the_listening_example_runs_through_the_cli(tmp_path):
    import subprocess
    import sys

    process = subprocess.run(
        [sys.executable, "-m", "voicelab", "run", str(ROOT / "examples" / "run-listening.yaml"),
         "--artifacts-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert process.returncode == 0, process.stdout + process.stderr
    assert "trial-001 seed 42: pass" in process.stdout
