"""The truth the load benchmarks hold voicelab's figures to: the metrics of a listener fed at
the product's own frame send times.

The fake product logs when it sent every audio frame (``report_frame_times``) on the shared
monotonic clock; replacing each received chunk's stamp by its frame's send time and scoring the
recording again gives what a listener with an instantaneous network would have measured.
``bench_saturation.py``, ``bench_scale.py`` (and so ``bench_load.py``) and the listening line of
``_runner_accuracy.py`` share it; it imports none of them, so they import it without a circle.
"""

from __future__ import annotations

import json
from pathlib import Path

from voicelab.artifacts import read_voice_events
from voicelab.artifacts._reader import read_audio_stream
from voicelab.config import MeasurementConfig
from voicelab.recording import PRODUCT, USER, recording_from_records
from voicelab.runner._evidence import STREAM_FILES, assemble_now

#: the figures bench_saturation.py compares with the truth
METRICS = ("first_audio_latency_ms", "playback_stall_ms", "dead_air_ms")


def _true_metrics(trial: Path, metrics: tuple[str, ...] = METRICS
                  ) -> dict[str, dict[str, float | None]]:
    """Per response: the metrics of a listener fed at the product's send times (a response
    cut by a barge-in has its send times on the interruption that stands for its end)."""
    records = read_voice_events(trial / "voice-events.jsonl")
    start_ns = records[0]["attributes"]["clock_start_ns"]
    turn_of = {r["sequence"]: r["turn_id"] for r in records}
    raw = json.loads((trial / "raw-endpoint-events.json").read_text())["events"]
    sent: dict[str, list[int]] = {}
    for event in raw:
        if event["type"] in ("turn_complete", "interruption"):
            timing = event["raw"].get("server_timing") or {}
            sent[turn_of[event["sequence"]]] = list(timing.get("frame_sent_ns") or [])
    cursor: dict[str, int] = {}
    for record in records:
        if record["event_type"] != "product.audio_chunk":
            continue
        turn = record["turn_id"]
        index = cursor.get(turn, 0)
        cursor[turn] = index + 1
        frames = sent.get(turn, [])
        if index >= len(frames):
            raise SystemExit(f"{trial}: {turn} has more chunks than frames sent")
        offset = frames[index] - start_ns
        record["monotonic_offset_ns"] = offset
        record["listener_offset_ns"] = offset  # pace_audio: true, no virtual advances
    streams = {name: read_audio_stream(trial / STREAM_FILES[name]) for name in (USER, PRODUCT)}
    recording = recording_from_records(records, streams=streams)
    evidence = assemble_now(recording, adapter="websocket", speech_metrics=False,
                            measurement=MeasurementConfig())
    return {t.turn_id: {m: getattr(t, m) for m in metrics} for t in evidence.metrics.turns}
