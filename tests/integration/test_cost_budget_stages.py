"""Spending under control, through the command line: a budget stops a run at a known trial; a
staged sweep that fails its second stage never starts its third (whose persona server sees no
request); ``rescore --pricing`` changes the cost and not one other byte of the bundle."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab._validate import validate_run
from voicelab.doubles.openai import ModelCall, OpenAIServer
from voicelab.endpoints import declared_capabilities
from voicelab.runner import estimate_from_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KEY = "sk-local-budget-0042"
#: every token at one price (cached or not), everything else free: each trial costs the same
PRICING = """pricing:
  currency: USD
  prices:
    - {component: persona, unit: input_token, price: 0.00001}
    - {component: persona, unit: cached_input_token, price: 0.00001}
    - {component: persona, unit: output_token, price: 0.00003}
    - {component: speech, unit: character, price: 0}
    - {component: product, unit: minute, price: 0}
    - {component: storage, unit: gigabyte, price: 0}
"""


def persona(call: ModelCall):
    if "Conversation so far" not in call.text:
        return {"reply": "Please record my daily plan and save the reminder.",
                "end_conversation": False, "reason": "ask"}
    return {"reply": "Thanks, that's all.", "end_conversation": True, "reason": "done"}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOCAL_LLM_API_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "voicelab", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def write_run(tmp_path: Path, server: OpenAIServer) -> Path:
    run = tmp_path / "run.yaml"
    run.write_text(f"""
scenario_path: {EXAMPLES / 'scenario-workload-neutral-voice.yaml'}
persona_path: {EXAMPLES / 'persona-workload-neutral-voice.yaml'}
data_path: {EXAMPLES / 'data-workload-neutral-voice.yaml'}
persona_mode: synthesizer
speech_provider: tone
endpoint:
  adapter: fake
providers:
  openai:
    base_url: {server.base_url}
    api_key: ${{LOCAL_LLM_API_KEY}}
    model: local-chat
trial_seed: 7
pace_audio: false
concurrency: 1
{PRICING}""")
    return run


def test_a_budget_stops_the_run_at_a_known_trial(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_LLM_API_KEY", KEY)
    with OpenAIServer(persona, api_key=KEY) as server:
        run = write_run(tmp_path, server)
        # what one trial costs, measured (every trial says the same words)
        measured = asyncio.run(voicelab.arun(voicelab.load_run(run), voicelab.RunOptions(
            trials=2,
            artifacts_dir=tmp_path / "measured")))
        each = {t.report.cost.total for t in measured.trials}
        assert len(each) == 1 and not measured.report.cost.unpriced
        cost = each.pop()
        calls_per_trial = len(server.requests) // 2
        # before any trial of the run has settled, a trial is expected to cost the estimate
        plan = validate_run(voicelab.load_run(run))
        estimate = estimate_from_config(
            plan.loaded, trials=1, pricing=plan.loaded.run.pricing, speech_cls=plan.speech_cls,
            output_transcripts=declared_capabilities(plan.adapter_cls)["output_transcripts"]
        ).per_trial
        budget = max(estimate, cost) + 1.5 * cost
        # trial k starts while (k - 1) trials spent plus its own expected cost fit
        ran = math.floor(budget / cost)
        planned = ran + 2
        calls_before = len(server.requests)
        result = cli("run", str(run), "--trials", str(planned), "--max-cost", repr(budget),
                     "--artifacts-dir", str(tmp_path / "budget"), "--quiet", cwd=tmp_path)
        persona_calls = len(server.requests) - calls_before
    assert result.returncode == 4, result.stderr
    report = json.loads((tmp_path / "budget" / "latest" / "run-report.json").read_text())
    assert report["stopped"] == "budget"
    assert report["executed_trials"] == ran
    assert [t["trial"] for t in report["trials"]] == list(range(1, ran + 1))
    assert report["budget"] == {"max_cost": budget, "currency": "USD",
                                "spent": pytest.approx(ran * cost),
                                "trials_not_started": planned - ran}
    assert report["cost"]["total"] == pytest.approx(ran * cost)
    assert persona_calls == ran * calls_per_trial  # no trial past the budget called the model
    stderr = [line for line in result.stderr.splitlines() if line.startswith("voice-evaluator:")]
    assert stderr == [f"voice-evaluator: stopped: budget: {ran} of {planned} trial(s) ran and "
                      f"spent {ran * cost:.4f} USD; another would have passed --max-cost "
                      f"{budget:.4f} USD ({planned - ran} not started)"]


def test_a_staged_sweep_that_fails_stage_two_never_starts_stage_three(tmp_path):
    with OpenAIServer(persona, api_key=KEY) as stage_three_persona:
        suite = tmp_path / "suite.yaml"
        suite.write_text(f"""
name: staged
base: {EXAMPLES / 'run-workload-neutral-voice.yaml'}
trials: 1
artifacts_dir: {tmp_path / 'sweeps'}
pricing:
  currency: USD
  prices:
    - {{component: product, unit: minute, price: 0.05}}
    - {{component: speech, unit: character, price: 0.00001}}
    - {{component: persona, unit: input_token, price: 0.00001}}
stages:
  - name: smoke
    trials: 1
  - name: natural
    overrides: {{scenario.eval_spec.expected_exit: max_turns}}
    trials: 2
    gate: {{min_pass_rate: 0.9}}
  - name: llm
    overrides:
      persona_mode: synthesizer
      script_path: null
      providers.openai: {{base_url: '{stage_three_persona.base_url}',
                          api_key: '${{LOCAL_LLM_API_KEY}}', model: local-chat}}
    trials: 3
""")
        plan = cli("plan", str(suite), cwd=tmp_path)
        swept = cli("sweep", str(suite), "--quiet", "--junit", str(tmp_path / "junit.xml"),
                    cwd=tmp_path)
        requests = list(stage_three_persona.requests)
    assert plan.returncode == 0, plan.stderr
    assert [line.split(":")[0].strip() for line in plan.stdout.splitlines()
            if line.strip().startswith("stage ")] == ["stage smoke", "stage natural",
                                                       "stage llm"]
    assert swept.returncode == 3, swept.stderr
    assert requests == []  # stage three's persona was never called
    sweep = tmp_path / "sweeps" / "latest"
    report = json.loads((sweep / "matrix-report.json").read_text())
    stages = {s["name"]: s for s in report["stages"]}
    assert [s["status"] for s in report["stages"]] == ["passed", "failed", "not_run"]
    assert stages["natural"]["trials"] == 2 and stages["natural"]["passed_trials"] == 0
    assert stages["llm"]["trials"] == 0 and stages["llm"]["cost"] is None
    assert "natural did not pass its gate" in stages["llm"]["reason"]
    assert {c["stage"] for c in report["cells"]} == {"smoke", "natural"}
    assert not any(p.name.startswith("llm__") for p in sweep.iterdir())
    assert stages["smoke"]["cost"]["total"] > 0
    assert report["cost"]["total"] == pytest.approx(
        stages["smoke"]["cost"]["total"] + stages["natural"]["cost"]["total"])
    assert "stage llm: not_run" in swept.stdout
    junit = (tmp_path / "junit.xml").read_text()
    for name in ("smoke", "natural", "llm"):
        assert f'<testsuite name="{name}"' in junit


def test_rescore_pricing_changes_the_cost_and_nothing_else(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text((EXAMPLES / "run-workload-neutral-voice.yaml").read_text().replace(
        "scenario-", f"{EXAMPLES}/scenario-").replace("persona-", f"{EXAMPLES}/persona-")
        .replace("data-", f"{EXAMPLES}/data-").replace("script-", f"{EXAMPLES}/script-")
        + "pricing:\n  currency: USD\n  prices:\n"
          "    - {component: product, unit: minute, price: 0.05}\n")
    ran = cli("run", str(run), "--trials", "2", "--artifacts-dir", str(tmp_path / "runs"),
              "--quiet", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    table = tmp_path / "prices-2027.yaml"
    table.write_text("pricing:\n  currency: EUR\n  as_of: 2027-01-01\n  prices:\n"
                     "    - {component: product, unit: minute, price: 0.5}\n"
                     "    - {component: speech, provider: tone, unit: character, price: 0.001}\n")
    source = (tmp_path / "runs" / "latest").resolve()
    priced = cli("rescore", str(source), "--output", str(tmp_path / "priced"), "--pricing",
                 str(table), cwd=tmp_path)
    assert priced.returncode == 0, priced.stderr
    target = tmp_path / "priced"
    before = {p.relative_to(source): p for p in source.rglob("*") if p.is_file()}
    after = {p.relative_to(target): p for p in target.rglob("*") if p.is_file()}
    assert before.keys() == after.keys()
    changed = {name for name in before if before[name].read_bytes() != after[name].read_bytes()}
    assert changed == {Path("run-report.json"), Path("trial-001/trial-report.json"),
                       Path("trial-002/trial-report.json")}
    for name in changed:
        old, new = json.loads(before[name].read_bytes()), json.loads(after[name].read_bytes())
        assert old.pop("cost")["currency"] == "USD"
        assert new.pop("cost")["currency"] == "EUR"
        assert old == new, name
    trial = json.loads((target / "trial-001" / "trial-report.json").read_text())["cost"]
    minutes = next(i for i in trial["items"] if i["unit"] == "minute")
    characters = next(i for i in trial["items"] if i["unit"] == "character")
    assert minutes["price"] == 0.5 and characters["price"] == 0.001
    assert trial["total"] == pytest.approx(minutes["quantity"] * 0.5
                                           + characters["quantity"] * 0.001)


def test_a_suites_budget_is_one_budget_for_every_cell_of_the_sweep(tmp_path):
    """``budget:`` in a suite: the cells share it (no cell gets a budget of its own), and the
    sweep stops starting trials once it would be passed."""
    pricing = ("pricing:\n  currency: USD\n  prices:\n"
               "    - {component: speech, unit: character, price: 0.001}\n"
               "    - {component: product, unit: minute, price: 0}\n"
               "    - {component: storage, unit: gigabyte, price: 0}\n")
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"""
name: budgeted
base: {EXAMPLES / 'run-workload-neutral-voice.yaml'}
environments: [quiet, {EXAMPLES / 'environment-office.yaml'}]
trials: 3
concurrency: 1
artifacts_dir: {tmp_path / 'sweeps'}
budget: {{max_cost: 0.5}}
{pricing}""")
    # every trial says the same lines, so costs the same: measure one
    measured = cli("sweep", str(suite), "--trials", "1", "--max-cost", "1000", "--quiet",
                   "--artifacts-dir", str(tmp_path / "measured"), cwd=tmp_path)
    assert measured.returncode == 0, measured.stderr
    cells = json.loads((tmp_path / "measured" / "latest" / "matrix-report.json").read_text())
    each = cells["cost"]["total"] / 2
    assert each > 0
    # a budget two and a half trials deep, of the suite's six
    suite.write_text(suite.read_text().replace("max_cost: 0.5", f"max_cost: {2.5 * each!r}"))
    swept = cli("sweep", str(suite), "--quiet", cwd=tmp_path)
    assert swept.returncode == 4, swept.stdout + swept.stderr
    report = json.loads((tmp_path / "sweeps" / "latest" / "matrix-report.json").read_text())
    assert report["stopped"] == "budget"
    ran = sum(cell["executed_trials"] for cell in report["cells"])
    assert 1 <= ran <= 2  # one budget for both cells: never 2 trials of each
    assert report["budget"]["spent"] == pytest.approx(ran * each)
    assert report["budget"]["spent"] <= report["budget"]["max_cost"]
    assert report["budget"]["trials_not_started"] == 6 - ran
    assert any(line.startswith("voice-evaluator: stopped: budget:")
               for line in swept.stderr.splitlines()), swept.stderr
