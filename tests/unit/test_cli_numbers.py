"""Every numeric option of every sub-command is checked by argparse: a value that is not a
number, or not one the option can take, is exit 2 and one line, never a traceback."""

from __future__ import annotations

import argparse

import pytest

from voicelab.cli import build_parser
from voicelab.cli._main import main

#: Enough positional arguments for each sub-command to reach its options (nothing is read:
#: argparse refuses the option before any command runs).
POSITIONALS = {"validate": ["run.yaml"], "run": ["run.yaml"], "sweep": ["suite.yaml"],
               "plan": ["suite.yaml"], "report": ["runs"], "rescore": ["runs"],
               "replay": ["runs"], "ingest": ["call.wav", "--artifacts-dir", "out"],
               "compare": ["a", "b"], "init": ["folder"]}
#: Values no numeric option takes: words, non-finite numbers, numbers past any float.
NOT_NUMBERS = ["forty-two", "nan", "inf", "-inf", "1e309", ""]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def numeric_options() -> list[tuple[str, str]]:
    """(command, option) of every option whose default is a number or whose type converts to
    one: what an option that takes a number looks like, whatever its type is called."""
    found = []
    for command, parser in _subparsers().items():
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            numeric_default = isinstance(action.default, int | float) \
                and not isinstance(action.default, bool)
            if numeric_default or action.type in (int, float) or \
                    getattr(action.type, "numeric", False):
                found.append((command, action.option_strings[-1]))
    return found


def test_the_walk_finds_the_numeric_options() -> None:
    options = set(numeric_options())
    for expected in [("run", "--trials"), ("run", "--workers"), ("sweep", "--concurrency"),
                     ("replay", "--concurrency"), ("ingest", "--turn-gap-ms"),
                     ("compare", "--seed"), ("compare", "--confidence"), ("plan", "--width")]:
        assert expected in options


def test_every_numeric_option_has_a_type_that_checks_its_range() -> None:
    for command, option in numeric_options():
        action = next(a for a in _subparsers()[command]._actions
                      if option in a.option_strings)
        assert getattr(action.type, "numeric", False), (command, option, action.type)


@pytest.mark.parametrize(("command", "option"), numeric_options())
@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_a_numeric_option_refuses_what_is_no_number_in_one_line(
        command: str, option: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, *POSITIONALS[command], f"{option}={value}"]) == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert error.count("\n") == 1 and error.startswith(f"voice-evaluator: error: CLI: {option}: ")


@pytest.mark.parametrize(("command", "option", "value"), [
    ("compare", "--seed", "-1"),            # numpy's bootstrap takes no negative seed
    ("ingest", "--turn-gap-ms", "-5"),
    ("ingest", "--turn-gap-ms", "0"),
    ("run", "--trials", "0"),
    ("run", "--trials", "1.5"),
    ("run", "--concurrency", "100001"),
    ("sweep", "--workers", "0"),
    ("run", "--retry-inconclusive", "6"),
    ("plan", "--width", "0"),
    ("plan", "--confidence", "1"),
    ("compare", "--confidence", "0"),
    ("compare", "--max-pass-rate-drop", "-0.1"),
    ("compare", "--max-latency-p95-increase-ms", "-1"),
])
def test_a_number_out_of_the_options_range_is_refused_in_one_line(
        command: str, option: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, *POSITIONALS[command], f"{option}={value}"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert error.startswith(f"voice-evaluator: error: CLI: {option}: must be ")


@pytest.mark.parametrize(("command", "option", "value", "parsed"), [
    ("run", "--trials", "3", 3),
    ("compare", "--seed", "42", 42),
    ("ingest", "--turn-gap-ms", "2500", 2500.0),
    ("compare", "--confidence", "0.9", 0.9),
    ("run", "--retry-inconclusive", "0", 0),
])
def test_a_number_in_range_is_parsed(command: str, option: str, value: str,
                                     parsed: float) -> None:
    args = build_parser().parse_args([command, *POSITIONALS[command], option, value])
    assert getattr(args, option.lstrip("-").replace("-", "_")) == parsed
