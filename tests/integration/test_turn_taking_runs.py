"""A run configured with ``turn_taking`` (voicelab's one name) listens like one configured with
the older ``turn_detection``, and its bundle records the one name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import voicelab

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
#: the product's timings are judged here, not the test machine's load
TRUSTED_TIMINGS = ("measurement={max_loop_lag_p99_ms: 1000, max_loop_lag_max_ms: 1000,"
                   " max_first_audio_error_ms: 1000}")
SHORT = ["endpoint.settings.opening_text=Hello, your daily plan please?",
         "endpoint.settings.reply_text=Your daily plan is recorded and the reminder saved."]


def test_the_fake_listens_when_told_with_the_one_name(tmp_path):
    overrides = ["pace_audio=true", "endpoint.settings.turn_taking=server_vad", TRUSTED_TIMINGS,
                 *SHORT]
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(trials=1, artifacts_dir=tmp_path,
                                                        overrides=overrides))
    report = outcome.trials[0].report
    assert outcome.exit_code == 0, report.failures
    recorded = json.loads((outcome.bundle_path / "trial-001" / "resolved-settings.json")
                          .read_text())["resolved"]["endpoint"]["settings"]
    assert recorded["turn_taking"] == "server_vad" and "turn_detection" not in recorded
    events = (outcome.bundle_path / "trial-001" / "voice-events.jsonl").read_text()
    assert '"turn_taking":"server_vad"' in events.replace(" ", "")


def _validate(*overrides: str) -> subprocess.CompletedProcess:
    sets = [part for override in ["pace_audio=true", *overrides] for part in ("--set", override)]
    return subprocess.run([sys.executable, "-m", "voicelab", "validate", str(EXAMPLE), *sets],
                          capture_output=True, text=True, timeout=120)


def test_validate_warns_about_the_older_spelling_naming_file_and_key():
    old = _validate("endpoint.settings.turn_detection=server_vad")
    assert old.returncode == 0, old.stderr
    assert "turn taking: server_vad" in old.stdout
    assert ("run-workload-neutral-voice.yaml: endpoint.settings.turn_detection: the older "
            "spelling of turn_taking") in old.stdout
    new = _validate("endpoint.settings.turn_taking=server_vad")
    assert new.returncode == 0, new.stderr
    assert "turn taking: server_vad" in new.stdout and "turn_detection" not in new.stdout


def test_both_spellings_that_differ_exit_2_with_one_line():
    both = _validate("endpoint.settings.turn_taking=client",
                     "endpoint.settings.turn_detection=server_vad")
    assert both.returncode == 2
    [line] = both.stderr.strip().splitlines()
    assert "run-workload-neutral-voice.yaml" in line and "endpoint.settings:" in line
    assert "both given and differ" in line
