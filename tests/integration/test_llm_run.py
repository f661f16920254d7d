"""A full run with the synthesizer persona and LLM judges, through the runner and the CLI, against
the local OpenAI-compatible server (real HTTP) and the embedded fake product."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.doubles.openai import JudgePolicy, ModelCall, OpenAIServer, unsupported_claim_rule

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SECRET = "sk-local-SECRET-4242"
PRIVATE_PHONE = "+1-555-0199"


class PersonaThenJudge:
    """Persona calls get a user line; every other call is judged by the rule engine."""

    def __init__(self) -> None:
        self.judge = JudgePolicy(rules=[unsupported_claim_rule()])
        self.persona_calls = 0

    def __call__(self, call: ModelCall):
        if "role-playing the USER" in call.text:
            self.persona_calls += 1
            if self.persona_calls == 1:
                return {"reply": "Please record my daily plan and save the reminder.",
                        "end_conversation": False, "reason": "ask for what I need"}
            return {"reply": "Thanks, that's all.", "end_conversation": True, "reason": "done"}
        return self.judge(call)


def write_run(tmp_path: Path, server: OpenAIServer, *, fake: dict | None = None) -> Path:
    data = tmp_path / "data.yaml"
    data.write_text("session_id: llm-session-001\ncontext:\n  topic: daily planning\n"
                    "  requested_reminder: Submit the weekly summary at 16:00\n"
                    f"  callback_phone: '{PRIVATE_PHONE}'\n")
    settings = json.dumps(fake or {})
    run = tmp_path / "run.yaml"
    run.write_text(f"""
scenario_path: {EXAMPLES / 'scenario-workload-neutral-voice.yaml'}
persona_path: {EXAMPLES / 'persona-workload-neutral-voice.yaml'}
data_path: {data}
persona_mode: synthesizer
persona_settings:
  temperature: 0.3
speech_provider: tone
endpoint:
  adapter: fake
  settings: {settings}
providers:
  openai:
    base_url: {server.base_url}
    api_key: ${{LOCAL_LLM_API_KEY}}
    model: local-judge
quality_evaluation:
  timeout_seconds: 20
  redaction:
    sensitive_fields: [callback_phone]
    patterns: ['\\+1-555-\\d{{4}}']
  custom_judges:
    - name: no_unsupported_commitments
      criteria: >
        The assistant must not claim that a reminder was saved unless the recorded tool evidence
        supports that claim.
      is_critical: true
    - name: polite_tone
      criteria: The assistant is polite.
      is_critical: false
trial_seed: 5
pace_audio: false
""")
    return run


@pytest.fixture(autouse=True)
def api_key_env(monkeypatch):
    monkeypatch.setenv("LOCAL_LLM_API_KEY", SECRET)


def test_synthesizer_persona_and_judges_in_a_real_run(tmp_path):
    policy = PersonaThenJudge()
    with OpenAIServer(policy, api_key=SECRET) as server:
        run = write_run(tmp_path, server)
        outcome = asyncio.run(voicelab.arun(voicelab.load_run(run), voicelab.RunOptions(
            trials=1,
            artifacts_dir=tmp_path / "artifacts")))
        judged = [json.dumps(r.body) for r in server.requests
                  if "role-playing the USER" not in json.dumps(r.body)]
        received = server.received_text()
    report = outcome.trials[0].report
    assert report.execution_status == "succeeded", report.failures
    assert report.exit_reason == "endpoint_completion"
    judges = {j.name: j for j in report.judges}
    assert judges["no_unsupported_commitments"].status == "passed"
    assert judges["no_unsupported_commitments"].critical is True
    assert judges["polite_tone"].critical is False
    assert report.passed and outcome.exit_code == 0
    trial = outcome.bundle_path / "trial-001"
    session = json.loads((trial / "persona-session.json").read_text())
    assert session and "Please record my daily plan" in json.dumps(session)
    transcript = json.loads((trial / "transcript.json").read_text())
    assert transcript["turns"][1]["source"] == "synthesizer"
    # the sensitive phone number never reached a judge (the persona role-plays with the run
    # data on purpose), and the API key never appears in any request body
    assert judged and all(PRIVATE_PHONE not in body for body in judged)
    assert SECRET not in received
    sent = json.dumps(judges["no_unsupported_commitments"].sent)
    assert PRIVATE_PHONE not in sent and "[REDACTED]" in sent
    for path in trial.glob("*.json"):
        assert SECRET not in path.read_text(), path.name


def test_a_critical_judge_failure_gates_with_exit_3(tmp_path):
    with OpenAIServer(PersonaThenJudge(), api_key=SECRET) as server:
        run = write_run(tmp_path, server, fake={"claim_without_tool": True})
        result = subprocess.run(
            [sys.executable, "-m", "voicelab", "run", str(run), "--artifacts-dir",
             str(tmp_path / "artifacts")], capture_output=True, text=True, timeout=120,
            env={**os.environ, "LOCAL_LLM_API_KEY": SECRET})
    assert result.returncode == 3, result.stdout + result.stderr
    assert "no_unsupported_commitments" in result.stdout
    report = json.loads(next((tmp_path / "artifacts").glob("*/trial-001/trial-report.json"))
                        .read_text())
    judge = next(j for j in report["judges"] if j["name"] == "no_unsupported_commitments")
    assert judge["status"] == "failed" and judge["rationale"]


def test_an_unreachable_critical_judge_is_an_error_never_a_pass(tmp_path):
    with OpenAIServer(PersonaThenJudge(), api_key=SECRET) as server:
        run = write_run(tmp_path, server)
        # a scripted persona, so only the judges talk to the (failing) model server
        loaded = voicelab.load_run(run, overrides=[
            "persona_mode=scripted", "persona_settings={}",
            f"script_path={EXAMPLES / 'script-workload-neutral-voice.yaml'}",
            "quality_evaluation.timeout_seconds=3"])
        server.add_fault("http_500", times=100, route="chat")
        outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=1,
            artifacts_dir=tmp_path / "artifacts")))
    report = outcome.trials[0].report
    assert report.execution_status == "succeeded"
    critical = next(j for j in report.judges if j.name == "no_unsupported_commitments")
    advisory = next(j for j in report.judges if j.name == "polite_tone")
    assert critical.status == "error" and critical.passed is False and critical.error
    assert advisory.status == "error" and advisory.critical is False
    assert all(v.passed for v in report.verdicts)
    assert report.passed is False and outcome.exit_code == 3


def test_validate_names_a_missing_credential(tmp_path, monkeypatch):
    with OpenAIServer(PersonaThenJudge(), api_key=SECRET) as server:
        run = write_run(tmp_path, server)
    monkeypatch.delenv("LOCAL_LLM_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_LLM_API_KEY",
                                                             "OPENAI_API_KEY")}
    result = subprocess.run([sys.executable, "-m", "voicelab", "validate", str(run)],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2
    assert "LOCAL_LLM_API_KEY" in result.stderr and "Traceback" not in result.stderr


def test_a_calibration_adds_the_judge_corrected_pass_rate(tmp_path):
    """run --calibration: the Rogan-Gladen rate of a judge, with its interval, beside the judge's
    own pass rate, in the run report, the CLI summary and the frames."""
    from voicelab.analysis import load_frames
    from voicelab.scoring import corrected_rate

    calibration = tmp_path / "calibration.json"
    # what the calibration notebook writes (output_path); only these fields are read
    calibration.write_text(json.dumps({"criterion": "no_unsupported_commitments", "tp": 18,
                                       "fn": 2, "fp": 3, "tn": 7, "kappa": 0.6}))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"criterion": "helpfulness", "tp": 1, "fn": 1, "fp": 1,
                                 "tn": 1}))
    env = {**os.environ, "LOCAL_LLM_API_KEY": SECRET}
    with OpenAIServer(PersonaThenJudge(), api_key=SECRET) as server:
        run = write_run(tmp_path, server)
        refused = subprocess.run(
            [sys.executable, "-m", "voicelab", "run", str(run), "--calibration", str(wrong),
             "--artifacts-dir", str(tmp_path / "none")], capture_output=True, text=True,
            timeout=120, env=env)
        result = subprocess.run(
            [sys.executable, "-m", "voicelab", "run", str(run), "--trials", "2",
             "--calibration", str(calibration), "--artifacts-dir", str(tmp_path / "artifacts")],
            capture_output=True, text=True, timeout=120, env=env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "calibrates the judge 'helpfulness', which this run does not run" in refused.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    bundle = next((tmp_path / "artifacts").glob("*/run-report.json")).parent
    report = json.loads((bundle / "run-report.json").read_text())
    (rate,) = report["judge_corrected_pass_rates"]
    assert rate["judge"] == "no_unsupported_commitments"
    assert (rate["judge_pass_rate"]["n"], rate["judge_pass_rate"]["passed"]) == (2, 2)
    expected = corrected_rate(2, 2, tp=18, fn=2, fp=3, tn=7)
    assert (rate["corrected"], rate["low"], rate["high"]) == (
        expected.corrected, expected.low, expected.high)
    assert (rate["sensitivity"], rate["specificity"]) == (0.9, 0.7)
    assert rate["calibration"]["tp"] == 18 and rate["method"].startswith("rogan-gladen")
    assert "judge no_unsupported_commitments: judge pass rate 100.0%" in result.stdout
    assert "corrected (Rogan-Gladen) 100.0% [" in result.stdout
    rates = load_frames(bundle, events=False).rates
    kinds = rates[rates["name"] == "no_unsupported_commitments"].set_index("kind")
    assert kinds.loc["judge", "n"] == 2 and kinds.loc["judge_corrected", "estimate"] == 1.0
    assert kinds.loc["judge_corrected", "sensitivity"] == 0.9
