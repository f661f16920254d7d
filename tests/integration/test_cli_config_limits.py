"""Hostile config files and audio assets through the CLI: exit 2 and one line, in bounded memory.

Each command runs as a subprocess whose address space is capped (``RLIMIT_AS``), so a
regression that expands a document again fails here with a MemoryError instead of taking the
machine down; the generous ``timeout`` turns a hang into a failure.
"""

from __future__ import annotations

import os
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from voicelab.audio import PcmAudio, write_wav

REPO = Path(__file__).parents[2]
SEED = REPO / "tests" / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"
SUITE = "suite.yaml"
#: Far above what validating the seed needs (about 0.6 GB of address space), far below what
#: expanding a billion-laughs document takes (22 GB).
ADDRESS_SPACE_BYTES = 2 * 1024 ** 3

BILLION_LAUGHS = "\n".join(
    ['lol_a: &lol_a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"lol_{name}: &lol_{name} [{', '.join([f'*lol_{previous}'] * 9)}]"
       for previous, name in zip("abcdefgh", "bcdefghi", strict=True)]) + "\n"


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def voice_evaluator(folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *arguments], cwd=folder,
                          capture_output=True, text=True, timeout=120, preexec_fn=_cap_memory)


def assert_refused(completed: subprocess.CompletedProcess[str], file_name: str,
                   *words: str) -> str:
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr and "MemoryError" not in completed.stderr
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr[-2000:]
    line = lines[0]
    assert line.startswith("voice-evaluator: error: ") and file_name in line
    for word in words:
        assert word in line
    return line


@pytest.fixture()
def suite(tmp_path: Path) -> Path:
    folder = tmp_path / "suite"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(SEED / "environment-seed.yaml", folder / "environment.yaml")
    run_file = folder / RUN
    run_file.write_text(run_file.read_text() + "environment_path: environment.yaml\n")
    (folder / SUITE).write_text(f"name: limits\nbase: {RUN}\nenvironments: [quiet]\n")
    rng = np.random.default_rng(0)
    for name in ("office-hum.wav", "distant-conversation.wav", "door-close.wav"):
        write_wav(folder / "audio" / name,
                  PcmAudio(rng.integers(-3_000, 3_000, 4_800).astype(np.int16)))
    return folder


def pcm16_wav(path: Path, *, sample_rate_hz: int, frames: int) -> Path:
    """A mono 16-bit WAV of silence whose header declares any rate, sparse on disk."""
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + 2 * frames, b"WAVE", b"fmt ", 16,
                         1, 1, sample_rate_hz, (2 * sample_rate_hz) & 0xFFFFFFFF, 2, 16, b"data",
                         2 * frames)
    with path.open("wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + 2 * frames)
    return path


@pytest.mark.parametrize(("file_name", "command"), [
    (RUN, "validate"),
    ("scenario-workload-neutral-voice.yaml", "validate"),
    ("persona-workload-neutral-voice.yaml", "validate"),
    ("data-workload-neutral-voice.yaml", "validate"),
    ("script-workload-neutral-voice.yaml", "validate"),
    ("environment.yaml", "validate"),
    ("data-workload-neutral-voice.yaml", "run"),
    (SUITE, "plan"),
])
def test_a_billion_laughs_in_any_config_file_exits_2(suite: Path, file_name: str,
                                                     command: str) -> None:
    target = suite / file_name
    target.write_text(target.read_text() + BILLION_LAUGHS)
    arguments = [command, SUITE if command == "plan" else RUN]
    if command == "run":
        arguments += ["--artifacts-dir", str(suite / "artifacts")]
    line = assert_refused(voice_evaluator(suite, *arguments), file_name,
                          ": lol_g: ", "more than 1,000,000 values")
    assert "lol" not in line.replace("lol_g", "")  # the document is named, never dumped


def test_a_billion_laughs_in_a_set_value_exits_2(suite: Path) -> None:
    flow = "{" + ", ".join(BILLION_LAUGHS.strip().splitlines()) + "}"
    completed = voice_evaluator(suite, "validate", RUN, "--set", f"data.extra={flow}")
    assert_refused(completed, "--set data.extra=", ": data.extra: ", "values")


def test_a_recursive_alias_exits_2(suite: Path) -> None:
    data = suite / "data-workload-neutral-voice.yaml"
    data.write_text(data.read_text() + "loop: &loop {again: [*loop]}\n")
    assert_refused(voice_evaluator(suite, "validate", RUN), data.name, ": loop: ",
                   "recursive alias")


def test_a_200_mb_data_file_exits_2_naming_it(suite: Path) -> None:
    data = suite / "data-workload-neutral-voice.yaml"
    with data.open("r+b") as handle:  # sparse: only its declared size is real
        handle.truncate(200 * 1024 * 1024)
    assert_refused(voice_evaluator(suite, "validate", RUN), data.name,
                   "file too large (200.0 MiB", "limited to 1.0 MiB")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_config_file_that_never_ends_exits_2(suite: Path) -> None:
    data = suite / "data-workload-neutral-voice.yaml"
    data.unlink()
    data.symlink_to("/dev/zero")  # declares size 0 and never ends: refused before any read
    assert_refused(voice_evaluator(suite, "validate", RUN), "data_path", "found a device")


def test_anchors_and_aliases_of_an_ordinary_size_still_validate(suite: Path) -> None:
    data = suite / "data-workload-neutral-voice.yaml"
    data.write_text(data.read_text() + (
        "defaults: &defaults {language: en-US, retries: 2}\n"
        "callers: [{<<: *defaults, name: Ada}, {<<: *defaults, name: Lin}]\n"))
    completed = voice_evaluator(suite, "validate", RUN)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith(f"{RUN}: valid")


# --- audio assets -------------------------------------------------------------------------------

def test_the_audited_1_hz_script_recording_exits_2_before_any_trial(suite: Path) -> None:
    # 133,333 samples at 1 Hz: 37 hours, 3.2 GB once resampled to 24 kHz
    pcm16_wav(suite / "hello.wav", sample_rate_hz=1, frames=133_333)
    script = suite / "script-workload-neutral-voice.yaml"
    script.write_text(script.read_text() + "  - audio_path: hello.wav\n")
    completed = voice_evaluator(suite, "run", RUN, "--artifacts-dir", str(suite / "artifacts"))
    assert_refused(completed, script.name, ": turns[1].audio_path: ",
                   "implausible sample rate 1 Hz", "hello.wav")


def test_a_2_ghz_environment_asset_exits_2(suite: Path) -> None:
    pcm16_wav(suite / "audio" / "office-hum.wav", sample_rate_hz=2_000_000_000, frames=4_800)
    assert_refused(voice_evaluator(suite, "validate", RUN), "environment.yaml",
                   ": base_noise: ", "implausible sample rate 2,000,000,000 Hz",
                   "4,000 to 384,000 Hz")


def test_an_environment_asset_longer_than_the_limit_exits_2(suite: Path) -> None:
    pcm16_wav(suite / "audio" / "door-close.wav", sample_rate_hz=8_000, frames=8_000 * 3_600)
    assert_refused(voice_evaluator(suite, "validate", RUN), "environment.yaml",
                   ": transient_events[0].type: ", "3,600.0 s long", "limited to 600 s")


# --- script turns: pauses and time ----------------------------------------------------------------

SCRIPT = "script-workload-neutral-voice.yaml"


def script_turn(folder: Path, response: str, *, turns: int = 1) -> Path:
    script = folder / SCRIPT
    lines = ["turns:"]
    for _ in range(turns):
        lines += [f"  - response: {response!r}", "    keywords: [daily plan, reminder]"]
    script.write_text("\n".join(lines) + "\n")
    return script


def test_ten_thousand_pause_markers_exit_2_naming_the_turn(suite: Path) -> None:
    script_turn(suite, "Please record " + " ".join(["{pause: 10} the plan"] * 10_000))
    for command in ("validate", "run"):
        arguments = [command, RUN] + (["--artifacts-dir", str(suite / "artifacts")]
                                      if command == "run" else [])
        assert_refused(voice_evaluator(suite, *arguments), SCRIPT, ": turns[0].response: ",
                       "10,000 pauses", "at most 20")
    assert not (suite / "artifacts").exists()


def test_a_script_of_too_many_pauses_in_all_exits_2(suite: Path) -> None:
    script_turn(suite, "Please record " + " ".join(["{pause: 0.5} the plan"] * 20), turns=6)
    assert_refused(voice_evaluator(suite, "validate", RUN), SCRIPT, ": turns: ",
                   "the script holds 120 pauses", "at most 100")


def test_a_turn_longer_than_the_time_limit_exits_2_before_any_trial(suite: Path) -> None:
    # 40 s of pauses alone: past the scenario's 30 s whatever the speech between them
    script_turn(suite, "Please record " + " ".join(["{pause: 10} the plan"] * 4))
    completed = voice_evaluator(suite, "run", RUN, "--artifacts-dir", str(suite / "artifacts"))
    assert_refused(completed, SCRIPT, ": turns[0].response: ", "the turn lasts at least 4",
                   "40.0 s of pauses", "longer than the scenario's max_time_seconds (30 s)")
    assert not (suite / "artifacts").exists()


def test_a_turn_that_fits_in_the_time_limit_is_not_refused(suite: Path) -> None:
    # 20 s of pauses and about 3 s of tone speech in a 30 s scenario
    script_turn(suite, "Please record {pause: 10} the daily plan {pause: 10} and the reminder.")
    completed = voice_evaluator(suite, "validate", RUN)
    assert completed.returncode == 0, completed.stderr
