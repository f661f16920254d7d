"""What the configuration loader tests share (test_config_loader.py, test_config_overrides.py,
test_config_fuzz.py): a copy of the seed's run files, edits to a YAML file, a tone WAV, and a
ConfigError caught and checked to be one line."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from voicelab.audio import PcmAudio, write_wav
from voicelab.errors import ConfigError

SEED = Path(__file__).parents[1] / "fixtures" / "seed"
SEED_SUITE = ["run-workload-neutral-voice.yaml", "scenario-workload-neutral-voice.yaml",
              "persona-workload-neutral-voice.yaml", "data-workload-neutral-voice.yaml",
              "script-workload-neutral-voice.yaml"]
RUN = "run-workload-neutral-voice.yaml"


def copy_seed(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in SEED_SUITE:
        shutil.copy(SEED / name, folder / name)
    return folder / RUN


def edit_yaml(path: Path, **changes: Any) -> None:
    document = yaml.safe_load(path.read_text()) or {}
    document.update(changes)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def tone_file(path: Path, *, seconds: float = 0.2, amplitude: int = 1000) -> Path:
    count = int(seconds * 24_000)
    samples = (amplitude * np.sin(2 * np.pi * 300 * np.arange(count) / 24_000)).astype(np.int16)
    return write_wav(path, PcmAudio(samples))


def config_error(call: Any) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        call()
    assert "\n" not in str(caught.value)
    return caught.value
