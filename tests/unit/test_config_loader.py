"""The loader: relative paths, ${VAR} interpolation, one-line errors and the YAML 1.2 core
schema. ``--set`` overrides: test_config_overrides.py; random documents and overrides:
test_config_fuzz.py; the files they share: _config_files.py."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pytest
import yaml
from _config_files import SEED, config_error, copy_seed, edit_yaml, tone_file

from voicelab.config import QUIET_ENVIRONMENT, load_environment, load_run


@pytest.fixture()
def run_file(tmp_path: Path) -> Path:
    return copy_seed(tmp_path / "suite")


# --- loading and paths ------------------------------------------------------------------------

def test_seed_run_loads_with_every_path_resolved_beside_the_run_file(run_file: Path) -> None:
    loaded = load_run(run_file, environ={})
    folder = run_file.parent.resolve()
    assert loaded.run_path == run_file.resolve()
    assert loaded.run.scenario_path == folder / "scenario-workload-neutral-voice.yaml"
    assert loaded.run.script_path == folder / "script-workload-neutral-voice.yaml"
    assert loaded.run.artifacts_dir == folder.parent / "artifacts" / "workload-neutral-voice"
    assert loaded.scenario.id == "workload-neutral-voice-exchange"
    assert loaded.persona.name == "Jordan"
    assert loaded.script is not None and loaded.script.turns[0].keywords == ["daily plan",
                                                                             "reminder"]
    assert loaded.environment == QUIET_ENVIRONMENT  # no environment_path: the quiet default
    assert set(loaded.sources) == {"run", "scenario", "persona", "data", "script"}


def test_opaque_data_is_preserved_exactly(run_file: Path) -> None:
    data_file = run_file.parent / "data-workload-neutral-voice.yaml"
    data_file.write_text(data_file.read_text() + (
        "nested:\n  - {a: 1, b: [true, null, 2.5]}\n  - plain text\n"
        "odd keys:\n  1: one\n  null: nothing\n"))
    loaded = load_run(run_file, environ={})
    assert loaded.data == yaml.safe_load(data_file.read_text())
    assert loaded.data["context"]["requested_reminder"] == "Submit the weekly summary at 16:00"


def test_an_empty_data_file_is_an_empty_mapping(run_file: Path) -> None:
    (run_file.parent / "data-workload-neutral-voice.yaml").write_text("")
    assert load_run(run_file, environ={}).data == {}


def test_paths_resolve_relative_to_the_file_that_names_them(tmp_path: Path) -> None:
    run_file = copy_seed(tmp_path / "suite")
    (tmp_path / "audio").mkdir()
    (tmp_path / "suite" / "env").mkdir()
    for name in ("hum.wav", "door.wav", "hello.wav"):
        tone_file(tmp_path / "audio" / name)
    (tmp_path / "suite" / "env" / "environment.yaml").write_text(
        "base_noise: ../../audio/hum.wav\n"
        "transient_events:\n  - {type: ../../audio/door.wav, on_turn_number: 1}\n")
    edit_yaml(run_file, environment_path="env/environment.yaml")
    (tmp_path / "suite" / "scripts").mkdir()
    (tmp_path / "suite" / "scripts" / "script.yaml").write_text(
        "turns:\n  - audio_path: ../../audio/hello.wav\n")
    edit_yaml(run_file, script_path="scripts/script.yaml")

    loaded = load_run(run_file, environ={})
    audio = (tmp_path / "audio").resolve()
    assert loaded.environment.base_noise == audio / "hum.wav"
    assert loaded.environment.transient_events[0].type == audio / "door.wav"
    assert loaded.script is not None and loaded.script.turns[0].audio_path == audio / "hello.wav"
    assert [(Path(doc).name, key) for doc, key, _ in loaded.asset_paths()] == [
        ("environment.yaml", "base_noise"), ("environment.yaml", "transient_events[0].type"),
        ("script.yaml", "turns[0].audio_path")]


def test_load_environment_on_its_own_resolves_and_checks_assets(tmp_path: Path) -> None:
    environment_file = tmp_path / "environment-seed.yaml"
    shutil.copy(SEED / "environment-seed.yaml", environment_file)
    error = config_error(lambda: load_environment(environment_file, environ={}))
    assert error.source == str(environment_file.resolve()) and error.key == "base_noise"
    for name in ("office-hum.wav", "distant-conversation.wav", "door-close.wav"):
        tone_file(tmp_path / "audio" / name)
    environment = load_environment(environment_file, environ={})
    assert environment.background_voices == (tmp_path / "audio" / "distant-conversation.wav")
    assert environment.impact == 0.7


# --- interpolation ----------------------------------------------------------------------------

def test_variables_defaults_and_dollar_escapes(run_file: Path) -> None:
    edit_yaml(run_file, trial_seed="${SEED}", endpoint={"adapter": "fake", "settings": {
        "uri": "ws://${HOST:-127.0.0.1}:${PORT:-8765}/",
        "empty_default": "${UNSET_VARIABLE:-}",
        "price": "$$5 and $${NOT_A_VARIABLE}",
        "lone": "cost: $ 3",
        "listed": ["${HOST:-x}", {"deep": "${SEED}"}],
    }})
    loaded = load_run(run_file, environ={"SEED": "7", "PORT": "9000"})
    assert loaded.run.trial_seed == 7  # "7" from the environment, typed by the model
    assert loaded.run.endpoint.settings == {
        "uri": "ws://127.0.0.1:9000/", "empty_default": "", "price": "$5 and ${NOT_A_VARIABLE}",
        "lone": "cost: $ 3", "listed": ["x", {"deep": "7"}]}


def test_a_set_variable_wins_over_its_default(run_file: Path) -> None:
    edit_yaml(run_file, endpoint={"adapter": "${ADAPTER:-websocket}"})
    assert load_run(run_file, environ={"ADAPTER": "fake"}).run.endpoint.adapter == "fake"
    assert load_run(run_file, environ={}).run.endpoint.adapter == "websocket"


def test_interpolation_applies_to_referenced_documents(run_file: Path) -> None:
    edit_yaml(run_file.parent / "scenario-workload-neutral-voice.yaml",
              description="plan for ${WHO:-nobody}")
    assert load_run(run_file, environ={"WHO": "Jordan"}).scenario.description == "plan for Jordan"


def test_a_missing_variable_names_the_file_the_key_and_the_variable(run_file: Path) -> None:
    edit_yaml(run_file, endpoint={"adapter": "fake", "settings": {"uri": "${VOICE_AGENT_URL}"}})
    error = config_error(lambda: load_run(run_file, environ={}))
    assert error.source == str(run_file.resolve())
    assert error.key == "endpoint.settings.uri"
    assert "VOICE_AGENT_URL" in error.message
    assert error.one_line() == (f"{run_file.resolve()}: endpoint.settings.uri: "
                                "environment variable VOICE_AGENT_URL is not set")


def test_a_missing_variable_inside_a_list_names_the_index(run_file: Path) -> None:
    script = run_file.parent / "script-workload-neutral-voice.yaml"
    script.write_text(script.read_text().replace("- reminder", "- ${KEYWORD}"))
    error = config_error(lambda: load_run(run_file, environ={}))
    assert (Path(error.source or "").name, error.key) == ("script-workload-neutral-voice.yaml",
                                                          "turns[0].keywords[1]")


# --- errors -----------------------------------------------------------------------------------

def test_a_missing_run_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    error = config_error(lambda: load_run(missing, environ={}))
    assert error.source == str(missing) and "file not found" in error.message


def test_a_missing_referenced_file_names_the_referrer_and_the_key(run_file: Path) -> None:
    edit_yaml(run_file, persona_path="personas/missing.yaml")
    error = config_error(lambda: load_run(run_file, environ={}))
    assert (error.source, error.key) == (str(run_file.resolve()), "persona_path")
    assert "personas/missing.yaml" in error.message


def test_a_yaml_syntax_error_names_the_file_and_the_line(run_file: Path) -> None:
    scenario = run_file.parent / "scenario-workload-neutral-voice.yaml"
    scenario.write_text("id: x\ndescription: fine\nconversation: [unclosed\n")
    error = config_error(lambda: load_run(run_file, environ={}))
    assert error.source == str(scenario.resolve())
    assert "YAML syntax error" in error.message and "line 4" in error.message


@pytest.mark.parametrize(("text", "words"), [
    ("", "empty"),
    ("- just\n- a list\n", "expected a mapping"),
    ("plain text\n", "expected a mapping"),
])
def test_a_document_that_is_not_a_mapping_is_rejected(run_file: Path, text: str,
                                                      words: str) -> None:
    persona = run_file.parent / "persona-workload-neutral-voice.yaml"
    persona.write_text(text)
    error = config_error(lambda: load_run(run_file, environ={}))
    assert error.source == str(persona.resolve()) and words in error.message


def test_a_validation_error_is_one_line_file_key_message(run_file: Path) -> None:
    scenario = run_file.parent / "scenario-workload-neutral-voice.yaml"
    edit_yaml(scenario, eval_spec={"limits": {"max_turns": -2}})
    error = config_error(lambda: load_run(run_file, environ={}))
    assert str(error) == (f"{scenario.resolve()}: eval_spec.limits.max_turns: "
                          "Input should be greater than 0 (got -2)")


def test_several_problems_are_counted_not_dumped(run_file: Path) -> None:
    edit_yaml(run_file.parent / "persona-workload-neutral-voice.yaml", name=None, colour="blue",
              session_behavior={"patience": "infinite"})
    error = config_error(lambda: load_run(run_file, environ={}))
    assert "(and 2 more problems)" in error.message


def test_paths_with_impossible_names_are_config_errors(run_file: Path) -> None:
    for value in ("bad\x00name.yaml", "x" * 5000 + ".yaml"):
        edit_yaml(run_file, scenario_path=value)
        error = config_error(lambda: load_run(run_file, environ={}))
        assert error.key == "scenario_path"


def test_opaque_data_with_date_keys_and_binary_values_still_hashes(run_file: Path) -> None:
    data = run_file.parent / "data-workload-neutral-voice.yaml"
    data.write_text("2026-01-02: holiday\n!!timestamp 2026-01-03: tagged\nblob: !!binary /w==\n")
    edit_yaml(run_file, endpoint={"adapter": "fake", "settings": {"raw": b"\xff\x00"}})
    loaded = load_run(run_file, environ={})
    # a plain date is the text written (YAML 1.2 core schema); an explicit tag still builds one
    assert list(loaded.data) == ["2026-01-02", datetime.date(2026, 1, 3), "blob"]
    documents = loaded.resolved_documents()
    assert documents["data"]["2026-01-02"] == "holiday"
    assert loaded.suite_hash().startswith("sha256:")


# --- YAML 1.2 core schema: a value is what it looks like ---------------------------------------

def test_plain_scalars_follow_the_yaml_1_2_core_schema(run_file: Path) -> None:
    data = run_file.parent / "data-workload-neutral-voice.yaml"
    data.write_text("requested_reminder: 17:00\nother: 16:00\ncountry: no\nlight: on\n"
                    "answer: yes\nmode: 0755\noctal: 0o755\nhex: 0x1F\nbig: 1e3\n"
                    "grouped: 1_000\nday: 2026-12-02\nflag: true\nnothing: ~\n"
                    "on: key\nratio: .5\n")
    loaded = load_run(run_file, environ={})
    assert loaded.data == {
        "requested_reminder": "17:00", "other": "16:00",  # not 1020 and 960 (sexagesimal)
        "country": "no", "light": "on", "answer": "yes",  # not booleans
        "mode": 755, "octal": 493, "hex": 31, "big": 1000.0, "grouped": "1_000",
        "day": "2026-12-02", "flag": True, "nothing": None, "on": "key", "ratio": 0.5}


def test_a_boolean_field_still_takes_yes_and_on(run_file: Path) -> None:
    run_file.write_text(run_file.read_text().replace("pace_audio: false", "pace_audio: on"))
    assert load_run(run_file, environ={}).run.pace_audio is True


@pytest.mark.parametrize(("override", "value"), [
    ("data.context.requested_reminder=17:00", "17:00"),
    ("data.context.topic=no", "no"),
])
def test_an_override_value_follows_the_core_schema_too(run_file: Path, override: str,
                                                        value: str) -> None:
    loaded = load_run(run_file, environ={}, overrides=[override])
    assert loaded.data["context"][override.split(".")[2].split("=")[0]] == value
