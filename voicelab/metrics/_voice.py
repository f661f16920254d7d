"""voice-metrics.json: per-response timing and signal metrics and their summary.

Definitions (all pure functions of the recording):

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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .._steps import Steps, run_steps
from ..artifacts import MetricSummary, TurnMetrics, VoiceMetrics
from ..audio import CANONICAL_FORMAT, CANONICAL_SAMPLE_RATE_HZ, PcmAudio, analyze_signals
from ..recording import PRODUCT, USER, Event, EventType, Recording
from ._placement import STEP_EVENTS, Placement, silent_runs_ns

TIMING_METRICS = ("first_audio_latency_ms", "response_duration_ms", "playback_stall_ms",
                  "dead_air_ms", "interruption_stop_latency_ms", "audio_after_interrupt_ms")
PERCENTILES = (50, 90, 95, 99)
_RATE = CANONICAL_SAMPLE_RATE_HZ


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


def summarize(values: Sequence[float | None]) -> MetricSummary:
    """count, mean, p50, p90, p95, p99 and max of the non-missing values."""
    data = sorted(float(v) for v in values if v is not None and not math.isnan(v))
    if not data:
        return MetricSummary(count=0)
    return MetricSummary(count=len(data), mean=round(math.fsum(data) / len(data), 3),
                         **{f"p{p}": round(percentile(data, p), 3) for p in PERCENTILES},
                         max=round(data[-1], 3))


@dataclass
class _Response:
    """What the recording says about one product response (gathered in one pass)."""

    reference: tuple[int, str] | None = None
    first_audio_ns: int | None = None
    done: tuple[int, str] | None = None
    barge: int | None = None
    chunks: list[Event] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)
    tool_calls: int = 0


def _gather(recording: Recording) -> Steps[tuple[dict[str, _Response], dict[str, list[Event]],
                                                  dict[str, float | None]]]:
    responses: dict[str, _Response] = {}
    references: dict[str, tuple[int, str]] = {}
    user_chunks: dict[str, list[Event]] = {}
    snr: dict[str, float | None] = {}

    def response(turn: str) -> _Response:
        found = responses.get(turn)
        if found is None:
            found = responses[turn] = _Response(reference=references.get(turn))
        return found

    for position, event in enumerate(recording.events):
        if position % STEP_EVENTS == STEP_EVENTS - 1:
            yield
        kind, attributes, turn = event.type, event.attributes, event.turn_id
        expects = attributes.get("expects_response")
        if expects and kind in (EventType.USER_TURN_COMMITTED, EventType.CONNECTED):
            references.setdefault(expects, (event.offset_ns, "commit" if kind is
                                            EventType.USER_TURN_COMMITTED else "init"))
            if expects in responses and responses[expects].reference is None:
                responses[expects].reference = references[expects]
        if not turn:
            continue
        if kind is EventType.USER_AUDIO:
            user_chunks.setdefault(turn, []).append(event)
        elif kind is EventType.ENVIRONMENT_MIXED:
            snr[turn] = attributes.get("speech_to_noise_db")
        elif event.source != "product" and kind is not EventType.USER_BARGE_IN:
            continue
        elif kind is EventType.PRODUCT_AUDIO:
            found = response(turn)
            if found.first_audio_ns is None:
                found.first_audio_ns = event.offset_ns
            found.chunks.append(event)
        elif kind is EventType.PRODUCT_RESPONSE_DONE:
            found = response(turn)
            if found.done is None:
                found.done = (event.offset_ns, str(attributes.get("status", "completed")))
        elif kind is EventType.USER_BARGE_IN and attributes.get("response_turn_id"):
            target = response(str(attributes["response_turn_id"]))
            if target.barge is None:
                target.barge = event.offset_ns
        elif kind is EventType.PRODUCT_TRANSCRIPT:
            response(turn).transcript.append(str(attributes.get("text", "")))
        elif kind is EventType.PRODUCT_TOOL_CALL:
            response(turn).tool_calls += 1
        elif event.source == "product":
            response(turn)
    return responses, user_chunks, snr


def _joined(stream: np.ndarray, events: list[Event]) -> PcmAudio:
    if not events:
        return PcmAudio(np.zeros(0, dtype=np.int16))
    return PcmAudio(np.concatenate([stream[e.audio_start:e.audio_end] for e in events]))


def compute_voice_metrics(recording: Recording, placement: Placement) -> VoiceMetrics:
    """The voice-metrics.json document of one trial."""
    return run_steps(compute_voice_metrics_steps(recording, placement))


def compute_voice_metrics_steps(recording: Recording, placement: Placement
                                ) -> Steps[VoiceMetrics]:
    """:func:`compute_voice_metrics` in steps (see :mod:`voicelab._steps`)."""
    responses, user_chunks, snr = yield from _gather(recording)
    user_stream = recording.streams[USER].samples()
    product_stream = recording.streams[PRODUCT].samples()

    # each turn's signal analysis, and each whole channel's (the turns one after another)
    user_ids = sorted(user_chunks)
    each, all_input = analyze_signals([_joined(user_stream, user_chunks[k]) for k in user_ids])
    inputs = dict(zip(user_ids, each, strict=True))
    yield
    order = list(responses)
    with_audio = [k for k in order if responses[k].chunks]
    each, all_output = analyze_signals([_joined(product_stream, responses[k].chunks)
                                        for k in with_audio])
    outputs = dict(zip(with_audio, each, strict=True))
    yield

    product_samples = placement.product.samples
    turns: list[TurnMetrics] = []
    for index, turn_id in enumerate(order):
        found = responses[turn_id]
        reference, first, done = found.reference, found.first_audio_ns, found.done
        playback = placement.responses.get(turn_id)
        heard_from = playback.start_ns if playback else None
        heard_until = playback.end_ns if playback else None
        dead_air = None
        if heard_from is not None and heard_until is not None:
            yield
            dead_air = _ms(silent_runs_ns(product_samples, start_ns=heard_from,
                                          end_ns=heard_until))
        stop_latency = audio_after = None
        if found.barge is not None:
            after = [e for e in found.chunks if e.offset_ns > found.barge]
            stop_latency = _ms(max(e.offset_ns for e in after) - found.barge) if after else 0.0
            audio_after = round(sum(e.audio_samples for e in after) * 1000 / _RATE, 3)
        turns.append(TurnMetrics(
            turn_id=turn_id, index=index, status=done[1] if done else "incomplete",
            reference=reference[1] if reference else None,  # type: ignore[arg-type]
            first_audio_latency_ms=_ms(first - reference[0])
            if first is not None and reference else None,
            response_duration_ms=_ms(done[0] - reference[0]) if done and reference else None,
            output_audio_seconds=round(sum(e.audio_samples for e in found.chunks) / _RATE, 6),
            playback_start_ms=_ms(heard_from), playback_end_ms=_ms(heard_until),
            playback_stall_ms=_ms(playback.stall_ns) if playback and playback.chunks else None,
            dead_air_ms=dead_air, interrupted=found.barge is not None,
            interruption_stop_latency_ms=stop_latency, audio_after_interrupt_ms=audio_after,
            transcript=" ".join(found.transcript).strip(), tool_calls=found.tool_calls,
            input_speech_to_noise_db=snr.get(turn_id),
            input=inputs.get(turn_id), output=outputs.get(turn_id)))

    return VoiceMetrics(
        audio_format=CANONICAL_FORMAT.to_dict(), input=all_input, output=all_output, turns=turns,
        summary={name: summarize([getattr(t, name) for t in turns]) for name in TIMING_METRICS})
