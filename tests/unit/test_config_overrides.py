"""``--set`` overrides: YAML-typed values aimed at each document, errors that name the argument,
the file and the key, odd key segments, list indices, and interpolated, masked values."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _config_files import RUN, SEED, config_error, copy_seed, edit_yaml, tone_file

from voicelab.config import load_run


@pytest.fixture()
def run_file(tmp_path: Path) -> Path:
    return copy_seed(tmp_path / "suite")


# --- overrides --------------------------------------------------------------------------------

def test_overrides_are_yaml_typed_and_target_each_document(run_file: Path) -> None:
    loaded = load_run(run_file, environ={}, overrides=[
        "trials=3", "pace_audio=true", "endpoint.settings={uri: 'ws://x/', retries: 2}",
        "scenario.conversation.max_turns=6", "scenario.conversation.first_speaker=user",
        "persona.communication_style=verbose", "data.context.topic=groceries",
        "data.new_key=[1, two]", "script.turns.0.response=Hello there.",
        "script.turns.0.interrupt_after_seconds=0.5",
    ])
    assert (loaded.run.trials, loaded.run.pace_audio) == (3, True)
    assert loaded.run.endpoint.settings == {"uri": "ws://x/", "retries": 2}
    assert loaded.scenario.conversation.max_turns == 6
    assert loaded.scenario.conversation.first_speaker == "user"
    assert loaded.persona.communication_style == "verbose"
    assert loaded.data["context"]["topic"] == "groceries"
    assert loaded.data["new_key"] == [1, "two"]
    assert loaded.script is not None
    assert loaded.script.turns[0].response == "Hello there."
    assert loaded.script.turns[0].interrupt_after_seconds == 0.5


def test_an_environment_override_reaches_the_environment_file(tmp_path: Path) -> None:
    run_file = copy_seed(tmp_path / "suite")
    shutil.copy(SEED / "environment-seed.yaml", run_file.parent / "environment.yaml")
    for name in ("office-hum.wav", "distant-conversation.wav", "door-close.wav"):
        tone_file(run_file.parent / "audio" / name)
    edit_yaml(run_file, environment_path="environment.yaml")
    loaded = load_run(run_file, environ={}, overrides=["environment.impact=0.25",
                                                       "environment.transient_events.0.volume=1"])
    assert loaded.environment.impact == 0.25
    assert loaded.environment.transient_events[0].volume == 1.0


@pytest.mark.parametrize(("override", "document", "key", "words"), [
    ("scenario.conversation.max_turnz=3", "scenario-workload-neutral-voice.yaml",
     "conversation.max_turnz", "unknown key"),
    ("trials=many", RUN, "trials", "integer"),
    ("scenario.conversation.max_turns=0", "scenario-workload-neutral-voice.yaml",
     "conversation.max_turns", "greater than 0"),
    ("script.turns.0.keywords=reminder", "script-workload-neutral-voice.yaml",
     "turns[0].keywords", "list"),
    ("script.turns.3.response=hi", "script-workload-neutral-voice.yaml", "turns[3]",
     "out of range"),
    ("persona.name.first=Jo", "persona-workload-neutral-voice.yaml", "name",
     "non-mapping"),
    ("environment.impact=0.5", RUN, None, "no environment_path"),
])
def test_a_bad_override_names_the_argument_the_file_and_the_key(
        run_file: Path, override: str, document: str, key: str | None, words: str) -> None:
    error = config_error(lambda: load_run(run_file, environ={}, overrides=[override]))
    assert error.source == f"--set {override} ({document})"
    assert error.key == key
    assert words in error.message


@pytest.mark.parametrize(("override", "words"), [
    ("trials", "expected KEY=VALUE"),
    ("=3", "expected KEY=VALUE"),
    ("scenario..id=x", "empty segment"),
    ("trials=[1, 2", "not valid YAML"),
    ("trial_seed=!!timestamp 2001-02-30", "not valid YAML"),  # a date YAML cannot build
])
def test_a_malformed_override_is_a_config_error(run_file: Path, override: str,
                                                words: str) -> None:
    error = config_error(lambda: load_run(run_file, environ={}, overrides=[override]))
    assert error.source == f"--set {override}"
    assert words in error.message


@pytest.mark.parametrize("key", ["script.turns.²", "script.turns." + "9" * 5000, "²"])
def test_odd_numeric_key_segments_are_config_errors(run_file: Path, key: str) -> None:
    error = config_error(lambda: load_run(run_file, environ={}, overrides=[f"{key}=x"]))
    assert error.source is not None and error.source.startswith(f"--set {key}=x")


def test_set_values_are_interpolated_and_their_secrets_masked(tmp_path):

    from voicelab.config import load_run

    examples = Path(__file__).resolve().parents[2] / "examples"
    for name in examples.glob("*workload-neutral-voice.yaml"):
        shutil.copy(name, tmp_path / name.name)
    secret = "tok-from-env-7f3a9c"
    loaded = load_run(tmp_path / "run-workload-neutral-voice.yaml",
                      overrides=["endpoint.settings.access_token=${AGENT_TOKEN}",
                                 "endpoint.settings.note=${MISSING:-plain}"],
                      environ={"AGENT_TOKEN": secret})
    assert loaded.run.endpoint.settings["access_token"] == secret
    assert loaded.run.endpoint.settings["note"] == "plain"
    resolved = loaded.resolved_documents()["settings"]["endpoint"]["settings"]
    assert resolved["access_token"] == "***" and secret not in str(loaded.resolved_documents())
    assert loaded.scrubber.scrub_text(f"Bearer {secret}") == "Bearer ***"


def test_set_accepts_list_indices_as_error_messages_print_them():
    from voicelab.config import Override

    bracketed = Override.parse("script.turns[0].keywords=[plan]")
    dotted = Override.parse("script.turns.0.keywords=[plan]")
    assert bracketed.document == dotted.document == "script"
    assert bracketed.path == dotted.path == ("turns", 0, "keywords")
    assert bracketed.value == ["plan"]
