"""The suite hash: what a suite tests, not where it lives or how it is run."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from voicelab.audio import PcmAudio, write_wav
from voicelab.config import load_run

SEED = Path(__file__).parents[1] / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"


def build_suite(folder: Path) -> Path:
    """The seed example plus an environment and a pre-recorded script turn (audio assets)."""
    folder.mkdir(parents=True)
    for path in SEED.glob("*-workload-neutral-voice.yaml"):
        shutil.copy(path, folder / path.name)
    shutil.copy(SEED / "environment-seed.yaml", folder / "environment.yaml")
    rng = np.random.default_rng(5)
    for name in ("office-hum.wav", "distant-conversation.wav", "door-close.wav", "hello.wav"):
        write_wav(folder / "audio" / name,
                  PcmAudio(rng.integers(-2000, 2000, 2400).astype(np.int16)))
    run_file = folder / RUN
    run_file.write_text(run_file.read_text() + "environment_path: environment.yaml\n")
    script = folder / "script-workload-neutral-voice.yaml"
    script.write_text(script.read_text() + "  - audio_path: audio/hello.wav\n")
    return run_file


def suite_hash(run_file: Path, *overrides: str) -> str:
    return load_run(run_file, overrides=list(overrides), environ={}).suite_hash()


@pytest.fixture()
def run_file(tmp_path: Path) -> Path:
    return build_suite(tmp_path / "checkout-a" / "suite")


def test_the_hash_is_a_sha256_and_is_stable(run_file: Path) -> None:
    first = suite_hash(run_file)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", first)
    assert suite_hash(run_file) == first


def test_moving_the_checkout_keeps_the_hash(run_file: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "deeper" / "checkout-b"
    shutil.copytree(run_file.parents[1], moved)
    assert suite_hash(moved / "suite" / RUN) == suite_hash(run_file)


@pytest.mark.parametrize("override", [
    "artifacts_dir=/tmp/other-artifacts", "trials=5", "concurrency=3",
])
def test_execution_settings_keep_the_hash(run_file: Path, override: str) -> None:
    assert suite_hash(run_file, override) == suite_hash(run_file)


@pytest.mark.parametrize(("document", "old", "new"), [
    ("scenario-workload-neutral-voice.yaml", "  - reminder saved", "  - reminder stored"),
    ("scenario-workload-neutral-voice.yaml", "max_time_seconds: 30", "max_time_seconds: 31"),
    ("script-workload-neutral-voice.yaml", "save the reminder.", "save the reminders."),
    ("persona-workload-neutral-voice.yaml", "concise", "chatty"),
    ("data-workload-neutral-voice.yaml", "16:00", "16:30"),
    ("environment.yaml", "impact: 0.7", "impact: 0.6"),
    (RUN, "adapter: fake", "adapter: websocket"),
])
def test_a_changed_line_changes_the_hash(run_file: Path, document: str, old: str,
                                         new: str) -> None:
    before = suite_hash(run_file)
    path = run_file.parent / document
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    assert suite_hash(run_file) != before


@pytest.mark.parametrize("asset", ["office-hum.wav", "door-close.wav", "hello.wav"])
def test_one_changed_byte_of_an_audio_asset_changes_the_hash(run_file: Path, asset: str) -> None:
    before = suite_hash(run_file)
    path = run_file.parent / "audio" / asset
    content = bytearray(path.read_bytes())
    content[-1] ^= 0x01  # the last sample's low bit: same size, same format
    path.write_bytes(bytes(content))
    assert suite_hash(run_file) != before

