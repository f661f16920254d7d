"""Config files are bounded: their size on disk and what their YAML aliases expand to."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from voicelab.config import Override, load_run, read_yaml
from voicelab.config._yaml import (
    MAX_CONFIG_FILE_BYTES,
    MAX_EXPANDED_TEXT_CHARS,
    MAX_EXPANDED_VALUES,
)
from voicelab.errors import ConfigError

SEED = Path(__file__).parents[1] / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"
DATA = "data-workload-neutral-voice.yaml"


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """``a: &a [lol x width]``, ``b: &b [*a x width]``, ...: width**levels strings, ~400 bytes."""
    names = "abcdefghijklmnopqrstuvwxyz"[:levels]
    lines = [f"a: &a [{', '.join(['lol'] * width)}]"]
    for previous, name in zip(names[:-1], names[1:], strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * width)}]")
    return "\n".join(lines) + "\n"


def config_error(call) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        call()
    assert "\n" not in str(caught.value)
    return caught.value


@pytest.fixture()
def run_file(tmp_path: Path) -> Path:
    for path in SEED.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / RUN


# --- alias expansion --------------------------------------------------------------------------

def test_a_billion_laughs_document_is_refused_without_expanding_it(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(billion_laughs())
    assert path.stat().st_size < 1000
    error = config_error(lambda: read_yaml(path))
    assert error.source == str(path)
    assert f"more than {MAX_EXPANDED_VALUES:,} values" in error.message
    # the smallest anchor past the limit: 'a' stands for 10 values, each level 9x more
    assert error.key == "g"


def test_an_alias_to_a_long_string_counts_its_characters_each_time(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    repeats = MAX_EXPANDED_TEXT_CHARS // 100_000 + 1
    path.write_text(f"text: &t {'x' * 100_000}\nagain: [{', '.join(['*t'] * repeats)}]\n")
    error = config_error(lambda: read_yaml(path))
    assert f"more than {MAX_EXPANDED_TEXT_CHARS:,} characters" in error.message
    assert error.key == "again"


@pytest.mark.parametrize("text", [
    "a: &a [1, *a]\n",
    "a: &a {b: {c: *a}}\n",
    "x: 1\nlist:\n  - &item {next: [*item]}\n",
])
def test_a_recursive_alias_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "recursive.yaml"
    path.write_text(text)
    error = config_error(lambda: read_yaml(path))
    assert "recursive alias" in error.message


def test_ordinary_anchors_aliases_and_merge_keys_still_load(run_file: Path) -> None:
    data = run_file.parent / DATA
    data.write_text(data.read_text() + (
        "defaults: &defaults {language: en-US, retries: 2}\n"
        "callers:\n"
        "  - {<<: *defaults, name: Ada}\n"
        "  - {<<: *defaults, name: Lin, retries: 5}\n"
        "shared_list: &topics [plan, reminder]\n"
        "topics_again: *topics\n"
        "note: &note 'room ${ROOM:-101}'\n"
        "notes: [*note, *note]\n"))
    loaded = load_run(run_file, environ={})
    assert loaded.data["callers"] == [
        {"language": "en-US", "retries": 2, "name": "Ada"},
        {"language": "en-US", "retries": 5, "name": "Lin"}]
    assert loaded.data["topics_again"] == ["plan", "reminder"]
    assert loaded.data["notes"] == ["room 101", "room 101"]


def test_a_document_just_within_the_value_budget_loads(tmp_path: Path) -> None:
    # 10 x 10 x 10 x 10 x 10 strings (100,000), far below the budget, from a 300-byte file
    path = tmp_path / "wide.yaml"
    path.write_text(billion_laughs(levels=5, width=10))
    assert len(yaml.safe_load(path.read_text())["e"]) == 10
    assert len(read_yaml(path)["e"][0][0][0][0]) == 10


def test_a_set_value_with_a_billion_laughs_is_refused() -> None:
    flow = "{" + ", ".join(billion_laughs().strip().splitlines()) + "}"
    error = config_error(lambda: Override.parse(f"data.extra={flow}"))
    assert error.source.startswith("--set data.extra=")
    assert error.key == "data.extra" and "values" in error.message


# --- file size --------------------------------------------------------------------------------

def test_a_file_over_the_size_limit_is_refused_before_it_is_read(run_file: Path) -> None:
    data = run_file.parent / DATA
    with data.open("r+b") as handle:  # sparse: nothing to read, only a declared size
        handle.truncate(20 * 1024 * 1024)
    error = config_error(lambda: load_run(run_file, environ={}))
    assert error.source == str(data.resolve())
    assert "file too large (20.0 MiB" in error.message and "1.0 MiB" in error.message


def test_a_file_at_the_size_limit_loads_and_one_byte_more_does_not(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    prefix = "note: "
    path.write_text(prefix + "x" * (MAX_CONFIG_FILE_BYTES - len(prefix) - 1) + "\n")
    assert path.stat().st_size == MAX_CONFIG_FILE_BYTES
    assert len(read_yaml(path)["note"]) == MAX_CONFIG_FILE_BYTES - len(prefix) - 1
    path.write_text(prefix + "x" * (MAX_CONFIG_FILE_BYTES - len(prefix)) + "\n")
    assert "file too large" in config_error(lambda: read_yaml(path)).message


def test_a_file_the_run_names_that_is_too_large_is_blamed_on_that_file(run_file: Path) -> None:
    script = run_file.parent / "script-workload-neutral-voice.yaml"
    script.write_text(script.read_text() + "# " + "padding " * (MAX_CONFIG_FILE_BYTES // 8) + "\n")
    error = config_error(lambda: load_run(run_file, environ={}))
    assert error.source == str(script.resolve()) and "file too large" in error.message
