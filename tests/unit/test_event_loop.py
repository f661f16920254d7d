"""The event loop of voicelab's own processes: uvloop when installed unless
``VOICELAB_EVENT_LOOP`` says otherwise, a clear error for an unknown or unavailable choice, and
nothing changed in a process that did not ask (a notebook, a library caller)."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator

import pytest

from voicelab.errors import ConfigError, MissingDependencyError
from voicelab.execution import (
    EVENT_LOOP_VARIABLE,
    chosen_event_loop,
    event_loop_description,
    running_event_loop,
    use_chosen_event_loop,
)

uvloop = pytest.importorskip("uvloop")


@pytest.fixture
def restored_policy() -> Iterator[None]:
    yield
    asyncio.set_event_loop_policy(None)


@pytest.fixture
def without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "uvloop" else real(name, *a))


@pytest.mark.parametrize(("setting", "expected"), [
    (None, "uvloop"), ("auto", "uvloop"), ("", "uvloop"), ("asyncio", "asyncio"),
    ("uvloop", "uvloop"), (" UVLoop ", "uvloop")])
def test_the_choice_follows_the_variable(monkeypatch, setting, expected):
    if setting is None:
        monkeypatch.delenv(EVENT_LOOP_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(EVENT_LOOP_VARIABLE, setting)
    assert chosen_event_loop() == expected


def test_without_uvloop_auto_is_asyncio_and_uvloop_is_the_pip_line(monkeypatch, without_uvloop):
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, "auto")
    assert chosen_event_loop() == "asyncio"
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, "uvloop")
    with pytest.raises(MissingDependencyError, match=r"pip install 'voicelab\[fast\]'"):
        chosen_event_loop()


def test_an_unknown_choice_is_a_config_error_naming_the_choices(monkeypatch):
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, "trio")
    with pytest.raises(ConfigError, match="expected one of auto, asyncio, uvloop"):
        chosen_event_loop()


def test_importing_voicelab_leaves_the_loop_alone():
    # a notebook kernel or a library caller keeps asyncio's loop: only use_chosen_event_loop
    # (the command line, voicelab's worker processes) changes it
    import voicelab  # noqa: F401
    import voicelab.cli  # noqa: F401

    assert not isinstance(asyncio.get_event_loop_policy(), uvloop.EventLoopPolicy)


def test_the_chosen_loop_is_what_new_loops_are(monkeypatch, restored_policy):
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, "auto")
    assert use_chosen_event_loop() == "uvloop"
    assert asyncio.run(_running()) == "uvloop"
    loop = asyncio.new_event_loop()  # as a worker's trial service makes its loop
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_asyncio_when_asked_and_the_description_says_both(monkeypatch, restored_policy):
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, "asyncio")
    assert use_chosen_event_loop() == "asyncio"
    assert asyncio.run(_running()) == "asyncio"
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, "trio")

    async def described() -> str:
        return event_loop_description()

    assert asyncio.run(described()).startswith("asyncio (worker processes: none (")


async def _running() -> str:
    return running_event_loop()


def test_a_command_runs_on_its_loop_of_choice_and_gives_the_caller_its_own_back(
        monkeypatch, restored_policy):
    # a test or a script calling main() in-process keeps its own event loop policy
    import argparse

    from voicelab.cli import _main

    monkeypatch.setenv(EVENT_LOOP_VARIABLE, "uvloop")
    seen: list[object] = []
    monkeypatch.setattr(_main, "_command", lambda name: lambda args: seen.append(
        asyncio.get_event_loop_policy()) or 0)
    before = asyncio.get_event_loop_policy()
    assert _main._run_command(argparse.Namespace(command="run", debug=False)) == 0
    assert isinstance(seen[0], uvloop.EventLoopPolicy)
    assert asyncio.get_event_loop_policy() is before
