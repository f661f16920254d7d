"""What a trial used, recorded where it was spent, against what the local services billed: the
ledger of a run's trials equals the doubles' own counts exactly (the OpenAI double for an LLM
persona and its judges, the Azure TTS double for speech, the realtime double for a Realtime
product and a realtime persona); a service that does not report usage is estimated by the
documented rule (and marked so) where a rule can, and left unknown (null, never 0) where not."""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from pathlib import Path

import pytest

import voicelab
from voicelab.cost import CHARS_PER_TOKEN
from voicelab.doubles.azure_tts import AzureTtsServer
from voicelab.doubles.openai import JudgePolicy, ModelCall, OpenAIServer
from voicelab.doubles.realtime import RealtimeServer, RealtimeServerConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
EXAMPLE = EXAMPLES / "run-workload-neutral-voice.yaml"
KEY = "sk-local-cost-0042"
TTS_KEY = "tts-local-cost-0042"
PRICES = ('pricing={"currency": "USD", "as_of": "2026-01-01", "prices": ['
          '{"component": "persona", "unit": "input_token", "price": 1.5e-7},'
          '{"component": "persona", "unit": "cached_input_token", "price": 7.5e-8},'
          '{"component": "persona", "unit": "output_token", "price": 6e-7},'
          '{"component": "judge", "unit": "input_token", "price": 1.5e-7},'
          '{"component": "judge", "unit": "cached_input_token", "price": 7.5e-8},'
          '{"component": "judge", "unit": "output_token", "price": 6e-7},'
          '{"component": "speech", "provider": "azure_speech", "unit": "character", '
          '"price": 1.6e-5},'
          '{"component": "product", "unit": "minute", "price": 0.05},'
          '{"component": "product", "provider": "openai", "unit": "audio_input_token", '
          '"price": 4e-5},'
          '{"component": "product", "provider": "openai", "unit": "input_token", '
          '"price": 5e-6},'
          '{"component": "storage", "unit": "gigabyte", "price": 0.02}]}')


class PersonaThenJudge:
    """The persona's two lines (the same every trial: the speech cache spares the second
    trial's synthesis), every other call judged by the rule engine."""

    def __init__(self) -> None:
        self.judge = JudgePolicy()

    def __call__(self, call: ModelCall):
        if "role-playing the USER" in call.text:
            if "Conversation so far" not in call.text:
                return {"reply": "Please record my daily plan and save the reminder.",
                        "end_conversation": False, "reason": "ask for what I need"}
            return {"reply": "Thanks, that's all.", "end_conversation": True, "reason": "done"}
        return self.judge(call)


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("LOCAL_LLM_API_KEY", KEY)
    monkeypatch.setenv("LOCAL_TTS_KEY", TTS_KEY)


def _overrides(llm: OpenAIServer, tts: AzureTtsServer | None) -> list[str]:
    speech = [] if tts is None else [
        "speech_provider=azure_speech",
        f"providers.azure_speech={{endpoint: '{tts.endpoint}', api_key: '${{LOCAL_TTS_KEY}}'}}"]
    return [
        "persona_mode=synthesizer", "script_path=null",
        f"providers.openai={{base_url: '{llm.base_url}', api_key: '${{LOCAL_LLM_API_KEY}}', "
        "model: local-chat}",
        "quality_evaluation={custom_judges: [{name: polite, criteria: The assistant is "
        "polite.}]}",
        *speech, PRICES]


def _ledger(outcome) -> dict[tuple[str, str], int | float | None]:
    """(component, unit) -> the quantity summed over the run's trials (None: not known)."""
    totals: dict[tuple[str, str], list[int | float | None]] = defaultdict(list)
    for trial in outcome.trials:
        for item in trial.report.cost.items:
            totals[(item.component, item.unit)].append(item.quantity)
    return {key: None if None in values else sum(values) for key, values in totals.items()}


def test_the_ledger_equals_what_the_llm_and_speech_services_billed(tmp_path):
    with OpenAIServer(PersonaThenJudge(), api_key=KEY) as llm, \
            AzureTtsServer(api_key=TTS_KEY) as tts:
        loaded = voicelab.load_run(EXAMPLE, overrides=_overrides(llm, tts))
        outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=2,
            concurrency=1,
            artifacts_dir=tmp_path)))
        billed, characters, syntheses = llm.usage, tts.billed_characters, tts.syntheses
    assert all(t.report.execution_status == "succeeded" for t in outcome.trials)
    ledger = _ledger(outcome)
    persona_and_judges = {unit: ledger[("persona", unit)] + ledger[("judge", unit)]
                          for unit in ("input_token", "cached_input_token", "output_token",
                                       "request")}
    assert persona_and_judges == {
        "input_token": billed.prompt_tokens - billed.cached_tokens,
        "cached_input_token": billed.cached_tokens,
        "output_token": billed.completion_tokens, "request": billed.requests}
    assert billed.cached_tokens > 0  # the persona's instructions, seen before
    # speech: what the service billed, once per line (the second trial's lines were cached)
    assert ledger[("speech", "character")] == characters and syntheses >= 1
    first, second = (t.report.cost for t in outcome.trials)
    assert [i.component for i in second.items].count("speech") == 0
    assert not first.unpriced and first.total == pytest.approx(math.fsum(
        i.amount for i in first.items if i.amount is not None))
    run_cost = outcome.report.cost
    assert run_cost.total == pytest.approx(first.total + second.total)
    assert set(run_cost.by_component) == {"persona", "judge", "speech", "product", "storage"}


def test_a_service_that_reports_no_usage_is_estimated_and_marked(tmp_path):
    with OpenAIServer(PersonaThenJudge(), api_key=KEY, report_usage=False) as llm:
        loaded = voicelab.load_run(EXAMPLE, overrides=_overrides(llm, None))
        outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=1,
            artifacts_dir=tmp_path)))
        bodies = [r.body for r in llm.requests_for("chat")]
    report = outcome.trials[0].report
    assert report.execution_status == "succeeded", report.failures
    items = {(i.component, i.unit): i for i in report.cost.items}
    sent = ["".join(m["content"] for m in body["messages"]) for body in bodies
            if "role-playing the USER" in body["messages"][0]["content"]]
    # the rule: a token per CHARS_PER_TOKEN characters sent, rounded up, each call
    expected = sum(math.ceil(len(text) / CHARS_PER_TOKEN) for text in sent)
    assert items[("persona", "input_token")].quantity == expected
    assert items[("persona", "input_token")].estimated
    assert items[("persona", "output_token")].estimated
    assert ("persona", "cached_input_token") not in items  # not reported: none assumed cached
    assert not items[("product", "minute")].estimated


def test_a_realtime_product_s_usage_is_what_the_service_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("RT_API_KEY", KEY)

    async def scenario(report_usage: bool):
        config = RealtimeServerConfig(
            api_key=KEY, report_usage=report_usage,
            lines=["Hi! Tell me your daily plan and the reminder to save.",
                   "Your daily plan is recorded and the reminder is saved for 16:00."])
        async with RealtimeServer(config) as server:
            loaded = voicelab.load_run(EXAMPLE, overrides=[
                "endpoint.adapter=realtime",
                f"endpoint.settings={{dialect: openai, uri: '{server.url}', model: rt-local, "
                "api_key: '${RT_API_KEY}', opening_response: true}",
                "scenario.eval_spec.outcome_spec={}",
                "scenario.eval_spec.expected_exit=script_exhaustion", PRICES])
            outcome = await voicelab.arun(loaded, voicelab.RunOptions(
                trials=1,
                artifacts_dir=tmp_path / str(report_usage)))
            return outcome, server.usage

    outcome, billed = asyncio.run(asyncio.wait_for(scenario(True), 60))
    report = outcome.trials[0].report
    assert report.execution_status == "succeeded", report.failures
    items = {(i.component, i.provider, i.unit): i for i in report.cost.items}

    def product(unit: str) -> int | float | None:
        return items[("product", "openai", unit)].quantity

    assert billed.responses >= 2
    assert {unit: product(unit) for unit in (
        "input_token", "cached_input_token", "audio_input_token", "cached_audio_input_token",
        "output_token", "audio_output_token")} == {
        "input_token": billed.text_in - billed.cached_text_in,
        "cached_input_token": billed.cached_text_in,
        "audio_input_token": billed.audio_in - billed.cached_audio_in,
        "cached_audio_input_token": billed.cached_audio_in,
        "output_token": billed.text_out, "audio_output_token": billed.audio_out}
    assert items[("product", "openai", "audio_input_token")].model == "rt-local"

    # the same product, reporting nothing: its output is estimated, its input not known
    outcome, billed = asyncio.run(asyncio.wait_for(scenario(False), 60))
    cost = outcome.trials[0].report.cost
    items = {(i.component, i.provider, i.unit): i for i in cost.items}
    assert items[("product", "openai", "audio_input_token")].quantity is None
    assert items[("product", "openai", "audio_input_token")].amount is None
    assert items[("product", "openai", "audio_output_token")].estimated
    assert items[("product", "openai", "audio_output_token")].quantity > 0
    unknown = [(u.component, u.unit, u.reason) for u in cost.unpriced]
    assert ("product", "audio_input_token", "unknown_quantity") in unknown
    assert cost.total is not None and cost.total > 0  # the known part, never 0 for the rest


def test_a_realtime_persona_s_usage_is_recorded_as_it_speaks(tmp_path, monkeypatch):
    monkeypatch.setenv("VL_KEY", KEY)

    async def scenario():
        config = RealtimeServerConfig(
            api_key=KEY, lines=["Please record my daily plan and save the reminder."],
            end_call_on_last_line=True)
        async with RealtimeServer(config) as server:
            loaded = voicelab.load_run(EXAMPLE, overrides=[
                "persona_mode=realtime", "script_path=null",
                f"providers={{voice_live: {{endpoint: '{server.http_endpoint}', "
                "api_key: '${VL_KEY}', model: persona-rt}}", PRICES])
            return await voicelab.arun(loaded, voicelab.RunOptions(
                trials=1,
                artifacts_dir=tmp_path)), server.usage

    outcome, billed = asyncio.run(asyncio.wait_for(scenario(), 60))
    report = outcome.trials[0].report
    assert report.execution_status == "succeeded", report.failures
    persona = {i.unit: i for i in report.cost.items if i.component == "persona"}
    assert {i.provider for i in persona.values()} == {"voice_live"}
    assert {i.model for i in persona.values()} == {"persona-rt"}
    assert persona["audio_output_token"].quantity == billed.audio_out > 0
    assert persona["audio_input_token"].quantity + persona["cached_audio_input_token"].quantity \
        == billed.audio_in
    assert not any(i.estimated for i in persona.values())
