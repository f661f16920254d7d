"""Ingest against a known truth: calls voicelab itself made against the fake product, mixed to
stereo (the caller on one channel, the agent on the other) the way a telephony platform records
them. The run's own metrics are the truth; the ingested call must agree within the tolerances
docs/ingest.md states, find the same turns, pauses and barge-ins, and be a bundle every reader
takes (frames, the report's data, compare)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

import voicelab
from voicelab.analysis import load_frames
from voicelab.artifacts import read_json
from voicelab.ingest import ChannelMap, ingest, write_stereo_call

ROOT = Path(__file__).resolve().parents[2]
#: the tolerances docs/ingest.md states (the caller's speech edges found by voice activity on
#: the recorded leg, where a run knows them from the clean speech)
RESPONSE_LATENCY_MS = 50.0
#: the same in an office (speech 15-20 dB over babble, hum and typing; a leg with digital
#: silence between turns, whose edges follow the sound to the silence threshold)
NOISY_RESPONSE_LATENCY_MS = 50.0
STOP_LATENCY_MS = 120.0
#: the caller's talk time: a run counts it inside the clean speech's detected bounds, an
#: ingested call to the leg's first and last audible samples (a few tens of ms more a turn)
TALK_RATIO = 0.10
#: three turns, the second with a 0.9 s pause inside it (espeak: real speech)
SCRIPT = ('script.turns=[{"response": "I would like to plan my day."}, '
          '{"response": "Please record the plan {pause: 0.9} and save the reminder."}, '
          '{"response": "Thank you, that is all."}]')
QUIET = ["speech_provider=espeak", SCRIPT, "endpoint.settings.complete_after_turns=3",
         "scenario.eval_spec.outcome_spec={}", "scenario.expected_topics=[]",
         "scenario.eval_spec.expected_exit=null"]
#: the product's words cut short where a call is ingested without its transcript: each
#: response's audio is then recognized (pocketsphinx, the slowest step, in proportion to the
#: audio); the latencies and turns the tests compare do not depend on the words
SHORT_REPLIES = ["endpoint.settings.opening_text=Hello, your plan?",
                 "endpoint.settings.interim_reply_text=Noted.",
                 "endpoint.settings.reply_text=Saved, thank you."]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=300)


def _turns(trial_dir: Path) -> dict[str, dict]:
    return {t["turn_id"]: t for t in read_json(trial_dir / "voice-metrics.json")["turns"]}


def _events(trial_dir: Path, kind: str) -> list[dict]:
    lines = (trial_dir / "voice-events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event_type"] == kind]


def _two_calls(folder: Path, *, user: str, agents: dict[str, str]) -> Path:
    """A manifest of calls that share two mono legs (the caller 0.5-2.0 s, the agent 2.6-4.5 s,
    8 kHz, syllables over a faint noise) and differ in the agent's words (their transcripts)."""
    rng = np.random.default_rng(3)
    rate = 8000
    t = np.arange(int(6.0 * rate)) / rate
    for name, (start, end, frequency) in {"user": (0.5, 2.0, 200.0),
                                          "agent": (2.6, 4.5, 300.0)}.items():
        samples = rng.normal(0, 20, t.shape[0])
        inside = (t >= start) & (t < end) & (((t - start) % 0.31) < 0.25)
        samples[inside] += 9000 * np.sin(2 * np.pi * frequency * t[inside])
        soundfile.write(folder / f"{name}.wav", samples.astype(np.int16), rate, subtype="PCM_16")
    lines = ["calls:"]
    for call, words in agents.items():
        (folder / f"{call}.json").write_text(json.dumps({"segments": [
            {"speaker": "user", "start": 0.5, "end": 2.0, "text": user},
            {"speaker": "agent", "start": 2.6, "end": 4.5, "text": words}]}))
        lines.append(f"  - {{id: {call}, user_audio: user.wav, agent_audio: agent.wav, "
                     f"transcript: {call}.json}}")
    manifest = folder / "calls.yaml"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two trials in the office (noise, a door, a phone), their calls as 8 kHz stereo FLAC with
    the agent on channel 0, and the ingested bundle."""
    work = tmp_path_factory.mktemp("office")
    run = voicelab.run(ROOT / "examples" / "run-office-noise.yaml", voicelab.RunOptions(
        trials=2,
        overrides=[*QUIET, *SHORT_REPLIES],
        artifacts_dir=work / "runs"))
    assert run.exit_code == 0
    calls = [write_stereo_call(trial, work / "calls" / f"{trial.name}.flac", sample_rate_hz=8000,
                               channels=ChannelMap(user=1, agent=0))
             for trial in sorted(run.bundle_path.glob("trial-*"))]
    result = _cli("ingest", *map(str, calls), "--channels", "user=1,agent=0",
                  "--artifacts-dir", str(work / "production"))
    assert result.returncode == 0, result.stderr
    # no run file: nothing judges the calls, which is no pass (and no failure)
    assert "0/2 call(s) passed, 2 unjudged" in result.stdout
    return run.bundle_path, (work / "production" / "latest").resolve()


def test_ingested_calls_agree_with_the_runs_own_metrics(office):
    run, ingested = office
    assert read_json(ingested / "run-report.json")["source"] == "production"
    assert "source" not in read_json(run / "run-report.json")  # a simulated run's
    for truth_dir, call_dir in zip(sorted(run.glob("trial-*")), sorted(ingested.glob("trial-*")),
                                   strict=True):
        truth, found = _turns(truth_dir), _turns(call_dir)
        assert sorted(found) == sorted(truth) == ["turn-000", "turn-001", "turn-002", "turn-003"]
        for turn_id in ("turn-001", "turn-002", "turn-003"):
            expected, measured = truth[turn_id]["response_latency_ms"], \
                found[turn_id]["response_latency_ms"]
            assert measured == pytest.approx(expected, abs=NOISY_RESPONSE_LATENCY_MS), turn_id
        assert not any(t["interrupted"] for t in found.values())


def test_a_pause_inside_a_turn_is_found_as_long_as_it_was(tmp_path):
    """In a quiet room the caller's 0.9 s pause is silence on the leg: one pause, in the second
    turn, as long as the run recorded it; the response latencies and the talk ratio are the
    run's (the office's babble fills the pause: there the caller's leg sounds through it)."""
    run = voicelab.run(ROOT / "examples" / "run-workload-neutral-voice.yaml", voicelab.RunOptions(
        trials=1,
        overrides=[*QUIET, *SHORT_REPLIES],
        artifacts_dir=tmp_path / "runs"))
    trial = run.bundle_path / "trial-001"
    outcome = ingest([write_stereo_call(trial, tmp_path / "call.wav")],
                     artifacts_dir=tmp_path / "production")
    found = {e["turn_id"]: e["attributes"].get("pauses")
             for e in _events(outcome.bundle_path / "trial-001", "user.turn_started")}
    [planted] = [e["attributes"]["pauses"] for e in _events(trial, "user.turn_started")
                 if e["attributes"].get("pauses")]
    assert found["turn-001"] is None and found["turn-003"] is None
    truth, measured_turns = _turns(trial), _turns(outcome.bundle_path / "trial-001")
    for turn_id in ("turn-001", "turn-002", "turn-003"):
        assert measured_turns[turn_id]["response_latency_ms"] == pytest.approx(
            truth[turn_id]["response_latency_ms"], abs=RESPONSE_LATENCY_MS), turn_id
    [(silent, speaking)] = found["turn-002"]
    [(planted_silent, planted_speaking)] = planted
    assert (speaking - silent) / 24 == pytest.approx((planted_speaking - planted_silent) / 24,
                                                     abs=RESPONSE_LATENCY_MS)
    talk, measured = (read_json(d / "voice-metrics.json")["talk"]
                      for d in (trial, outcome.bundle_path / "trial-001"))
    assert measured["talk_ratio"] == pytest.approx(talk["talk_ratio"], rel=TALK_RATIO)


def test_an_ingested_bundle_is_read_like_a_run(office):
    _, ingested = office
    frames = load_frames(ingested)
    assert len(frames.trials) == 2 and set(frames.trials["persona"]) == {"production caller"}
    assert frames.turns["response_latency_ms"].notna().sum() == 6
    call = read_json(ingested / "trial-001" / "call.json")
    assert call["source_sample_rate_hz"] == 8000 and call["channels"] == {"user": 1, "agent": 0}
    # compare takes an ingested run as either side
    result = _cli("compare", str(ingested), str(ingested), "--no-default-gates")
    assert result.returncode == 0, result.stderr


def test_a_barge_in_is_found_with_its_stop_latency(tmp_path):
    """A live line (the product hears and stops by itself, 300 ms of speech): the caller talks
    over the opening; the ingested call finds the barge-in on the same response, as far into it
    and with the same stop latency as the run measured."""
    overrides = ["speech_provider=espeak",
                 'script.turns=[{"response": "Wait, one thing first please.", '
                 '"interrupt_after_seconds": 1.0}, {"response": "Save the reminder."}]',
                 "endpoint.settings.complete_after_turns=2",
                 "endpoint.settings.stop_on_speech_ms=300",
                 "endpoint.settings.opening_text=Hello! Tell me your daily plan and the "
                 "reminder you want saved, with the time and every detail, please.",
                 SHORT_REPLIES[-1], "scenario.eval_spec.outcome_spec={}", "scenario.expected_topics=[]",
                 "scenario.eval_spec.expected_exit=null"]
    run = voicelab.run(ROOT / "examples" / "run-listening.yaml", voicelab.RunOptions(
        trials=1,
        overrides=overrides,
        artifacts_dir=tmp_path / "runs"))
    assert run.exit_code == 0
    trial = run.bundle_path / "trial-001"
    call = write_stereo_call(trial, tmp_path / "call.wav")
    outcome = ingest([call], artifacts_dir=tmp_path / "production")
    assert outcome.exit_code == 0
    truth, found = _turns(trial)["turn-000"], _turns(outcome.bundle_path / "trial-001")["turn-000"]
    assert truth["interrupted"] and found["interrupted"]
    assert found["interruption_stop_latency_ms"] == pytest.approx(
        truth["interruption_stop_latency_ms"], abs=STOP_LATENCY_MS)
    assert found["barge_in_after_speech_ms"] == pytest.approx(
        truth["barge_in_after_speech_ms"], abs=STOP_LATENCY_MS)


def test_a_transcript_and_a_run_file_judge_the_calls(tmp_path):
    """Two mono legs with a transcript (manifest): the words are the transcript's, the run
    file's text verdict passes for the call that says its topics and fails for the other, and
    its ``retention: {audio: failed}`` keeps the failed call's audio only."""
    _two_calls(tmp_path, user="Save my plan.",
               agents={"good": "Your plan is recorded and the reminder saved.",
                       "bad": "The weather is sunny today."})
    result = _cli("ingest", str(tmp_path / "calls.yaml"), "--artifacts-dir",
                  str(tmp_path / "production"), "--run-file",
                  str(ROOT / "examples" / "run-workload-neutral-voice.yaml"),
                  "--set", "scenario.eval_spec.outcome_spec={}",
                  "--set", "scenario.eval_spec.expected_exit=null",
                  "--set", "retention.audio=failed")
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("good:") and ": pass" in line for line in lines), lines
    assert any(line.startswith("bad:") and "failed: expected_topics" in line for line in lines)
    bundle = (tmp_path / "production" / "latest").resolve()
    transcript = read_json(bundle / "trial-001" / "transcript.json")["turns"]
    assert [(t["role"], t["text"]) for t in transcript] == [
        ("user", "Save my plan."),
        ("assistant", "Your plan is recorded and the reminder saved.")]
    assert transcript[1]["text_source"] == "wire"
    assert "retention: audio not kept for 1 of 2 trial(s)" in result.stdout
    assert not list((bundle / "trial-001").glob("*.wav"))
    assert (bundle / "trial-002" / "user.wav").is_file()


@pytest.mark.parametrize("make, expected", [
    (lambda d: soundfile.write(d / "mono.wav", np.zeros(8000, np.int16), 8000), "mono.wav: a mono "
     "recording: a call needs the caller and the agent on separate channels"),
    (lambda d: (d / "cut.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt "), "cut.wav: cannot "
     "decode audio"),
    (lambda d: soundfile.write(d / "stereo.wav", np.zeros((8000, 2), np.int16), 8000)
     or (d / "stereo.transcript.json").write_text('{"segments": [{"speaker": "bot"}]}'),
     "stereo.transcript.json: segments[0].speaker"),
])
def test_malformed_calls_exit_2_naming_the_file(tmp_path, make, expected):
    make(tmp_path)
    audio = next(p for p in tmp_path.iterdir() if p.suffix == ".wav")
    result = _cli("ingest", str(audio), "--artifacts-dir", str(tmp_path / "out"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # checked before anything is written


def test_a_store_url_is_refused_in_one_line(tmp_path):
    call = tmp_path / "call.wav"
    soundfile.write(call, np.zeros((8000, 2), np.int16), 8000)
    result = _cli("ingest", str(call), "--artifacts-dir", "s3://bucket/calls")
    assert result.returncode == 2
    assert result.stderr.strip().endswith("ingest writes to a local folder (publish the bundle "
                                          "to a store afterwards, e.g. with rescore --output)")


def test_judges_read_an_ingested_call(tmp_path, monkeypatch):
    """A run file's LLM judge (the local OpenAI-compatible server, real HTTP) reads each call's
    transcript: the agent that says it saved a reminder with no tool evidence is flagged."""
    from voicelab.doubles.openai import JudgePolicy, OpenAIServer, unsupported_claim_rule

    monkeypatch.setenv("LOCAL_LLM_API_KEY", "sk-local-ingest")
    manifest = _two_calls(tmp_path, user="Remind me at four.",
                          agents={"claims": "Done, I saved the reminder for you.",
                                  "asks": "Which time would you like for the reminder?"})
    with OpenAIServer(JudgePolicy(rules=[unsupported_claim_rule()]),
                      api_key="sk-local-ingest") as server:
        run = tmp_path / "run.yaml"
        run.write_text(f"""
scenario_path: {ROOT / 'examples' / 'scenario-workload-neutral-voice.yaml'}
persona_path: {ROOT / 'examples' / 'persona-workload-neutral-voice.yaml'}
providers:
  openai: {{base_url: "{server.base_url}", api_key: "${{LOCAL_LLM_API_KEY}}", model: judge}}
quality_evaluation:
  custom_judges:
    - name: no_unsupported_commitments
      criteria: The assistant must not claim a reminder was saved without tool evidence.
      is_critical: true
""")
        outcome = ingest([manifest], artifacts_dir=tmp_path / "production", run_file=run,
                         overrides=["scenario.eval_spec.outcome_spec={}",
                                    "scenario.eval_spec.expected_exit=null",
                                    "scenario.expected_topics=[]"])
    judged = {t.report.session_id: {j.name: j.status for j in t.report.judges}
              for t in outcome.trials}
    assert judged == {"claims": {"no_unsupported_commitments": "failed"},
                      "asks": {"no_unsupported_commitments": "passed"}}
    assert outcome.exit_code == 3


# --- what judges a recorded call --------------------------------------------------------------

STARTER = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def test_the_starter_run_file_judges_a_call_by_what_applies_to_it(tmp_path):
    """The starter run file expects a simulated ending (endpoint_completion) and an outcome read
    back by a probe: neither exists for a recorded call, so both are not applicable (they
    failed every call before), and the call is judged by its words."""
    manifest = _two_calls(tmp_path, user="Please record my plan.",
                          agents={"good": "Your plan is recorded and the reminder is saved.",
                                  "bad": "Sorry, I cannot help with that."})
    outcome = ingest([manifest], artifacts_dir=tmp_path / "production", run_file=STARTER)
    reports = {t.report.session_id: t.report for t in outcome.trials}
    for report in reports.values():
        status = {v.name: v.status for v in report.verdicts}
        assert status["expected_exit"] == status["outcome_follow_up_created"] == \
            status["outcome_report_fields_complete"] == "not_applicable", status
        assert all(v.why.startswith("not applicable: ") for v in report.verdicts
                   if v.status == "not_applicable")
    assert (reports["good"].status, reports["bad"].status) == ("passed", "failed")
    assert [v.name for v in reports["bad"].verdicts if v.status == "failed"] == \
        ["expected_topics"]
    assert outcome.exit_code == 3 and outcome.report.passed_trials == 1
    # a not-applicable verdict has no pass rate; expected_topics has one over both calls
    rates = {r.name: r.pass_rate.n for r in outcome.report.verdict_pass_rates}
    assert rates == {"expected_topics": 2}


def test_a_call_nothing_judges_is_unjudged_in_every_reader(tmp_path):
    manifest = _two_calls(tmp_path, user="Hello.", agents={"a": "Hi there.", "b": "Hello."})
    junit = tmp_path / "junit.xml"
    result = _cli("ingest", str(manifest), "--artifacts-dir", str(tmp_path / "production"),
                  "--junit", str(junit))
    assert result.returncode == 0, result.stderr  # nothing failed
    assert "a: " in result.stdout and ": unjudged (exit call_ended, no critical verdict or " \
        "judge applies)" in result.stdout
    assert "0/2 call(s) passed, 2 unjudged (nothing applied: not in the pass rate)" \
        in result.stdout
    bundle = (tmp_path / "production" / "latest").resolve()
    trial = read_json(bundle / "trial-001" / "trial-report.json")
    assert (trial["status"], trial["passed"]) == ("unjudged", False)
    run = read_json(bundle / "run-report.json")
    assert (run["unjudged_trials"], run["passed_trials"], run["exit_code"]) == (2, 0, 0)
    assert run["pass_rate"]["n"] == 0 and run["pass_power_k"] is False
    assert junit.read_text().count('<skipped message="unjudged: no critical verdict or judge '
                                   'applies" type="unjudged"') == 2
    frames = load_frames(bundle)
    assert frames.trials["status"].astype(str).tolist() == ["unjudged", "unjudged"]
    assert frames.rates.loc[frames.rates["kind"] == "run", "n"].tolist() == [0]
