"""Replay: a run's recorded user audio sent again to the fake product over real sockets, trial by
trial; the same product gives the same verdicts, the product hears the same samples, a slower
product is waited for (never talked over), and compare pairs the two runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import voicelab
from voicelab.analysis import compare
from voicelab.artifacts import read_json, read_voice_events
from voicelab.artifacts._reader import read_audio_stream
from voicelab.personas._replay import read_recorded_trial

ROOT = Path(__file__).resolve().parents[2]
OFFICE = ROOT / "examples" / "run-office-noise.yaml"
#: two user turns (the first a barge-in 1 s into the opening), a realtime-paced reply, the
#: office's noise mixed into both: what the replay must send again sample for sample
TWO_TURNS = ['script.turns=[{"response": "Wait, one thing first.", "keywords": ["daily plan"], '
             '"interrupt_after_seconds": 1.0}, {"response": "Please record the plan and save '
             'the reminder.", "keywords": ["else", "plan"]}]',
             "endpoint.settings.audio_pacing=realtime", "endpoint.settings.pacing_speed=4",
             "endpoint.settings.complete_after_turns=2"]
SLOWER_MS = 600.0
#: the product's words cut short: with speech metrics each reply's audio is recognized
#: (pocketsphinx, the run's slowest step, in proportion to the audio) twice, in the run and
#: in its replay; the user's turns, which the test measures, are unchanged
SHORT_REPLIES = ["endpoint.settings.opening_text=Your daily plan reminder?",
                 "endpoint.settings.reply_text=Plan recorded, reminder saved."]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def _trials(bundle: Path) -> list[Path]:
    return sorted(bundle.glob("trial-*"))


def _outcome(trial_dir: Path) -> tuple:
    report = read_json(trial_dir / "trial-report.json")
    return (trial_dir.name, report["seed"], report["exit_reason"], report["passed"],
            [(v["name"], v["passed"]) for v in report["verdicts"]])


def _user_turns(trial_dir: Path) -> list[tuple]:
    """Each user turn as the product received it: id, samples, barge-in point."""
    return [(turn.turn_id, turn.audio.to_bytes(), turn.barge_in_of, turn.after_product_audio_ms)
            for turn in read_recorded_trial(trial_dir).turns]


def _line_background(trial_dir: Path) -> np.ndarray:
    """What a live line carried between utterances (frames of no turn), as float samples."""
    stream = np.frombuffer(read_audio_stream(trial_dir / "user-sent.wav"), dtype="<i2")
    pieces, position = [], 0
    for event in read_voice_events(trial_dir / "voice-events.jsonl"):
        if event["event_type"] == "user.audio_chunk":
            count = event["pcm"]["byte_count"] // 2
            if not event["turn_id"]:
                pieces.append(stream[position:position + count])
            position += count
    return np.concatenate(pieces).astype(np.float64) if pieces else np.zeros(0)


def _never_talked_over(trial_dir: Path) -> list[tuple[str, float, float]]:
    """(turn, when its audio started, when the reply before it ended on the listener timeline)
    for every user turn that is not a barge-in."""
    events = read_voice_events(trial_dir / "voice-events.jsonl")
    replies = {t["turn_id"]: t for t in read_json(trial_dir / "voice-metrics.json")["turns"]}
    barge_ins = {e["turn_id"] for e in events if e["event_type"] == "user.barge_in"}
    starts: dict[str, float] = {}
    for event in events:
        if event["event_type"] in ("user.audio_chunk", "user.speech_started") \
                and event["turn_id"] and event["turn_id"] not in starts:
            starts[event["turn_id"]] = event["listener_offset_ns"] / 1e6
    checked = []
    for turn_id, start_ms in starts.items():
        previous = f"turn-{int(turn_id.split('-')[1]) - 1:03d}"
        if turn_id in barge_ins or previous not in replies:
            continue
        checked.append((turn_id, start_ms, replies[previous]["playback_end_ms"]))
    return checked


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outcome = voicelab.run(OFFICE, voicelab.RunOptions(
        trials=2,
        overrides=TWO_TURNS,
        artifacts_dir=tmp_path_factory.mktemp("original")))
    assert outcome.exit_code == 0
    return outcome.bundle_path


def test_replay_against_the_same_product_reproduces_verdicts_and_audio(original, tmp_path):
    outcome = voicelab.replay(original, artifacts_dir=tmp_path)
    replayed = outcome.bundle_path
    assert outcome.exit_code == 0
    assert [_outcome(t) for t in _trials(replayed)] == [_outcome(t) for t in _trials(original)]
    for before, after in zip(_trials(original), _trials(replayed), strict=True):
        # what the product received, sample for sample: the noisy speech of both turns
        assert _user_turns(after) == _user_turns(before)
        assert (after / "user-sent.wav").read_bytes() == (before / "user-sent.wav").read_bytes()
        # the barge-in came 1 s into the opening again, not at a fixed offset in the call
        metrics = read_json(after / "voice-metrics.json")["turns"]
        assert [t["interrupted"] for t in metrics] == [True, False, False]
        # no speech was synthesized and no noise mixed in again: the figures of the mix are
        # the original's (the noisy audio is the same), so is the input SNR of every turn
        events = read_voice_events(after / "voice-events.jsonl")
        synthesized = [e for e in events if e["event_type"] == "speech.synthesized"]
        assert {e["attributes"]["provider"] for e in synthesized} == {"replay"}

        def mixes(trial: Path) -> list[dict]:
            return [e["attributes"] for e in read_voice_events(trial / "voice-events.jsonl")
                    if e["event_type"] == "environment.mixed"]

        assert mixes(after) == mixes(before) and mixes(after)[0]["noise_rms"] > 0
        assert [t["input_speech_to_noise_db"] for t in metrics] == \
            [t["input_speech_to_noise_db"] for t in read_json(before / "voice-metrics.json")
             ["turns"]]
        session = read_json(after / "persona-session.json")
        assert session["replay_of"] == str(before)
        assert session["turns"] == [{"turn_id": "turn-001", "reason": "barge_in"},
                                    {"turn_id": "turn-002", "reason": "after_reply"}]
    report = read_json(replayed / "run-report.json")
    origin = read_json(original / "run-report.json")
    assert report["replay_of"] == {"run_id": origin["run_id"], "bundle_path": str(original)}
    settings = read_json(_trials(replayed)[0] / "resolved-settings.json")["resolved"]
    assert settings["persona_mode"] == "replay"
    assert settings["persona_settings"] == {"bundle": str(original)}
    comparison = compare(original, replayed)
    assert comparison.pairs == 2 and comparison.unpaired.empty
    assert comparison.pass_rate.both == 2 and comparison.flips.empty


@pytest.mark.parametrize(("overrides", "exit_reason"), [
    # says "saved" but saves nothing: the outcome verdicts fail
    (["endpoint.settings.claim_without_tool=true"], "endpoint_completion"),
    # no script turn ever matches: the user asks to repeat once, then gives up
    (['script.turns=[{"response": "Zebras.", "keywords": ["zebra"]}]',
      "script.max_repeat_requests=1", "endpoint.settings.complete_after_turns=0"],
     "repeat_limit"),
], ids=["failed-outcome", "repeat-limit"])
def test_failing_verdicts_and_the_persona_s_ending_are_reproduced(overrides, exit_reason,
                                                                   tmp_path):
    original = voicelab.run(OFFICE, voicelab.RunOptions(
        trials=1,
        overrides=overrides,
        artifacts_dir=tmp_path / "original"))
    assert original.exit_code == 3
    outcome = voicelab.replay(original.bundle_path, artifacts_dir=tmp_path / "replay")
    assert outcome.exit_code == 3
    before, after = _trials(original.bundle_path)[0], _trials(outcome.bundle_path)[0]
    assert _outcome(after) == _outcome(before)
    assert _outcome(after)[2] == exit_reason
    assert not all(passed for _, passed in _outcome(after)[4])
    assert _user_turns(after) == _user_turns(before)


def test_a_slower_product_is_waited_for_and_compare_shows_the_latency(original, tmp_path):
    process = _cli("replay", str(original), "--artifacts-dir", str(tmp_path),
                   "--set", f"endpoint.settings.reply_latency_ms={SLOWER_MS}", "--quiet")
    assert process.returncode == 0, process.stdout + process.stderr
    assert "replay of: " in process.stdout
    replayed = Path(process.stdout.split("bundle: ")[1].split()[0])
    assert f"latest: {tmp_path / 'latest'} now points to this replay ({replayed.name}), not " \
           "to the run it replayed" in process.stdout
    for trial in _trials(replayed):
        checked = _never_talked_over(trial)
        assert [turn for turn, _, _ in checked] == ["turn-002"]
        # the second turn starts once the (later) reply to the first has played to its end
        assert all(start >= end - 0.001 for _, start, end in checked), checked
        assert _user_turns(trial) == _user_turns(original / trial.name)
    comparison = compare(original, replayed)
    assert comparison.pairs == 2
    latency = comparison.metric("response_latency_ms", "median")
    assert latency.candidate - latency.baseline >= SLOWER_MS * 0.8  # the fake's added latency
    process = _cli("compare", str(original), str(replayed), "--max-response-latency-p95-"
                   "increase-ms", "100")
    assert process.returncode == 3, process.stdout + process.stderr


def test_listening_replay_keeps_the_turn_taking(tmp_path):
    """server_vad: a live line, the simulated user decides from the product's audio when its
    reply has ended, and the slower product's reply still ends before the user speaks again."""
    listening = ["pace_audio=true", "endpoint.settings.turn_detection=server_vad",
                 "endpoint.settings.opening_text=Hello, your plan please?",
                 "endpoint.settings.reply_text=Your daily plan is recorded and the reminder "
                 "saved.",
                 "endpoint.settings.complete_after_turns=2",
                 'script.turns=[{"response": "Plan the week."}, {"response": "Save it."}]']
    original = voicelab.run(OFFICE, voicelab.RunOptions(
        trials=1,
        overrides=listening,
        artifacts_dir=tmp_path / "original")).bundle_path
    outcome = voicelab.replay(original, artifacts_dir=tmp_path / "replay",
                              overrides=[f"endpoint.settings.reply_latency_ms={SLOWER_MS}"])
    assert outcome.exit_code == 0, outcome.trials[0].report.verdicts
    before, after = _trials(original)[0], _trials(outcome.bundle_path)[0]
    assert _outcome(after) == _outcome(before)
    assert [t[:2] for t in _user_turns(after)] == [t[:2] for t in _user_turns(before)]
    checked = _never_talked_over(after)
    assert [turn for turn, _, _ in checked] == ["turn-001", "turn-002"]
    assert all(start >= end for _, start, end in checked), checked
    # between utterances the line carries the office, as in a run (not digital silence)
    background = _line_background(after)
    assert background.shape[0] > 24_000 and np.sqrt(np.mean(background ** 2.0)) > 10.0


def test_a_telephony_line_to_the_product_is_not_applied_twice(tmp_path):
    # the product received coded audio with lost packets concealed: the replay sends exactly
    # that, with no second line; what the user hears still comes down its to_user line
    line = ("environment.channel={to_product: {codec: mulaw, packet_ms: 20, loss: {model: "
            "independent, rate: 0.05}}, to_user: {codec: mulaw, packet_ms: 20}}")
    original = voicelab.run(OFFICE, voicelab.RunOptions(
        trials=1,
        overrides=[line],
        artifacts_dir=tmp_path / "original")).bundle_path
    outcome = voicelab.replay(original, artifacts_dir=tmp_path / "replay")
    assert outcome.exit_code == 0
    before, after = _trials(original)[0], _trials(outcome.bundle_path)[0]
    assert _outcome(after) == _outcome(before)
    assert (after / "user-sent.wav").read_bytes() == (before / "user-sent.wav").read_bytes()
    channel = read_json(after / "resolved-environment.json")["resolved"]["channel"]
    assert channel["to_product"] is None and channel["to_user"]["codec"] == "mulaw"
    assert (after / "user-heard.wav").is_file()


def test_a_bundle_whose_environment_files_are_gone_still_replays(original, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(original, moved)
    path = moved / "trial-001" / "resolved-environment.json"
    document = read_json(path)
    document["resolved"]["base_noise"] = str(tmp_path / "elsewhere" / "office-hum.wav")
    path.write_text(json.dumps(document), encoding="utf-8")
    process = _cli("replay", str(moved), "--artifacts-dir", str(tmp_path / "replay"), "--quiet")
    assert process.returncode == 0, process.stdout + process.stderr
    assert "office-hum.wav) is not found" in process.stderr  # said, not silently dropped
    replayed = Path(process.stdout.split("bundle: ")[1].split()[0])
    for before, after in zip(_trials(original), _trials(replayed), strict=True):
        assert _outcome(after) == _outcome(before)
        assert _user_turns(after) == _user_turns(before)
    environment = read_json(_trials(replayed)[0] / "resolved-environment.json")["resolved"]
    assert environment["base_noise"] is None and environment["transient_events"] == []


def test_a_run_file_can_give_the_configuration(original, tmp_path):
    outcome = voicelab.replay(original, run_file=OFFICE, overrides=TWO_TURNS,
                              artifacts_dir=tmp_path)
    assert outcome.exit_code == 0
    assert [_outcome(t) for t in _trials(outcome.bundle_path)] == \
        [_outcome(t) for t in _trials(original)]
    assert outcome.report.run_file == str(OFFICE)
    for before, after in zip(_trials(original), _trials(outcome.bundle_path), strict=True):
        assert _user_turns(after) == _user_turns(before)


def test_a_bundle_that_cannot_be_replayed_exits_2_naming_the_file(original, tmp_path):
    process = _cli("replay", str(tmp_path / "nothing-here"))
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        f"voice-evaluator: error: {tmp_path / 'nothing-here'}: no such run folder"]
    broken = tmp_path / "broken"
    shutil.copytree(original, broken)
    (broken / "trial-002" / "user-sent.wav").unlink()
    process = _cli("replay", str(broken))
    assert process.returncode == 2
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1 and str(broken / "trial-002" / "user-sent.wav") in lines[0], lines
    assert not [p for p in tmp_path.iterdir() if p.name not in ("broken",)]  # nothing ran
    process = _cli("replay", str(original), "--set", "trial_seed=1")
    assert process.returncode == 2 and "trial_seed" in process.stderr
    assert "keeps the original seeds" in process.stderr


def test_a_masked_secret_must_be_given_back(tmp_path):
    env = {**os.environ, "REPLAY_TEST_TOKEN": "s3cret-for-replay"}
    token = "endpoint.settings.access_token=${REPLAY_TEST_TOKEN}"
    original = _cli("run", str(OFFICE), "--trials", "1", "--artifacts-dir",
                    str(tmp_path / "original"), "--set", token, "--quiet", env=env)
    assert original.returncode == 0, original.stdout + original.stderr
    bundle = Path(original.stdout.split("bundle: ")[1].split()[0])
    process = _cli("replay", str(bundle), env=env)
    assert process.returncode == 2
    assert "endpoint.settings.access_token" in process.stderr
    assert "--set endpoint.settings.access_token=${VAR}" in process.stderr
    process = _cli("replay", str(bundle), "--set", token, "--quiet", env=env)
    assert process.returncode == 0, process.stdout + process.stderr
    replayed = Path(process.stdout.split("bundle: ")[1].split()[0])
    for path in replayed.rglob("*.json*"):
        assert "s3cret-for-replay" not in path.read_text(encoding="utf-8"), path


def test_speech_metrics_of_a_replay_measure_against_the_original_clean_speech(tmp_path):
    # with speech_metrics the bundle keeps the clean speech: the replay's input intelligibility
    # compares what it sent (noisy) with that, not with itself
    original = voicelab.run(OFFICE, voicelab.RunOptions(
        trials=1,
        overrides=["speech_metrics=true", *SHORT_REPLIES],
        artifacts_dir=tmp_path / "original")).bundle_path
    outcome = voicelab.replay(original, artifacts_dir=tmp_path / "replay")
    assert outcome.exit_code == 0
    before, after = _trials(original)[0], _trials(outcome.bundle_path)[0]
    for name in ("user-clean.wav", "user-sent.wav"):
        assert (after / name).read_bytes() == (before / name).read_bytes(), name

    def intelligibility(trial: Path) -> list[tuple]:
        return [(t["turn_id"], t["input_stoi"], t["input_pesq_wb"])
                for t in read_json(trial / "voice-metrics.json")["turns"]]

    assert intelligibility(after) == intelligibility(before)
    stoi = intelligibility(after)[1][1]
    assert stoi is not None and stoi < 0.95  # the office noise is in what was sent


def test_a_sweep_is_replayed_cell_by_cell_and_pairs_with_the_original(tmp_path):
    sweep = ROOT / "examples" / "sweep-workload-neutral.yaml"
    original = voicelab.run_matrix(sweep, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path / "original")).run_dir
    process = _cli("replay", str(original), "--artifacts-dir", str(tmp_path / "replay"),
                   "--quiet")
    assert process.returncode == 0, process.stdout + process.stderr
    replayed = Path(process.stdout.split("matrix: ")[1].split()[0])
    matrix = read_json(replayed / "matrix-report.json")
    origin = read_json(original / "matrix-report.json")
    assert matrix["replay_of"] == {"run_id": origin["run_id"], "bundle_path": str(original)}
    cells = [c["cell_id"] for c in origin["cells"]]
    assert [c["cell_id"] for c in matrix["cells"]] == cells and len(cells) == 4
    for cell in cells:
        assert read_json(replayed / cell / "run-report.json")["replay_of"]["bundle_path"] == \
            str(original / cell)
        assert [_outcome(t) for t in _trials(replayed / cell)] == \
            [_outcome(t) for t in _trials(original / cell)]
    comparison = compare(original, replayed)
    assert comparison.pairs == 4 and comparison.unpaired.empty
    assert set(comparison.cells["cell"]) == set(cells)
