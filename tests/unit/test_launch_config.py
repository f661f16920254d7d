"""``endpoint.launch``: the config model, the ``{port}`` placeholder, and what is refused early."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from voicelab.config import validate_model
from voicelab.config._base import StrictModel
from voicelab.config._launch import LaunchConfig
from voicelab.endpoints import ProductProcess, check_launch, fill_placeholders, uses_port
from voicelab.errors import ConfigError

ISSUE_EXAMPLE = """
command: ["python", "my_bot.py", "--port", "{port}"]
ready_pattern: "listening on"
per: trial
ready_timeout_seconds: 30
stop_grace_seconds: 5
env: {LOG_LEVEL: info}
cwd: bots/
"""


class Endpoint(StrictModel):
    """How the launch block sits in a run file (``EndpointConfig`` gains this field)."""

    launch: LaunchConfig


def launch(**changes: Any) -> LaunchConfig:
    return LaunchConfig.model_validate({"command": ["bot"], "ready_pattern": "ready", **changes})


def error_at(data: dict[str, Any]) -> str:
    """The one-line error a run file with this endpoint would get."""
    with pytest.raises(ConfigError) as caught:
        validate_model(Endpoint, {"launch": data}, source="run.yaml")
    return str(caught.value)


# --- the model ------------------------------------------------------------------------------

def test_the_issue_example_validates_and_keeps_every_value() -> None:
    written = yaml.safe_load(ISSUE_EXAMPLE)
    parsed = LaunchConfig.model_validate(written)
    assert parsed.model_dump(mode="json", exclude_unset=True) == {**written, "cwd": "bots"}
    assert parsed.cwd == Path("bots")


def test_defaults_launch_per_trial_with_finite_timeouts() -> None:
    parsed = launch()
    assert (parsed.per, parsed.ready_timeout_seconds, parsed.stop_grace_seconds) == (
        "trial", 30.0, 5.0)
    assert parsed.env == {} and parsed.cwd is None


def test_numbers_in_the_command_and_env_become_text() -> None:
    # YAML reads `--port 8080` and `PORT: 8080` as numbers; a command line is text
    parsed = launch(command=["bot", "--port", 8080, "--rate", 1.5], env={"PORT": 8080})
    assert parsed.command == ["bot", "--port", "8080", "--rate", "1.5"]
    assert parsed.env == {"PORT": "8080"}


@pytest.mark.parametrize(("data", "key", "message"), [
    ({"command": ["bot"], "ready_pattern": "x", "ready_timeout": 3}, "launch.ready_timeout",
     "unknown key"),
    ({"command": [], "ready_pattern": "x"}, "launch.command", "at least 1 item"),
    ({"command": "python bot.py", "ready_pattern": "x"}, "launch.command", "valid list"),
    ({"command": ["  ", "x"], "ready_pattern": "x"}, "launch.command", "the program"),
    ({"command": ["bot", "a\0b"], "ready_pattern": "x"}, "launch.command", "NUL"),
    ({"command": ["bot"], "ready_pattern": "listening on (port"}, "launch.ready_pattern",
     "not a valid regular expression: missing )"),
    ({"command": ["bot"], "ready_pattern": ""}, "launch.ready_pattern", "at least 1 char"),
    ({"command": ["bot"]}, "launch.ready_pattern", "required key is missing"),
    ({"command": ["bot"], "ready_pattern": "x", "per": "scenario"}, "launch.per",
     "'trial' or 'run'"),
    ({"command": ["bot"], "ready_pattern": "x", "ready_timeout_seconds": 0},
     "launch.ready_timeout_seconds", "greater than 0"),
    ({"command": ["bot"], "ready_pattern": "x", "stop_grace_seconds": -1},
     "launch.stop_grace_seconds", "greater than 0"),
    ({"command": ["bot"], "ready_pattern": "x", "ready_timeout_seconds": float("inf")},
     "launch.ready_timeout_seconds", "finite"),
    ({"command": ["bot"], "ready_pattern": "x", "env": {"A=B": "1"}}, "launch.env",
     "not a valid environment variable name"),
    ({"command": ["bot"], "ready_pattern": "x", "env": {"DEBUG": True}}, "launch.env.DEBUG",
     "valid string"),
    ({"command": ["bot"], "ready_pattern": "x", "cwd": 3}, "launch.cwd", "path"),
])
def test_a_bad_launch_block_is_one_line_naming_the_key(data: dict[str, Any], key: str,
                                                       message: str) -> None:
    line = error_at(data)
    assert line.startswith(f"run.yaml: {key}: "), line
    assert message in line
    assert "\n" not in line


def test_the_model_forbids_unknown_keys_on_its_own_too() -> None:
    with pytest.raises(ValidationError) as caught:
        LaunchConfig.model_validate({"command": ["bot"], "ready_pattern": "x", "shell": True})
    assert [e["type"] for e in caught.value.errors()] == ["extra_forbidden"]


# --- the placeholder ------------------------------------------------------------------------

def test_fill_placeholders_reaches_every_nested_string_and_leaves_the_rest() -> None:
    settings = {"uri": "ws://127.0.0.1:{port}/", "headers": {"X-Port": "{port}"},
                "{port}": "keys stay", "list": ["a{port}b", 7, None, ("{port}",)],
                "escaped": "{{port}} and {{other}} and {\"json\": 1}"}
    filled = fill_placeholders(settings, 40123)
    assert filled == {"uri": "ws://127.0.0.1:40123/", "headers": {"X-Port": "40123"},
                      "{port}": "keys stay", "list": ["a40123b", 7, None, ("40123",)],
                      "escaped": "{port} and {{other}} and {\"json\": 1}"}
    assert settings["uri"] == "ws://127.0.0.1:{port}/"  # a copy: the config is untouched


def test_only_an_unescaped_placeholder_needs_a_port() -> None:
    assert uses_port({"a": [{"b": "x{port}"}]})
    assert not uses_port({"a": "{{port}}", "{port}": 1, "b": "{ port }"})
    assert fill_placeholders(["{{port}}"], None) == ["{port}"]
    with pytest.raises(ValueError, match="needs a port"):
        fill_placeholders("{port}", None)


def test_settings_using_the_port_the_product_is_never_told_are_refused() -> None:
    settings = {"uri": "ws://127.0.0.1:{port}/"}
    with pytest.raises(ConfigError, match=r"^endpoint\.launch\.command: endpoint\.settings use"):
        check_launch(launch(command=["bot"]), settings)
    with pytest.raises(ConfigError):
        ProductProcess(launch(command=["bot"]), settings=settings)
    check_launch(launch(command=["bot", "--port={port}"]), settings)
    check_launch(launch(env={"PORT": "{port}"}), settings)


def test_the_constructor_does_no_io_and_the_settings_wait_for_the_port() -> None:
    process = ProductProcess(launch(command=["no-such-program-xyz", "{port}"]),
                             settings={"uri": "ws://127.0.0.1:{port}/"})
    assert process.pid is None and process.returncode is None and not process.ready
    with pytest.raises(RuntimeError, match="start the product first"):
        _ = process.settings
    assert asyncio.run(process.stop()) is None  # never started: nothing to stop
    given = ProductProcess(launch(command=["bot", "{port}"]), settings={"uri": ":{port}/"},
                           port=40124)
    assert given.settings == {"uri": ":40124/"}
    assert ProductProcess(launch(), settings={"a": "{{port}}"}).settings == {"a": "{port}"}
