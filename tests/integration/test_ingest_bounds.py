"""Ingest refuses what it cannot bound before it writes anything: a transcript's non-finite or
overflowing numbers, a call longer than a bundle's timeline. Exit 2, one line naming the file
(and the key), and no bundle folder."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from voicelab.errors import ConfigError
from voicelab.ingest import IngestOptions, ingest
from voicelab.recording import MAX_TIMELINE_SECONDS


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=300)


def _refused(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def pcm16_wav(path: Path, *, channels: int, sample_rate_hz: int, frames: int) -> Path:
    """A 16-bit WAV of silence whose header declares ``frames``, sparse on disk (only the
    header is written: a call hours long costs no disk and no time to make)."""
    block = 2 * channels
    data = block * frames
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + data, b"WAVE", b"fmt ", 16, 1,
                         channels, sample_rate_hz, sample_rate_hz * block, block, 16, b"data",
                         data)
    with path.open("wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + data)
    return path


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN", "1e309", "-1e400"])
def test_a_transcript_with_a_non_finite_number_exits_2_before_anything_is_written(
        tmp_path: Path, number: str) -> None:
    call = tmp_path / "call.wav"
    soundfile.write(call, np.zeros((8000, 2), np.int16), 8000)
    (tmp_path / "call.transcript.json").write_text(
        '{"segments": [{"speaker": "user", "start": 0.25, "end": 0.5, "text": "hi"}, '
        f'{{"speaker": "agent", "start": 0.6, "end": {number}, "text": "hello"}}]}}')
    line = _refused(_cli("ingest", str(call), "--artifacts-dir", str(tmp_path / "out")),
                    "call.transcript.json: segments[1].end: ")
    assert "finite" in line or "greater than or equal to 0" in line
    assert not (tmp_path / "out").exists()


def test_a_transcript_beyond_a_calls_longest_timeline_is_refused(tmp_path: Path) -> None:
    call = tmp_path / "call.wav"
    soundfile.write(call, np.zeros((8000, 2), np.int16), 8000)
    (tmp_path / "call.transcript.json").write_text(
        '[{"speaker": "user", "start": 1e300, "end": 1e301, "text": "hi"}]')
    _refused(_cli("ingest", str(call), "--artifacts-dir", str(tmp_path / "out")),
             "call.transcript.json: segments[0].start: ", f"{MAX_TIMELINE_SECONDS}")
    assert not (tmp_path / "out").exists()


def test_a_stereo_call_over_the_limit_exits_2_before_the_bundle_folder_exists(
        tmp_path: Path) -> None:
    long = pcm16_wav(tmp_path / "long.wav", channels=2, sample_rate_hz=8000,
                     frames=8000 * (MAX_TIMELINE_SECONDS + 1))
    line = _refused(_cli("ingest", str(long), "--artifacts-dir", str(tmp_path / "out")),
                    "long.wav: ", "3,601.0 s long", f"limited to {MAX_TIMELINE_SECONDS} s")
    assert "call" in line
    assert not (tmp_path / "out").exists()


def test_a_mono_leg_over_the_limit_exits_2_before_the_bundle_folder_exists(
        tmp_path: Path) -> None:
    user = tmp_path / "user.wav"
    soundfile.write(user, np.zeros(8000, np.int16), 8000)
    agent = pcm16_wav(tmp_path / "agent.wav", channels=1, sample_rate_hz=8000,
                      frames=8000 * 2 * MAX_TIMELINE_SECONDS)
    _refused(_cli("ingest", "--pair", str(user), str(agent), "--artifacts-dir",
                  str(tmp_path / "out")), "agent.wav: ", "7,200.0 s long")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("gap_ms", [float("nan"), float("inf"), -5.0, 0.0])
def test_the_library_refuses_a_turn_gap_it_cannot_use(tmp_path: Path, gap_ms: float) -> None:
    call = tmp_path / "call.wav"
    soundfile.write(call, np.zeros((8000, 2), np.int16), 8000)
    with pytest.raises(ConfigError) as refused:
        ingest([call], artifacts_dir=tmp_path / "out", options=IngestOptions(turn_gap_ms=gap_ms))
    assert refused.value.key == "turn_gap_ms"
    assert not (tmp_path / "out").exists()
