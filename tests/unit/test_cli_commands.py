"""Every `voice-evaluator` subcommand reaches a handler in its command-group module."""

from __future__ import annotations

import re

from voicelab.cli import build_parser
from voicelab.cli._main import COMMANDS, _command


def test_every_subcommand_has_a_handler_and_every_handler_a_subcommand():
    usage = build_parser().format_usage()
    choices = re.search(r"\{([a-z,]+)\}", usage)
    assert choices is not None, usage
    assert sorted(choices.group(1).split(",")) == sorted(COMMANDS)


def test_each_handler_is_a_function_of_its_command_group_module():
    for name, (module, function) in COMMANDS.items():
        handler = _command(name)
        assert callable(handler)
        assert (handler.__module__, handler.__name__) == (f"voicelab.cli.{module}", function)
