"""An IVR caller's configuration: a key barge-in (keys pressed into the product's speech) is
accepted as ``kind: interruption`` with keys only, nonsense is refused in one line naming the
file and the key, and the menu verdicts' settings (``eval_spec.ivr``) are checked."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from voicelab._validate import validate_run
from voicelab.config import (
    EvalSpec,
    IvrPrompt,
    IvrSpec,
    PersonaConfig,
    ScenarioConfig,
    ScriptConfig,
    ScriptTurn,
    is_secret_name,
    load_run,
)
from voicelab.errors import ConfigError
from voicelab.personas import PersonaContext, ProductResponse, UserTurn
from voicelab.personas._scripted import ScriptedPersona


def test_a_key_barge_in_is_keys_only_and_an_interruption() -> None:
    turn = ScriptTurn.model_validate({"dtmf": "1", "interrupt_after_seconds": 0.8,
                                      "kind": "interruption"})
    assert (turn.dtmf, turn.interrupt_after_seconds, turn.response) == ("1", 0.8, "")


@pytest.mark.parametrize("turn, message", [
    ({"dtmf": "1", "interrupt_after_seconds": 1.0}, "set kind: interruption"),
    ({"dtmf": "1", "interrupt_after_seconds": 1.0, "kind": "interruption",
      "response": "billing"}, "presses keys only"),
    ({"dtmf": "1x"}, "dtmf"),
])
def test_a_wrong_key_turn_is_refused_naming_the_file_and_turn(
        tmp_path: Path, seed_run_with_turn: Callable[..., Path], turn: dict,
        message: str) -> None:
    run = seed_run_with_turn(tmp_path, {"response": "", **turn})
    with pytest.raises(ConfigError) as refused:
        load_run(run)
    text = str(refused.value)
    assert message in text and "script-workload-neutral-voice.yaml: turns[0]" in text
    assert "\n" not in text


def test_a_key_barge_in_needs_a_live_line(tmp_path: Path,
                                          seed_run_with_turn: Callable[..., Path]) -> None:
    # the seed's endpoint takes turns by commit: keys cannot go into the product's speech
    run = seed_run_with_turn(tmp_path, {"response": "", "dtmf": "1",
                                        "interrupt_after_seconds": 1.0,
                                        "kind": "interruption"})
    with pytest.raises(ConfigError) as refused:
        validate_run(load_run(run))
    assert "server_vad" in str(refused.value)
    assert "turns[0].interrupt_after_seconds" in str(refused.value)


def test_menu_settings_default_and_bounds() -> None:
    assert EvalSpec().ivr is None
    spec = IvrSpec.model_validate({"prompts": [{"before_turn": 1, "words": ["billing"]}],
                                   "keys_accepted": True})
    assert spec.response_after_keys_seconds == 5.0 and spec.max_seconds_to_agent is None
    for wrong in ({"max_seconds_to_agent": 30},  # no words to recognise the agent by
                  {"prompts": [{"before_turn": 0, "words": ["billing"]}]},
                  {"prompts": [{"before_turn": 1, "words": []}]},
                  {"response_after_keys_seconds": 0},
                  {"prompts": [{"before_turn": 1, "words": ["x"]}] * 201},
                  {"agent_wrds": ["hello"]}):
        with pytest.raises(ValidationError):
            IvrSpec.model_validate(wrong)


def test_the_documented_example_is_a_valid_scenario_and_script() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "ivr.md").read_text()
    block = page.split("## Example", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    scenario_text, script_text = block.split("# script.yaml\n")
    scenario = ScenarioConfig.model_validate(yaml.safe_load(scenario_text))
    script = ScriptConfig.model_validate(yaml.safe_load(script_text))
    assert scenario.eval_spec.ivr is not None and scenario.eval_spec.ivr.keys_accepted
    assert [turn.dtmf for turn in script.turns] == ["1", "2", None]


def test_a_key_barge_in_waits_for_the_lines_before_it() -> None:
    script = ScriptConfig.model_validate({"turns": [
        {"dtmf": "1"},
        {"response": "a note", "optional": True},
        {"dtmf": "2", "interrupt_after_seconds": 0.5, "kind": "interruption"}]})
    context = PersonaContext(scenario=ScenarioConfig(id="s"), persona=PersonaConfig(name="p"),
                             data={}, script=script)
    persona = ScriptedPersona({}, context)
    assert persona.barge_in(ProductResponse(index=0)) is None  # key 1 is not pressed yet
    opening = asyncio.run(persona.reply(ProductResponse(index=0)))
    assert isinstance(opening, UserTurn) and opening.dtmf == "1"
    armed = persona.barge_in(ProductResponse(index=1))  # the optional line does not hold it
    assert armed is not None and armed.dtmf == "2"


def test_no_menu_setting_is_named_like_a_secret() -> None:
    # a field named like a secret (``key``...) is masked in resolved-scenario.json, and a
    # re-score could not read its number back
    assert [name for name in IvrSpec.model_fields if is_secret_name(name)] == []
    assert [name for name in IvrPrompt.model_fields if is_secret_name(name)] == []
