"""bench_runner's accuracy sections: voicelab's timings against the product's own send times.

The fake product runs in its own process and reports, for every response, when it sent the
first audio frame, its first and last speech sample, on the shared system monotonic clock; the
error of a measured figure is it minus that truth (what voicelab's receive path adds). The
first-audio case is the client mode's; the listening case is server_vad's, with a barge-in in
the first response (response latency, barge-in stop latency, and the stall of a product that
never stalls). Other benchmarks (``bench_store.py``, ``bench_scale.py``, ``bench_verdicts.py``,
``bench_load.py``, ``bench_saturation.py``) use the same double and the same truth.

This module is where the benchmarks' voicelab is imported first, so it chooses the checkout
measured (``VOICELAB_CODE``, see bench_runner.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

#: the checkout measured: this one, or ``VOICELAB_CODE`` (another checkout or worktree, to
#: compare two versions of voicelab with one benchmark)
ROOT = Path(os.environ.get("VOICELAB_CODE") or Path(__file__).resolve().parents[1]).resolve()
sys.path.insert(0, str(ROOT))

import voicelab  # noqa: E402

EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


# --- accuracy -------------------------------------------------------------------------------

def _start_fake_server(settings: dict) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab.doubles.product", "--settings",
         json.dumps(settings)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = process.stdout.readline()
    return process, json.loads(line)["uri"]


def _truth_errors(bundle: Path) -> list[float]:
    return [error for trial in sorted(bundle.glob("trial-*"))
            for error in _trial_truth_errors(trial)]


def _trial_truth_errors(trial: Path) -> list[float]:
    """First-audio latency minus the fake's own send time, per response of one trial (ms)."""
    errors = []
    events = [json.loads(x) for x in (trial / "voice-events.jsonl").read_text().splitlines()]
    start_ns = next(e for e in events if e["event_type"] == "trial.started")[
        "attributes"]["clock_start_ns"]
    references = {e["attributes"]["expects_response"]: e["monotonic_offset_ns"]
                  for e in events if e["attributes"].get("expects_response")}
    raw = json.loads((trial / "raw-endpoint-events.json").read_text())["events"]
    done = [e for e in raw if e["type"] == "turn_complete"]
    metrics = json.loads((trial / "voice-metrics.json").read_text())["turns"]
    for turn, response_done in zip(metrics, done, strict=False):
        timing = response_done["raw"].get("server_timing") or {}
        sent = timing.get("first_audio_ns")
        reference = references.get(turn["turn_id"])
        if sent is None or reference is None or turn["first_audio_latency_ms"] is None:
            continue
        truth_ms = (sent - (start_ns + reference)) / 1e6
        errors.append(turn["first_audio_latency_ms"] - truth_ms)
    return errors


async def accuracy(trials: int, workdir: Path, scoring: str = "process") -> dict:
    latencies = [120.0, 180.0, 240.0, 300.0, 360.0, 420.0]
    process, uri = _start_fake_server({"audio_pacing": "realtime",
                                       "reply_latency_ms": latencies,
                                       "complete_after_turns": 1})
    try:
        loaded = voicelab.load_run(EXAMPLE, overrides=[
            "endpoint.adapter=websocket", f"endpoint.settings={{uri: '{uri}'}}",
            "pace_audio=true", "outcome_probe=null",
            # a separate process: no built-in probe to read its database, so no outcome gate
            "scenario.eval_spec.outcome_spec={}"])
        started = time.perf_counter()
        outcome = await voicelab.arun(loaded, voicelab.RunOptions(
            trials=trials,
            concurrency=trials,
            artifacts_dir=workdir,
            scoring=scoring))
        wall = time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(10)
    errors = np.abs(np.asarray(_truth_errors(outcome.bundle_path)))
    return {"trials": trials, "passed": outcome.report.passed_trials, "errors": errors,
            "wall_seconds": wall}


# --- listening turn taking (server_vad) accuracy ----------------------------------------------

#: A stop latency off by its stated bound and this much more is vouched for wrongly (the
#: listener and the truth may end the product's speech one 2 ms frame apart).
BOUND_SLACK_MS = 2.0

LISTENING_SCRIPT = ('script.turns=[{"response": "Wait, one thing first.", "keywords": ["plan"], '
                    '"interrupt_after_seconds": 0.8}, {"response": "Please record the plan and '
                    'save the reminder.", "keywords": ["else", "plan", "one"]}]')


def _listening_truth(bundle: Path) -> dict[str, list[float]]:
    """Measured minus true, per response: response latency (the product's first speech sample
    sent, from the user's speech end sent on the line) and barge-in stop latency (from the onset
    of the barge-in speech to the end of the product's speech as a listener fed at the product's
    frame send times hears it: ``stop_latency``; to its last speech sample's send:
    ``stop_latency_sent``, which leaves out how far the product's own pacing gaps had already
    put its speech behind, and so reads a product that paused as a receive error); and the
    measured stall of a product that never stalls. Both sides' send times are on the shared
    monotonic clock. ``stop_latency_unflagged``: the stop latencies of responses not flagged
    ``timing_degraded``; ``stop_latency_beyond_bound``: those later than the truth by more than
    their own stated error bound (``figure_error_bounds_ms``) and :data:`BOUND_SLACK_MS`: the
    figures voicelab vouched for wrongly. (Earlier than the truth is the fake stamping its send
    late, after a busy loop held it past the write, as bench_load's first-audio column says.)"""
    from _send_time_truth import _true_metrics  # type: ignore[import-not-found]

    errors: dict[str, list[float]] = {"response_latency": [], "stop_latency": [],
                                      "stop_latency_unflagged": [],
                                      "stop_latency_beyond_bound": [],
                                      "stop_latency_sent": [], "stall": []}
    for trial in sorted(bundle.glob("trial-*")):
        heard = _true_metrics(trial, ("interruption_stop_latency_ms",))
        events = [json.loads(x) for x in (trial / "voice-events.jsonl").read_text().splitlines()]
        start_ns = events[0]["attributes"]["clock_start_ns"]
        turn_of = {e["sequence"]: e["turn_id"] for e in events}
        ended = {e["turn_id"]: start_ns + e["monotonic_offset_ns"] for e in events
                 if e["event_type"] == "user.speech_ended"}
        started = {e["turn_id"]: start_ns + e["monotonic_offset_ns"] for e in events
                   if e["event_type"] == "user.speech_started"}
        barge_turn = {e["attributes"]["response_turn_id"]: e["turn_id"] for e in events
                      if e["event_type"] == "user.barge_in"}
        raw = json.loads((trial / "raw-endpoint-events.json").read_text())["events"]
        # a cancelled response.done is kept once, as the interruption it also stands for
        timings = {turn_of[e["sequence"]]: e["raw"].get("server_timing") or {}
                   for e in raw if e["type"] in ("turn_complete", "interruption")}
        for turn in json.loads((trial / "voice-metrics.json").read_text())["turns"]:
            timing = timings.get(turn["turn_id"], {})
            if turn["response_latency_ms"] is not None and timing.get("speech_start_ns") \
                    and turn["turn_id"] in ended:
                truth = (timing["speech_start_ns"] - ended[turn["turn_id"]]) / 1e6
                errors["response_latency"].append(turn["response_latency_ms"] - truth)
            barger = barge_turn.get(turn["turn_id"])
            if turn["interrupted"] and barger in started and timing.get("speech_end_ns"):
                truth = max(0.0, (timing["speech_end_ns"] - started[barger]) / 1e6)
                errors["stop_latency_sent"].append(turn["interruption_stop_latency_ms"] - truth)
            heard_stop = heard.get(turn["turn_id"], {}).get("interruption_stop_latency_ms")
            if turn["interrupted"] and heard_stop is not None \
                    and turn["interruption_stop_latency_ms"] is not None:
                error = turn["interruption_stop_latency_ms"] - heard_stop
                errors["stop_latency"].append(error)
                bound = (turn.get("figure_error_bounds_ms") or {}).get(
                    "interruption_stop_latency_ms")
                if not turn.get("timing_degraded"):
                    errors["stop_latency_unflagged"].append(error)
                if bound is not None and error > bound + BOUND_SLACK_MS:
                    errors["stop_latency_beyond_bound"].append(error)
            if turn["playback_stall_ms"] is not None:
                errors["stall"].append(turn["playback_stall_ms"])
    return errors


async def listening_accuracy(trials: int, workdir: Path, scoring: str = "process") -> dict:
    process, uri = _start_fake_server({"turn_detection": "server_vad",
                                       "complete_after_turns": 2, "report_frame_times": True})
    try:
        loaded = voicelab.load_run(EXAMPLE, overrides=[
            "endpoint.adapter=websocket",
            f"endpoint.settings={{uri: '{uri}', turn_detection: server_vad}}",
            "pace_audio=true", "outcome_probe=null", "scenario.eval_spec.outcome_spec={}",
            LISTENING_SCRIPT])
        started = time.perf_counter()
        outcome = await voicelab.arun(loaded, voicelab.RunOptions(
            trials=trials,
            concurrency=trials,
            artifacts_dir=workdir,
            scoring=scoring))
        wall = time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(10)
    return {"trials": trials, "passed": outcome.report.passed_trials, "wall_seconds": wall,
            **_listening_truth(outcome.bundle_path)}
