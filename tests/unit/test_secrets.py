"""Secret sanitizing: secret-named fields and values from secret variables never leave as text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from voicelab.config import MASK, SecretScrubber, is_secret_env_var, is_secret_name, load_run
from voicelab.errors import ConfigError

SEED = Path(__file__).parents[1] / "fixtures" / "seed"
TOKEN = "tok-3f9a81c2e7"  # what ${MY_TOKEN} holds in these tests
ENVIRON = {"MY_TOKEN": TOKEN, "VOICE_AGENT_URL": "wss://agent.example/voice",
           "VOICE_AGENT_ACCESS_TOKEN": "vat-5d2c9e0b41"}


def seed_suite(tmp_path: Path, run_name: str = "run-workload-neutral-voice.yaml") -> Path:
    for path in SEED.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / run_name


def edit_yaml(path: Path, **changes: Any) -> None:
    document = yaml.safe_load(path.read_text())
    document.update(changes)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def as_text(documents: Any) -> str:
    return json.dumps(documents, sort_keys=True)


@pytest.mark.parametrize("name", [
    "api_key", "apiKey", "access_token", "accessToken", "password", "db_password", "secret",
    "client_secret", "Authorization", "authorization", "X-Api-Key", "credential",
    "credentials", "connection_string", "ConnectionString", "private_key", "sas", "cookie",
    "token", "refresh_token",
])
def test_secret_field_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "keywords", "keyboard_layout", "monkey", "turns", "trigger", "response", "description",
    "session_id", "expected_topics", "persona_voice", "uri", "endpoint", "model", "auth",
    "max_message_bytes", "connect_timeout_seconds", "path", "pattern",
])
def test_ordinary_field_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(("name", "secret"), [
    ("VOICE_AGENT_ACCESS_TOKEN", True), ("MY_TOKEN", True), ("AZURE_OPENAI_API_KEY", True),
    ("KEY", True), ("DB_PASSWORD", True), ("STORAGE_CONNECTION_STRING", True),
    ("GITHUB_PAT", True), ("CLIENT_SECRET", True),
    ("VOICE_AGENT_URL", False), ("AZURE_OPENAI_ENDPOINT", False), ("KEYBOARD", False),
    ("MONKEY", False), ("PATH", False), ("HOME", False), ("SPATIAL_MODE", False),
])
def test_secret_environment_variables(name: str, secret: bool) -> None:
    assert is_secret_env_var(name) is secret


def test_scrubber_masks_named_fields_and_known_values_anywhere() -> None:
    scrubber = SecretScrubber([TOKEN, "abc"])  # "abc" is too short to scrub as a substring
    cleaned = scrubber.scrub({
        "headers": {"Authorization": f"Bearer {TOKEN}", "Accept": "audio/pcm"},
        "api_key": "abc", "password": 12345, "nested": [{"note": f"sent {TOKEN} twice {TOKEN}"}],
        "keywords": ["abc", "reminder"], "empty_token": "",
    })
    assert cleaned == {
        "headers": {"Authorization": MASK, "Accept": "audio/pcm"},
        "api_key": MASK, "password": MASK, "nested": [{"note": f"sent {MASK} twice {MASK}"}],
        "keywords": ["abc", "reminder"], "empty_token": "",
    }
    assert scrubber.scrub_text(f"url?t={TOKEN}&x=1") == f"url?t={MASK}&x=1"


def test_an_interpolated_secret_is_masked_in_every_resolved_document(tmp_path: Path) -> None:
    run_file = seed_suite(tmp_path)
    edit_yaml(run_file, endpoint={"adapter": "fake", "settings": {
        "uri": "wss://agent.example/voice?sig=${MY_TOKEN}",
        "headers": {"Authorization": "Bearer ${MY_TOKEN}"},
    }})
    data = tmp_path / "data-workload-neutral-voice.yaml"
    data.write_text(data.read_text() + "note: ticket ${MY_TOKEN} attached\n")
    loaded = load_run(run_file, environ=ENVIRON)
    assert TOKEN in loaded.run.endpoint.settings["uri"]  # the adapter still gets the real value

    documents = loaded.resolved_documents()
    settings = documents["settings"]["endpoint"]["settings"]
    assert settings["uri"] == MASK  # the key path came from a secret variable
    assert settings["headers"] == {"Authorization": MASK}
    assert documents["data"]["note"] == MASK
    assert TOKEN not in as_text(documents)
    assert loaded.scrubber.scrub_text(f"ws://x/?sig={TOKEN}") == f"ws://x/?sig={MASK}"


def test_seed_custom_adapter_token_is_masked_but_its_url_is_not(tmp_path: Path) -> None:
    loaded = load_run(seed_suite(tmp_path, "run-custom-adapter.yaml"), environ=ENVIRON)
    settings = loaded.resolved_documents()["settings"]["endpoint"]["settings"]
    assert settings["access_token"] == MASK
    assert settings["uri"] == "wss://agent.example/voice"  # VOICE_AGENT_URL is not a secret
    assert settings["max_message_bytes"] == 4194304
    assert ENVIRON["VOICE_AGENT_ACCESS_TOKEN"] not in as_text(loaded.resolved_documents())


@pytest.mark.parametrize("field", ["api_key", "access_token", "password", "client_secret"])
def test_a_literal_secret_named_field_is_masked_and_scrubbed_elsewhere(tmp_path: Path,
                                                                       field: str) -> None:
    run_file = seed_suite(tmp_path)
    literal = "literal-secret-value-99"
    edit_yaml(run_file, endpoint={"adapter": "fake", "settings": {
        field: literal, "echo": f"copied {literal} here"}})
    documents = load_run(run_file, environ={}).resolved_documents()
    settings = documents["settings"]["endpoint"]["settings"]
    assert settings[field] == MASK
    assert settings["echo"] == f"copied {MASK} here"
    assert literal not in as_text(documents)


def test_provider_api_key_is_masked(tmp_path: Path) -> None:
    run_file = seed_suite(tmp_path, "run-quality-evaluation.yaml")
    run_file.write_text(run_file.read_text().replace(
        "auth: default_credential", "auth: api_key\n    api_key: ${AZURE_OPENAI_API_KEY}"))
    environ = {"AZURE_OPENAI_ENDPOINT": "https://judge.example", "AZURE_OPENAI_API_KEY": "k" * 32}
    documents = load_run(run_file, environ=environ).resolved_documents()
    provider = documents["settings"]["providers"]["azure_openai"]
    assert provider["api_key"] == MASK
    assert provider["endpoint"] == "https://judge.example"
    assert "k" * 32 not in as_text(documents)


def test_script_keywords_and_ordinary_text_are_not_masked(tmp_path: Path) -> None:
    run_file = seed_suite(tmp_path)
    script = tmp_path / "script-workload-neutral-voice.yaml"
    script.write_text(script.read_text().replace("- reminder", "- reminder\n      - token refund"))
    documents = load_run(run_file, environ=ENVIRON).resolved_documents()
    assert documents["script"]["turns"][0]["keywords"] == ["daily plan", "reminder",
                                                           "token refund"]
    assert documents["script"]["turns"][0]["response"] == (
        "Please record the plan and save the reminder.")
    assert documents["data"]["context"]["topic"] == "daily planning"
    assert MASK not in as_text(documents)


def test_the_secret_value_does_not_change_the_suite_hash(tmp_path: Path) -> None:
    run_file = seed_suite(tmp_path, "run-custom-adapter.yaml")
    first = load_run(run_file, environ=ENVIRON).suite_hash()
    rotated = load_run(run_file, environ={**ENVIRON, "VOICE_AGENT_ACCESS_TOKEN": "rotated-1"})
    assert rotated.suite_hash() == first
    moved = load_run(run_file, environ={**ENVIRON, "VOICE_AGENT_URL": "wss://other.example/"})
    assert moved.suite_hash() != first  # a non-secret setting is part of the suite


def test_configuration_errors_do_not_echo_secrets(tmp_path: Path) -> None:
    run_file = seed_suite(tmp_path)
    edit_yaml(run_file, trial_seed="${MY_TOKEN}")
    with pytest.raises(ConfigError) as interpolated:
        load_run(run_file, environ=ENVIRON)
    assert interpolated.value.key == "trial_seed"
    assert TOKEN not in str(interpolated.value)

    run_file = seed_suite(tmp_path, "run-quality-evaluation.yaml")
    run_file.write_text(run_file.read_text().replace(
        "auth: default_credential", "api_key: [literal-secret-value-99]"))
    with pytest.raises(ConfigError) as named:
        load_run(run_file, environ={"AZURE_OPENAI_ENDPOINT": "https://judge.example"})
    assert named.value.key == "providers.azure_openai.api_key"
    assert "literal-secret-value-99" not in str(named.value)


def test_a_secret_named_field_in_any_document_is_scrubbed_everywhere(tmp_path: Path) -> None:
    run_file = seed_suite(tmp_path)
    scenario = tmp_path / "scenario-workload-neutral-voice.yaml"
    document = yaml.safe_load(scenario.read_text())
    document["eval_spec"]["outcome_spec"] = {"probe_api_key": "scenario-secret-5521"}
    scenario.write_text(yaml.safe_dump(document, sort_keys=False))
    loaded = load_run(run_file, environ={})
    assert loaded.resolved_documents()["scenario"]["eval_spec"]["outcome_spec"] == {
        "probe_api_key": MASK}
    assert loaded.scrubber.scrub_text("echoed scenario-secret-5521") == f"echoed {MASK}"
