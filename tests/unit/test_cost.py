"""Pricing usage: the most specific price, what is unpriced (never summed as 0), the estimate
rules for usage a provider does not report, the budget's admission, staged suites' gates."""

from __future__ import annotations

import asyncio
import math

import pytest

from voicelab.artifacts import CostSummary, MatrixCell, TrialCost, Usage
from voicelab.config import PricingConfig, StageConfig, SuiteConfig
from voicelab.cost import (
    CostBudget,
    chat_usage,
    cost_summary,
    price_usage,
    realtime_usage,
    speech_usage,
)
from voicelab.errors import ConfigError


def table(*prices: dict) -> PricingConfig:
    return PricingConfig.model_validate({"currency": "USD", "prices": list(prices)})


def test_the_most_specific_price_wins():
    pricing = table({"component": "persona", "unit": "input_token", "price": 1.0},
                    {"component": "persona", "model": "m", "unit": "input_token", "price": 2.0},
                    {"component": "persona", "provider": "p", "unit": "input_token", "price": 3.0},
                    {"component": "persona", "provider": "p", "model": "m", "unit": "input_token",
                     "price": 4.0})
    assert pricing.price_of("persona", "p", "m", "input_token").price == 4.0
    assert pricing.price_of("persona", "p", "other", "input_token").price == 3.0
    assert pricing.price_of("persona", "q", "m", "input_token").price == 2.0
    assert pricing.price_of("persona", "q", "x", "input_token").price == 1.0
    assert pricing.price_of("judge", "p", "m", "input_token") is None
    assert pricing.price_of("persona", "p", "m", "output_token") is None


def test_a_table_refuses_two_prices_for_one_thing_and_unknown_units():
    with pytest.raises(ValueError, match="a second price"):
        table({"component": "speech", "unit": "character", "price": 1},
              {"component": "speech", "unit": "character", "price": 2})
    with pytest.raises(ValueError):
        table({"component": "speech", "unit": "word", "price": 1})
    with pytest.raises(ValueError):
        table({"component": "speech", "unit": "character", "price": -1})


def test_usage_is_priced_and_what_has_no_price_is_listed_not_counted():
    usages = [speech_usage(provider="azure_speech", voice="v", text="hello", audio_seconds=1.5),
              speech_usage(provider="azure_speech", voice="v", text="hi", audio_seconds=0.5),
              Usage(component="storage", quantities={"gigabyte": 0.5})]
    cost = price_usage(usages, table({"component": "speech", "provider": "azure_speech",
                                      "unit": "character", "price": 0.01}))
    items = {(i.component, i.unit): i for i in cost.items}
    assert items[("speech", "character")].quantity == 7  # an int stays an int
    assert items[("speech", "character")].amount == pytest.approx(0.07)
    # the seconds beside the billed characters: shown without a price, not missing
    assert items[("speech", "second")].price is None
    assert [(u.component, u.reason) for u in cost.unpriced] == [("storage", "no_price")]
    assert cost.total == pytest.approx(0.07) and cost.currency == "USD"


def test_an_unknown_quantity_is_never_summed_as_zero():
    known = Usage(component="product", provider="realtime", quantities={"audio_input_token": 10})
    unknown = Usage(component="product", provider="realtime",
                    quantities={"audio_input_token": None, "audio_output_token": 4},
                    estimated=["audio_output_token"])
    pricing = table({"component": "product", "unit": "audio_input_token", "price": 1.0},
                    {"component": "product", "unit": "audio_output_token", "price": 2.0})
    cost = price_usage([known, unknown], pricing)
    items = {i.unit: i for i in cost.items}
    assert items["audio_input_token"].quantity is None
    assert items["audio_input_token"].amount is None
    assert items["audio_output_token"].estimated and items["audio_output_token"].amount == 8.0
    assert [(u.unit, u.reason) for u in cost.unpriced] == [("audio_input_token",
                                                             "unknown_quantity")]
    assert cost.total == 8.0
    nothing_known = price_usage([Usage(component="persona", quantities={"input_token": 3})],
                                None)
    assert nothing_known.total is None and nothing_known.unpriced
    assert price_usage([], None).total == 0.0  # nothing used: truly nothing


def test_summaries_add_known_amounts_by_component():
    first = TrialCost(currency="USD", total=1.0, items=[])
    first.items = price_usage([Usage(component="persona", quantities={"request": 2})], table(
        {"component": "persona", "unit": "request", "price": 0.5})).items
    second = price_usage([Usage(component="persona", quantities={"request": 1}),
                          Usage(component="speech", quantities={"character": 3})],
                         table({"component": "persona", "unit": "request", "price": 0.5}))
    summary = cost_summary([first, second, None])
    assert isinstance(summary, CostSummary) and summary.trials == 2
    assert summary.total == 1.5 and summary.by_component == {"persona": 1.5, "speech": None}
    assert [u.component for u in summary.unpriced] == ["speech"]


def test_chat_usage_reports_cached_tokens_apart_and_estimates_what_is_missing():
    reported = chat_usage({"prompt_tokens": 100, "completion_tokens": 7,
                           "prompt_tokens_details": {"cached_tokens": 60}},
                          component="persona", provider="openai", model="m",
                          sent_text="x", reply_text="y")
    assert reported.quantities == {"input_token": 40, "cached_input_token": 60,
                                   "output_token": 7, "request": 1}
    assert reported.estimated == []
    estimated = chat_usage(None, component="judge", provider="openai", model="m",
                           sent_text="a" * 9, reply_text="b" * 4)
    assert estimated.quantities == {"input_token": 3, "output_token": 1, "request": 1}
    assert estimated.estimated == ["input_token", "output_token"]


def test_realtime_usage_splits_text_audio_and_cache():
    usage = realtime_usage({"input_token_details": {
        "text_tokens": 50, "audio_tokens": 200,
        "cached_tokens_details": {"text_tokens": 40, "audio_tokens": 150}},
        "output_token_details": {"text_tokens": 12, "audio_tokens": 90}},
        component="persona", provider="voice_live", model="m", output_audio_seconds=9.0,
        output_text="ignored")
    assert usage.quantities == {"input_token": 10, "cached_input_token": 40,
                                "audio_input_token": 50, "cached_audio_input_token": 150,
                                "output_token": 12, "audio_output_token": 90}
    missing = realtime_usage({"total_tokens": 0}, component="product", provider="openai",
                             model=None, output_audio_seconds=2.01, output_text="twelve chars")
    assert missing.quantities == {"input_token": None, "audio_input_token": None,
                                  "output_token": 3, "audio_output_token": math.ceil(2.01 * 20)}
    assert missing.estimated == ["output_token", "audio_output_token"]


def test_a_budget_waits_for_trials_in_flight_before_it_stops():
    async def scenario() -> list[object]:
        budget = CostBudget(10.0, currency="USD")
        first = await budget.admit(lambda: 6.0)
        assert first is not None
        # a second trial expected at 6 does not fit beside the first: it waits for it
        second = asyncio.create_task(budget.admit(lambda: 6.0))
        await asyncio.sleep(0)
        assert not second.done()
        budget.settle(first, TrialCost(currency="USD", total=3.0))
        admitted = await second
        assert admitted is not None and budget.committed == 9.0  # 3 spent, 6 expected
        budget.settle(admitted, TrialCost(currency="USD", total=3.0))
        third = await budget.admit(lambda: 3.0)  # 6 spent + 3 fits 10
        budget.settle(third, TrialCost(currency="USD", total=3.5))
        refused = await budget.admit(lambda: 3.0)  # 9.5 + 3: nothing in flight, it stops
        later = await budget.admit(lambda: 0.0)  # once stopped, nothing starts
        return [refused, later, budget.stopped, budget.state(not_started=2)]

    refused, later, stopped, state = asyncio.run(scenario())
    assert refused is None and later is None and stopped
    assert state.spent == 9.5 and state.trials_not_started == 2 and state.max_cost == 10.0


def test_stages_are_validated_and_become_set_overrides():
    stage = StageConfig.model_validate({"name": "natural", "trials": 3,
                                        "overrides": {"persona_mode": "synthesizer",
                                                      "quality_evaluation": None},
                                        "gate": {"min_pass_rate": 0.8}})
    assert stage.set_overrides() == ['persona_mode="synthesizer"', "quality_evaluation=null"]
    assert stage.gate_text() == "pass rate >= 0.8"
    assert StageConfig(name="smoke").gate == "pass_power_k"
    with pytest.raises(ValueError, match="stage name"):
        StageConfig(name="../up")
    with pytest.raises(ValueError):
        StageConfig.model_validate({"name": "x", "gate": {"min_pass_rate": 1.5}})
    with pytest.raises(ValueError, match="two stages"):
        SuiteConfig.model_validate({"base": "run.yaml", "stages": [{"name": "a"},
                                                                   {"name": "a"}]})


def test_a_stage_gate_judges_its_cells():
    from voicelab.artifacts import PassRate
    from voicelab.config import StatisticsConfig
    from voicelab.runner import StagePlan, stage_outcome, staged_exit_code

    def cell(name: str, passed: int, executed: int = 4) -> MatrixCell:
        return MatrixCell(cell_id=name, scenario="s", persona="p", environment="e",
                          bundle_path=name, trial_count=4, executed_trials=executed,
                          passed_trials=passed, pass_at_k=passed > 0,
                          pass_power_k=passed == executed == 4, exit_code=0, suite_hash="h",
                          pass_rate=PassRate(estimate=passed / executed, n=executed,
                                             passed=passed), stage="natural")

    def plan(gate: object) -> StagePlan:
        config = StageConfig.model_validate({"name": "natural", "gate": gate})
        return StagePlan(config, [None, None], 4)  # type: ignore[list-item]

    cells = [cell("a", 4), cell("b", 3)]
    statistics = StatisticsConfig()
    assert stage_outcome(plan({"min_pass_rate": 0.8}), cells, statistics).status == "passed"
    assert stage_outcome(plan({"min_pass_rate": 0.9}), cells, statistics).status == "failed"
    lower = stage_outcome(plan({"min_lower_bound": 0.8}), cells, statistics)
    assert lower.status == "failed" and "lower bound" in lower.reason  # 7/8: low ~0.53
    assert stage_outcome(plan("pass_power_k"), cells, statistics).status == "failed"
    short = stage_outcome(plan({"min_pass_rate": 0.1}), [cell("a", 2, executed=2), cell("b", 3)],
                          statistics, budget_stopped=True)
    assert short.status == "failed" and short.reason.startswith("budget")
    assert staged_exit_code([0, 0], [short], interrupted=False) == 4


def test_a_run_names_one_price_table(tmp_path):
    from voicelab.config import RunConfig, load_pricing

    with pytest.raises(ValueError, match="not both"):
        RunConfig.model_validate({"scenario_path": "s", "persona_path": "p",
                                  "pricing": {"currency": "USD"}, "pricing_path": "x.yaml"})
    path = tmp_path / "prices.yaml"
    path.write_text("pricing:\n  currency: EUR\n  prices:\n"
                    "    - {component: product, unit: minute, price: 0.1}\n")
    assert load_pricing(path).currency == "EUR"
    path.write_text("currency: EUR\nprices: [{component: product, unit: hour, price: 1}]\n")
    with pytest.raises(ConfigError, match="prices"):
        load_pricing(path)
