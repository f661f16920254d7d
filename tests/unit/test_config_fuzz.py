"""A property of the loader: any run file, referenced document or ``--set`` override either
loads (and can be sanitized, written as JSON and hashed) or raises a one-line ConfigError."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml
from _config_files import SEED, copy_seed, edit_yaml, tone_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voicelab.config import load_run
from voicelab.errors import ConfigError

# --- property: anything either loads or is a ConfigError --------------------------------------

FIELD_NAMES = sorted({
    "scenario_path", "persona_path", "data_path", "script_path", "environment_path",
    "persona_mode", "speech_provider", "endpoint", "adapter", "settings", "outcome_probe",
    "probe", "providers", "azure_openai", "quality_evaluation", "custom_judges", "artifacts_dir",
    "trial_seed", "trials", "concurrency", "pace_audio", "id", "description", "expected_topics",
    "conversation", "max_turns", "required_capabilities", "first_speaker", "eval_spec",
    "expected_exit", "limits", "max_time_seconds", "outcome_spec", "name", "session_behavior",
    "communication_style", "persona_voice", "turns", "trigger", "response", "keywords",
    "audio_path", "interrupt_after_seconds", "impact", "base_noise", "transient_events", "type",
    "volume", "trigger_mode", "on_turn_number", "at_seconds", "probability", "access_token",
})
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text(max_size=20) | st.sampled_from(["${HOME}", "${UNSET_X}", "${A:-b}", "$$",
                                                    "../x.wav", "scripted", "fake", "on_turn"])
           | st.dates() | st.binary(max_size=8))
KEYS = st.sampled_from(FIELD_NAMES) | st.text(max_size=8) | st.integers(-3, 3) | st.dates()
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(KEYS, inner, max_size=5), max_leaves=20)
DOCUMENTS = st.dictionaries(KEYS, VALUES, max_size=8) | VALUES
YAMLISH_TEXT = st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!|>'\"%@`#,? \n\t$0.~")),
                       max_size=60)
TARGETS = ["run", "scenario", "persona", "data", "script", "environment"]


@pytest.fixture(scope="module")
def fuzz_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("fuzz")
    run_file = copy_seed(folder)
    shutil.copy(SEED / "environment-seed.yaml", folder / "environment.yaml")
    for name in ("office-hum.wav", "distant-conversation.wav", "door-close.wav"):
        tone_file(folder / "audio" / name, seconds=0.05)
    edit_yaml(run_file, environment_path="environment.yaml")
    originals = {path: path.read_bytes() for path in folder.glob("*.yaml")}
    yield run_file
    for path, content in originals.items():
        path.write_bytes(content)


def fuzz_file(run_file: Path, target: str) -> Path:
    if target == "run":
        return run_file
    if target == "environment":
        return run_file.parent / "environment.yaml"
    return run_file.parent / f"{target}-workload-neutral-voice.yaml"


def loads_or_config_error(run_file: Path, overrides: Sequence[str] = ()) -> None:
    try:
        loaded = load_run(run_file, overrides=overrides, environ={"HOME": "/home/x", "A": "1"})
    except ConfigError as error:
        assert len(error.one_line().splitlines()) == 1
        return
    # what loads can also be sanitized, written as JSON and hashed
    json.dumps(loaded.resolved_documents())
    assert loaded.suite_hash().startswith("sha256:")


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(target=st.sampled_from(TARGETS),
       content=DOCUMENTS.map(lambda d: yaml.safe_dump(d, allow_unicode=True)) | YAMLISH_TEXT)
def test_random_yaml_documents_load_or_raise_config_error(fuzz_suite: Path, target: str,
                                                          content: str) -> None:
    path = fuzz_file(fuzz_suite, target)
    original = path.read_bytes()
    path.write_text(content, encoding="utf-8")
    try:
        loads_or_config_error(fuzz_suite)
    finally:
        path.write_bytes(original)


OVERRIDE_KEYS = st.lists(st.sampled_from([*FIELD_NAMES, *TARGETS, "0", "1", "-1", ""])
                         | st.text(max_size=5), min_size=1, max_size=4).map(".".join)
OVERRIDE_VALUES = VALUES.map(lambda v: yaml.safe_dump(v, default_flow_style=True).strip()) \
    | YAMLISH_TEXT | st.text(max_size=30)


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(overrides=st.lists(st.tuples(OVERRIDE_KEYS, st.sampled_from(["=", ""]), OVERRIDE_VALUES)
                          .map("".join) | st.text(max_size=40), min_size=1, max_size=3))
def test_random_overrides_load_or_raise_config_error(fuzz_suite: Path,
                                                     overrides: list[str]) -> None:
    loads_or_config_error(fuzz_suite, overrides)
