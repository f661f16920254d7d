"""A production call becomes a regression test: the caller's recorded turns, cut from an ingested
call (the shipped datasets/production-calls/call-01.flac), are played to the fake product over a
live line; the product hears the caller's own samples, the replay pairs with the call, and
compare holds the new build against the call's metrics."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from voicelab.artifacts import read_json
from voicelab.ingest import ingest
from voicelab.personas import read_recorded_trial

ROOT = Path(__file__).resolve().parents[2]
CALL = ROOT / "datasets" / "production-calls" / "call-01.flac"
LISTENING = ROOT / "examples" / "run-listening.yaml"
JUDGED_BY_NOTHING = ["--set", "scenario.eval_spec.outcome_spec={}",
                     "--set", "scenario.eval_spec.expected_exit=null",
                     "--set", "scenario.expected_topics=[]"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def call(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outcome = ingest([CALL], artifacts_dir=tmp_path_factory.mktemp("production"))
    assert outcome.exit_code == 0
    return outcome.bundle_path


def test_an_ingested_call_names_no_product_to_replay_to(call):
    result = _cli("replay", str(call))
    assert result.returncode == 2
    assert "recorded calls (voice-evaluator ingest) name no product" in result.stderr
    assert "--run-file" in result.stderr and "Traceback" not in result.stderr


def test_the_callers_turns_are_played_to_a_new_build_sample_for_sample(call, tmp_path):
    result = _cli("replay", str(call), "--run-file", str(LISTENING), "--artifacts-dir",
                  str(tmp_path / "replays"), "--quiet", *JUDGED_BY_NOTHING)
    assert result.returncode == 0, result.stdout + result.stderr
    replay = (tmp_path / "replays" / "latest").resolve()
    report = read_json(replay / "run-report.json")
    assert report["replay_of"]["bundle_path"] == str(call)
    assert report["trials"][0]["seed"] == 1  # the call's number: compare pairs them
    original = read_recorded_trial(call / "trial-001").turns
    replayed = read_recorded_trial(replay / "trial-001").turns
    assert [t.turn_id for t in replayed] == [t.turn_id for t in original]
    assert len(original) == 3 and original[0].barge_in_of == "turn-000"
    for before, after in zip(original, replayed, strict=True):
        sent, said = after.audio.samples, before.audio.samples
        # a barge-in is queued ahead on the line and padded with digital silence so its first
        # speech sample is said when due (docs/replay.md): under half a second of it
        lead = sent.shape[0] - said.shape[0]
        assert (0 <= lead < 12_000) if before.barge_in_of else lead == 0, (before.turn_id, lead)
        np.testing.assert_array_equal(sent[lead:], said)
        assert not sent[:lead].any()
    compared = _cli("compare", str(call), str(replay), "--no-default-gates",
                    "--max-increase", "response_latency_ms:p95=5000")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "1 pairs by (cell, seed)" in compared.stdout
    assert "response_latency_ms p95" in compared.stdout
