"""``arun(config, options)``: one frozen RunOptions, and the keyword form kept one release."""

from __future__ import annotations

import asyncio
import dataclasses
import warnings
from pathlib import Path

import pytest

import voicelab

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def test_options_are_frozen_and_keep_their_sequences_as_tuples():
    overrides = ["trials=2"]
    options = voicelab.RunOptions(overrides=overrides, only="trial-001", observers=[])
    overrides.append("concurrency=3")  # the caller's list changes; the options do not
    assert options.overrides == ("trials=2",)
    assert options.only == ("trial-001",)  # one string is one expression, not its letters
    assert options.observers == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.trials = 3  # type: ignore[misc]


def test_options_take_keywords_only():
    with pytest.raises(TypeError):
        voicelab.RunOptions(3)  # type: ignore[misc]


def test_the_keyword_form_warns_at_the_callers_line_naming_the_new_form():
    with pytest.warns(DeprecationWarning) as caught:
        started = voicelab.arun(EXAMPLE, trials=1, label="old")
    started.close()  # never run: only the call is checked
    warning = caught[0]
    assert warning.filename == __file__
    assert "voicelab.arun(config, voicelab.RunOptions(trials=..., label=...))" \
        in str(warning.message)


def test_the_options_form_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        started = voicelab.arun(EXAMPLE, voicelab.RunOptions(trials=1))
        started.close()
        started = voicelab.arun_matrix(EXAMPLE, voicelab.RunOptions(trials=1))
        started.close()


def test_options_and_keywords_together_are_refused():
    with pytest.raises(TypeError, match="not both"):
        voicelab.arun(EXAMPLE, voicelab.RunOptions(trials=1), label="which")
    with pytest.raises(TypeError, match="not both"):
        voicelab.run_matrix(EXAMPLE, voicelab.RunOptions(trials=1), label="which")


def test_an_unknown_keyword_is_refused_by_name():
    with pytest.raises(TypeError, match="trails"):
        voicelab.arun(EXAMPLE, trails=1)  # type: ignore[call-arg]


def test_the_sync_form_in_a_running_loop_names_the_awaitable_one():
    async def in_a_notebook() -> None:
        voicelab.run(EXAMPLE, voicelab.RunOptions(trials=1))

    with pytest.raises(RuntimeError, match=r"await voicelab.arun\(...\)"):
        asyncio.run(in_a_notebook())
