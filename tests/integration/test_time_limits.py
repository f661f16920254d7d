"""A trial's ``max_time_seconds`` holds inside a turn too: a user turn or a product reply that
would run past it is cut at the limit, the trial ends with ``max_time``, and the turn's audio is
never made beyond it (each trial runs in a subprocess whose address space is capped, so a turn
materialized whole fails here with a MemoryError instead of passing).

Both turn-taking modes, with the fake product: ``client`` unpaced (the listener's clock is
advanced, the test takes a moment), ``server_vad`` paced (a live line: the limit is a few
seconds of real time). The figures asserted are lengths of audio, never how long anything took.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile

from voicelab.artifacts import read_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
#: far above what a trial of a few seconds needs (about 1 GB, mostly libraries mapped), far
#: below what a 100-minute turn took to make (3.7 GB resident)
ADDRESS_SPACE_BYTES = 2560 * 1024 ** 2
#: a hundred minutes of hesitation in one user turn
LONG_PAUSE_SECONDS = 6000.0
#: the listening line and the chunks: what the audio may exceed the limit by (one frame, and
#: the moment between the limit and the trial noticing it on a busy machine is not audio)
FRAME_SECONDS = 0.1

LONG_TALKER = f'''
from dataclasses import replace

from voicelab.personas import UserTurn
from voicelab.personas._scripted import ScriptedPersona


class LongTalker(ScriptedPersona):
    """The scripted persona, but its first turn pauses for {LONG_PAUSE_SECONDS:g} s mid-sentence
    (no script validation stands between a persona of one's own and the runner)."""

    async def reply(self, response):
        turn = await super().reply(response)
        if isinstance(turn, UserTurn) and turn.source == "script":
            return replace(turn, text="Please record the plan and save the reminder.",
                           pieces=("Please record the plan", "and save the reminder."),
                           pauses_seconds=({LONG_PAUSE_SECONDS},))
        return turn
'''

DRIVER = """
import json, resource, sys
limit = int(sys.argv[4])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import voicelab
outcome = voicelab.run(sys.argv[1], voicelab.RunOptions(
    trials=1, workers=1, artifacts_dir=sys.argv[2], overrides=json.loads(sys.argv[3])))
print(outcome.bundle_path)
"""


def _run_file(folder: Path) -> Path:
    """The seed example beside the long-talking persona module (resolved by dotted path)."""
    (folder / "long_talker.py").write_text(LONG_TALKER, encoding="utf-8")
    text = EXAMPLE.read_text(encoding="utf-8")
    for name in ("scenario", "persona", "data", "script"):
        text = text.replace(f"{name}-workload-neutral-voice.yaml",
                            str(EXAMPLE.parent / f"{name}-workload-neutral-voice.yaml"))
    path = folder / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run_capped(folder: Path, *overrides: str) -> Path:
    """One trial in a subprocess of capped address space; its trial folder."""
    completed = subprocess.run(
        [sys.executable, "-c", DRIVER, str(_run_file(folder)), str(folder / "runs"),
         json.dumps(list(overrides)), str(ADDRESS_SPACE_BYTES)],
        capture_output=True, text=True, timeout=300, cwd=folder)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "MemoryError" not in completed.stderr, completed.stderr[-3000:]
    return Path(completed.stdout.strip().splitlines()[-1]) / "trial-001"


def seconds_of(wav: Path) -> float:
    info = soundfile.info(str(wav))
    return info.frames / info.samplerate


CLIENT = ["scenario.eval_spec.limits.max_time_seconds=20"]
#: the fake product in listening turn taking; a live line runs in real time
LISTENING = ["pace_audio=true", "endpoint.settings.turn_detection=server_vad",
             "scenario.eval_spec.limits.max_time_seconds=4",
             "measurement={max_loop_lag_p99_ms: 1000, max_loop_lag_max_ms: 1000,"
             " max_first_audio_error_ms: 1000}"]
LONG_REPLY = "record the plan and save the reminder now " * 7  # ~18 s of tone speech


@pytest.mark.parametrize(("mode", "limit_seconds"), [(CLIENT, 20.0), (LISTENING, 6.0)],
                         ids=["client", "server_vad"])
def test_a_hundred_minute_user_turn_is_cut_at_the_time_limit(
        tmp_path: Path, mode: list[str], limit_seconds: float) -> None:
    limit = f"scenario.eval_spec.limits.max_time_seconds={limit_seconds:g}"
    trial = run_capped(tmp_path, "persona_mode=long_talker.LongTalker", *mode, limit,
                       "endpoint.settings.opening_text=Hello, your daily plan please?")
    report = read_json(trial / "trial-report.json")
    assert report["exit_reason"] == "max_time", report["failures"]
    assert report["user_turns"] == 1
    # the turn's audio went out up to the limit, none of it beyond
    sent = seconds_of(trial / "user-sent.wav")
    assert sent <= limit_seconds + FRAME_SECONDS
    clean = [e for e in map(json.loads, (trial / "voice-events.jsonl").read_text().splitlines())
             if e["event_type"] == "speech.synthesized"]
    assert len(clean) == 1 and clean[0]["attributes"]["duration_ms"] <= limit_seconds * 1000


@pytest.mark.parametrize(("mode", "limit_seconds"), [(CLIENT, 10.0), (LISTENING, 4.0)],
                         ids=["client", "server_vad"])
def test_a_product_reply_past_the_time_limit_is_cut_and_ends_the_trial_with_max_time(
        tmp_path: Path, mode: list[str], limit_seconds: float) -> None:
    limit = f"scenario.eval_spec.limits.max_time_seconds={limit_seconds:g}"
    trial = run_capped(tmp_path, *mode, limit, f"endpoint.settings.opening_text={LONG_REPLY}")
    report = read_json(trial / "trial-report.json")
    assert report["exit_reason"] == "max_time"
    assert report["failures"] == []  # a long reply is no flood: the call simply ran out of time
    received = seconds_of(trial / "product-received.wav")
    assert 0 < received <= limit_seconds
    events = (trial / "voice-events.jsonl").read_text()
    assert '"event_type":"product.audio_flood"' not in events


def test_the_cap_leaves_room_for_an_ordinary_trial(tmp_path: Path) -> None:
    """The address-space cap is not what passes the tests above: a trial fits in it."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    assert soft == resource.RLIM_INFINITY or soft > ADDRESS_SPACE_BYTES
    trial = run_capped(tmp_path, *CLIENT)
    assert read_json(trial / "trial-report.json")["exit_reason"] == "endpoint_completion"
