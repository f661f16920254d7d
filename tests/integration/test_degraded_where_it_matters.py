"""The loop lag judged where it matters, against the product's own send times.

The fake product runs in its own process, replies in real time and reports when it sent every
audio frame (the shared monotonic clock). An adapter loaded by dotted path (a user's own adapter
would be) blocks the evaluator's event loop once, with a synchronous sleep, starting shortly
after the user's commit: once while the product is still thinking (its reply comes after the
block: nothing timing-relevant arrives meanwhile), once while its first audio arrives (the
reply is due in the middle of the block). The block (400 ms) is large against the tolerances
used here (100 ms), so a busy test machine's own lag decides nothing; no figure is asserted
against the wall clock, only against the product's send times.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import read_json, read_voice_events

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
BLOCK_SECONDS = 0.4
#: the block starts this long after the user's (only) commit
BLOCK_AFTER_SECONDS = 0.05
#: generous tolerances: only the block (400 ms) may exceed them
TOLERANCE_MS = 100.0

BLOCKING_ADAPTER = f'''
import asyncio
import time

from voicelab.endpoints._websocket import WebSocketEndpoint


class BlockingWebSocket(WebSocketEndpoint):
    """The websocket adapter, but after its first commit the event loop is blocked once (a
    synchronous call somewhere in the evaluator's process)."""

    async def commit_turn(self):
        await super().commit_turn()
        if self._commits == 1:
            asyncio.get_running_loop().call_later({BLOCK_AFTER_SECONDS}, time.sleep,
                                                  {BLOCK_SECONDS})
'''


def _run_file(folder: Path) -> Path:
    (folder / "blocking_adapter.py").write_text(BLOCKING_ADAPTER, encoding="utf-8")
    text = EXAMPLE.read_text(encoding="utf-8")
    for name in ("scenario", "persona", "data", "script"):
        text = text.replace(f"{name}-workload-neutral-voice.yaml",
                            str(EXAMPLE.parent / f"{name}-workload-neutral-voice.yaml"))
    text = text.replace("artifacts_dir: ../artifacts/workload-neutral-voice",
                        f"artifacts_dir: {folder / 'artifacts'}")
    path = folder / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _run(folder: Path, *, reply_latency_ms: float) -> Path:
    """One paced trial against a real-time fake product; its trial folder."""
    product = subprocess.Popen(
        [sys.executable, "-m", "voicelab.doubles.product", "--settings", json.dumps({
            "audio_pacing": "realtime", "reply_latency_ms": reply_latency_ms,
            "report_frame_times": True, "complete_after_turns": 2})],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        uri = json.loads(product.stdout.readline())["uri"]  # type: ignore[union-attr]
        outcome = voicelab.run(_run_file(folder), trials=1, overrides=[
            "endpoint.adapter=blocking_adapter.BlockingWebSocket",
            f"endpoint.settings={{uri: '{uri}'}}", "pace_audio=true", "outcome_probe=null",
            "scenario.eval_spec.outcome_spec={}", "scenario.expected_topics=[]",
            "scenario.eval_spec.max_first_audio_latency_ms=60000",
            f"measurement.max_loop_lag_p99_ms={TOLERANCE_MS}",
            f"measurement.max_loop_lag_max_ms={TOLERANCE_MS}"])
    finally:
        product.terminate()
        product.wait(10)
    assert outcome.report.executed_trials == 1
    return outcome.bundle_path / "trial-001"


def _first_audio_errors_ms(trial: Path) -> dict[str, float]:
    """Per response: its first chunk's arrival stamp minus the product's send of that frame."""
    records = read_voice_events(trial / "voice-events.jsonl")
    start_ns = records[0]["attributes"]["clock_start_ns"]
    turn_of = {r["sequence"]: r["turn_id"] for r in records}
    sent = {}
    for event in read_json(trial / "raw-endpoint-events.json")["events"]:
        if event["type"] == "turn_complete":
            frames = (event["raw"].get("server_timing") or {}).get("frame_sent_ns") or []
            if frames:
                sent[turn_of[event["sequence"]]] = frames[0] - start_ns
    arrived: dict[str, int] = {}
    for record in records:
        if record["event_type"] == "product.audio_chunk":
            arrived.setdefault(record["turn_id"], record["monotonic_offset_ns"])
    return {turn: (arrived[turn] - sent[turn]) / 1e6 for turn in sent}


@pytest.fixture(scope="module")
def quiet_block(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the reply comes 1 s after the commit: the block (50-450 ms) is over well before
    return _run(tmp_path_factory.mktemp("quiet"), reply_latency_ms=1000.0)


@pytest.fixture(scope="module")
def first_audio_block(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the reply is sent 200 ms after the commit: in the middle of the block
    return _run(tmp_path_factory.mktemp("first-audio"), reply_latency_ms=200.0)


def test_a_block_while_the_product_is_silent_leaves_the_trial_trusted(quiet_block):
    metrics = read_json(quiet_block / "voice-metrics.json")
    quality = metrics["measurement_quality"]
    # the loop did block (the whole-conversation statistics say so) ...
    assert quality["loop_lag_ms"]["max"] >= (BLOCK_SECONDS * 1000
                                             - quality["loop_lag_ms"]["interval_ms"])
    # ... but nothing timing-relevant arrived meanwhile
    assert quality["scope"] == "turn"
    assert quality["degraded"] is False, quality["reasons"]
    assert quality["degraded_turns"] == []
    turns = metrics["turns"]
    assert len(turns) == 2
    assert all(t["timing_degraded"] is False for t in turns)
    assert all(t["stamp_error_bound_ms"] <= TOLERANCE_MS for t in turns)
    # and the figures are right: the first audio within the tolerance of its send, no stall
    # (the product never stalls)
    errors = _first_audio_errors_ms(quiet_block)
    assert len(errors) == 2 and all(abs(e) <= TOLERANCE_MS for e in errors.values()), errors
    assert all(t["playback_stall_ms"] <= TOLERANCE_MS for t in turns)
    report = read_json(quiet_block / "trial-report.json")
    assert report["measurement_degraded"] is False
    verdicts = {v["name"]: v for v in report["verdicts"]}
    assert verdicts["first_audio_latency"]["status"] == "passed"


def test_a_block_over_the_first_audio_flags_that_turn(first_audio_block):
    metrics = read_json(first_audio_block / "voice-metrics.json")
    quality = metrics["measurement_quality"]
    turns = {t["turn_id"]: t for t in metrics["turns"]}
    errors = _first_audio_errors_ms(first_audio_block)
    late = [turn for turn, error in errors.items() if error > TOLERANCE_MS]
    # the truth: the reply's first audio sat in the socket while the loop was blocked
    assert late == [metrics["turns"][1]["turn_id"]], errors
    assert quality["degraded"] is True
    assert quality["degraded_turns"] == late
    flagged = turns[late[0]]
    assert flagged["timing_degraded"] is True
    # the bound covers the error it hides
    assert flagged["stamp_error_bound_ms"] >= errors[late[0]]
    assert any(reason.startswith(f"{late[0]}: ") for reason in quality["reasons"])
    first = metrics["turns"][0]
    assert first["timing_degraded"] is False and errors[first["turn_id"]] <= TOLERANCE_MS
    report = read_json(first_audio_block / "trial-report.json")
    assert report["measurement_degraded"] is True
    latency = {v["name"]: v for v in report["verdicts"]}["first_audio_latency"]
    assert latency["status"] == "inconclusive" and late[0] in latency["why"]


def test_rescoring_judges_the_recorded_ticks_again_byte_for_byte(first_audio_block, tmp_path):
    bundle = first_audio_block.parent
    voicelab.rescore(bundle, output=tmp_path / "again")
    for name in ("voice-metrics.json", "voice-events.jsonl"):
        assert (tmp_path / "again" / "trial-001" / name).read_bytes() == \
            (first_audio_block / name).read_bytes()
    again = read_json(tmp_path / "again" / "trial-001" / "trial-report.json")
    assert again["verdicts"] == read_json(first_audio_block / "trial-report.json")["verdicts"]
