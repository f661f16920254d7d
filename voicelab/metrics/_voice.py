"""voice-metrics.json: per-response timing and signal metrics and their summary.

Definitions (all pure functions of the recorded events and audio):

* ``first_audio_latency_ms``: the commit sent (or, for an opening, the init sent at connect) to
  the first product audio received — real monotonic time.
* ``response_duration_ms``: the same reference to the product's ``response.done``.
* ``output_audio_seconds``: product audio received for the response.
* ``playback_stall_ms``: gaps on the listener timeline where the next chunk arrived after the
  previous one had finished playing.
* ``dead_air_ms``: silent stretches of at least 300 ms a listener hears inside the response
  (between its first and last audible sample): stalls plus silent audio.
* ``interrupted``: the simulated user barged in on this response.
* ``interruption_stop_latency_ms``: cancel sent to the last product audio received for the
  response (0 when nothing arrived after the cancel).
* ``audio_after_interrupt_ms``: product audio of the response received after the cancel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .._steps import Steps, run_steps
from ..artifacts import SCHEMA_VERSION
from ..audio import CANONICAL_FORMAT, PcmAudio, analyze_signals
from ._placement import (
    BARGE_IN,
    PRODUCT_CHUNK,
    STEP_RECORDS,
    Placement,
    silent_runs_ns,
)

TIMING_METRICS = ("first_audio_latency_ms", "response_duration_ms", "playback_stall_ms",
                  "dead_air_ms", "interruption_stop_latency_ms", "audio_after_interrupt_ms")
PERCENTILES = (50, 90, 95, 99)


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of sorted values, interpolated exactly as ``numpy.percentile``
    (method "linear") does, without its per-call overhead."""
    count = len(ordered)
    index = (count - 1) * (q / 100)
    if index >= count - 1:
        return ordered[-1]
    lower = math.floor(index)
    weight = index - lower
    a, b = ordered[lower], ordered[lower + 1]
    if weight >= 0.5:
        return b - (b - a) * (1 - weight)
    return a + (b - a) * weight


def summarize(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """count, mean, p50, p90, p95, p99 and max of the non-missing values."""
    data = sorted(float(v) for v in values if v is not None and not math.isnan(v))
    if not data:
        return {"count": 0, "mean": None, **{f"p{p}": None for p in PERCENTILES}, "max": None}
    return {"count": len(data), "mean": round(math.fsum(data) / len(data), 3),
            **{f"p{p}": round(percentile(data, p), 3) for p in PERCENTILES},
            "max": round(data[-1], 3)}


def _response_order(records: Sequence[Mapping[str, Any]]) -> list[str]:
    order: list[str] = []
    for record in records:
        if record["source"] == "product" and record.get("turn_id") \
                and record["turn_id"] not in order:
            order.append(record["turn_id"])
    return order


def compute_voice_metrics(records: Sequence[Mapping[str, Any]], *, placement: Placement,
                          user_turn_audio: Mapping[str, PcmAudio],
                          response_audio: Mapping[str, PcmAudio]) -> dict[str, Any]:
    """The voice-metrics.json document for one trial."""
    return run_steps(compute_voice_metrics_steps(records, placement=placement,
                                                 user_turn_audio=user_turn_audio,
                                                 response_audio=response_audio))


def compute_voice_metrics_steps(records: Sequence[Mapping[str, Any]], *, placement: Placement,
                                user_turn_audio: Mapping[str, PcmAudio],
                                response_audio: Mapping[str, PcmAudio]
                                ) -> Steps[dict[str, Any]]:
    """:func:`compute_voice_metrics` in steps (see :mod:`voicelab._steps`)."""
    references: dict[str, tuple[int, str]] = {}
    first_audio: dict[str, int] = {}
    done: dict[str, tuple[int, str]] = {}
    barge: dict[str, tuple[int, bool]] = {}
    chunks: dict[str, list[tuple[int, int]]] = {}
    transcripts: dict[str, str] = {}
    tools: dict[str, int] = {}
    snr: dict[str, float | None] = {}
    for position, record in enumerate(records):
        if position % STEP_RECORDS == STEP_RECORDS - 1:
            yield
        kind, attrs, turn = record["event_type"], record["attributes"], record.get("turn_id")
        offset = record["monotonic_offset_ns"]
        expects = attrs.get("expects_response")
        if expects and kind in ("user.turn_committed", "session.connected"):
            references.setdefault(expects, (offset, "commit" if kind.startswith("user") else "init"))
        if not turn:
            continue
        if kind == PRODUCT_CHUNK:
            first_audio.setdefault(turn, offset)
            chunks.setdefault(turn, []).append((offset, int(record["pcm"]["byte_count"])))
        elif kind == "product.response_done":
            done.setdefault(turn, (offset, str(attrs.get("status", "completed"))))
        elif kind == BARGE_IN and attrs.get("response_turn_id"):
            barge.setdefault(attrs["response_turn_id"], (offset, bool(attrs.get("cancel_sent"))))
        elif kind == "product.transcript":
            transcripts[turn] = (transcripts.get(turn, "") + " " + str(attrs.get("text", ""))).strip()
        elif kind == "product.tool_call":
            tools[turn] = tools.get(turn, 0) + 1
        elif kind == "environment.mixed":
            snr[turn] = attrs.get("speech_to_noise_db")

    # each turn's signal analysis, and each whole channel's (the turns one after another)
    order = _response_order(records)
    user_ids = sorted(user_turn_audio)
    yield
    each, all_input = analyze_signals([user_turn_audio[k] for k in user_ids])
    inputs = {k: analysis.to_dict() for k, analysis in zip(user_ids, each, strict=True)}
    yield
    response_ids = [k for k in order if k in response_audio]
    each, all_output = analyze_signals([response_audio[k] for k in response_ids])
    outputs = {k: analysis.to_dict() for k, analysis in zip(response_ids, each, strict=True)}
    yield

    product_samples = placement.product.samples
    turns: list[dict[str, Any]] = []
    for index, turn_id in enumerate(order):
        reference = references.get(turn_id)
        first = first_audio.get(turn_id)
        completed = done.get(turn_id)
        received = chunks.get(turn_id, [])
        playback = placement.responses.get(turn_id)
        heard_from = playback.start_ns if playback else None
        heard_until = playback.end_ns if playback else None
        entry: dict[str, Any] = {
            "turn_id": turn_id,
            "index": index,
            "status": completed[1] if completed else "incomplete",
            "reference": reference[1] if reference else None,
            "first_audio_latency_ms": _ms(first - reference[0]) if first is not None and reference
            else None,
            "response_duration_ms": _ms(completed[0] - reference[0]) if completed and reference
            else None,
            "output_audio_seconds": round(sum(b for _, b in received) / 2 / 24_000, 6),
            "playback_start_ms": _ms(heard_from),
            "playback_end_ms": _ms(heard_until),
            "playback_stall_ms": _ms(playback.stall_ns) if playback and playback.chunks else None,
            "dead_air_ms": None,
            "interrupted": turn_id in barge,
            "interruption_stop_latency_ms": None,
            "audio_after_interrupt_ms": None,
            "transcript": transcripts.get(turn_id, ""),
            "tool_calls": tools.get(turn_id, 0),
            "input_speech_to_noise_db": snr.get(turn_id),
        }
        if heard_from is not None and heard_until is not None:
            yield
            entry["dead_air_ms"] = _ms(silent_runs_ns(product_samples, start_ns=heard_from,
                                                      end_ns=heard_until))
        if turn_id in barge:
            cancel_at, _ = barge[turn_id]
            after = [(at, size) for at, size in received if at > cancel_at]
            entry["interruption_stop_latency_ms"] = _ms(max(at for at, _ in after) - cancel_at) \
                if after else 0.0
            entry["audio_after_interrupt_ms"] = round(sum(s for _, s in after) / 2 / 24.0, 3)
        entry["input"] = inputs.get(turn_id)
        entry["output"] = outputs.get(turn_id)
        turns.append(entry)

    return {
        "schema_version": SCHEMA_VERSION,
        "audio_format": CANONICAL_FORMAT.to_dict(),
        "input": all_input.to_dict(),
        "output": all_output.to_dict(),
        "turns": turns,
        "summary": {name: summarize([t[name] for t in turns]) for name in TIMING_METRICS},
    }
