"""The loop lag judged where it matters: each response's timing stamps get an error bound from
the late ticks around them, and only a response whose stamps may be late beyond the tolerances
is ``timing_degraded`` (synthetic recordings on a fixed clock; no wall-clock timing)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from voicelab.artifacts import LoopLag, TurnMetrics
from voicelab.config import MeasurementConfig, PersonaConfig, ScenarioConfig
from voicelab.metrics import (
    LATE_TICKS_ATTRIBUTE,
    late_ticks_of,
    late_ticks_record,
    measurement_quality,
    stamp_error_bounds,
    timed_arrivals,
)
from voicelab.metrics._measurement import KERNEL_STREAM_STAMPS, LOOP_STAMPED_ATTRIBUTE
from voicelab.recording import PRODUCT as PRODUCT_STREAM
from voicelab.recording import (
    USER,
    Connected,
    EventType,
    ProductClosed,
    Recording,
    ResponseDone,
    TrialEnded,
    encode_voice_events,
)
from voicelab.recording._jsonl import recording_from_records
from voicelab.runner._loop_lag import LoopLagMonitor
from voicelab.scoring._verdicts import deterministic_verdicts

MS = 1_000_000
CHUNK = bytes(480 * 2)  # 20 ms of silence, canonical format
#: a whole-trial lag that the old judgement calls degraded (p99 and max beyond 20 / 25 ms)
SPIKY = LoopLag(p50=0.4, p99=150.0, max=150.0, ticks=600, interval_ms=10.0)


def _recording(responses: dict[str, list[int]], late: list[tuple[int, int]] | None, *,
               lag: LoopLag = SPIKY, done_at: dict[str, int] | None = None,
               arrival_stamps: str | None = None) -> Recording:
    """Product audio of each response at the given ms offsets, then ``trial.ended`` with its
    loop lag and (unless ``None``) the late ticks as (wake ms, lateness ms)."""
    recording = Recording(session_id="s", trace_id=uuid.UUID(int=1).hex,
                          root_span_id=uuid.UUID(int=2).hex[:16], clock_ns=lambda: 0,
                          start_ns=0, start_utc_ns=0)
    connected = Connected(expects_response=None) if arrival_stamps is None \
        else Connected(expects_response=None, arrival_stamps=arrival_stamps)
    recording.record(EventType.CONNECTED, connected, source="evaluator", direction="internal",
                     at_ns=0)
    stamps = sorted((ms, turn) for turn, times in responses.items() for ms in times)
    for ms, turn in stamps:
        recording.record(EventType.PRODUCT_AUDIO, source="product", direction="inbound",
                         at_ns=ms * MS, turn_id=turn, speaker_role="assistant", audio=CHUNK)
    for turn, ms in (done_at or {}).items():
        recording.record(EventType.PRODUCT_RESPONSE_DONE, ResponseDone(status="completed"),
                         source="product", direction="inbound", at_ns=ms * MS, turn_id=turn)
    extra = {} if late is None else {LATE_TICKS_ATTRIBUTE: late_ticks_record(
        [[wake * 1000, lateness * 1000] for wake, lateness in late])}
    last = max((ms for ms, _ in stamps), default=0) + 1000
    recording.record(EventType.TRIAL_ENDED, TrialEnded(
        exit_reason="max_turns", loop_lag=lag.model_dump(mode="json"), **extra),
        source="runner", direction="internal", at_ns=last * MS)
    return recording


def _turns(*ids: str, interrupted: str | None = None) -> list[TurnMetrics]:
    """Rows with a stall and dead-air figure (whose bounds rest on every chunk's stamp)."""
    return [TurnMetrics(turn_id=turn, index=index, status="completed",
                        first_audio_latency_ms=300.0, output_audio_seconds=1.0,
                        playback_stall_ms=0.0, dead_air_ms=0.0,
                        interrupted=turn == interrupted,
                        interruption_stop_latency_ms=50.0 if turn == interrupted else None)
            for index, turn in enumerate(ids)]


def _every(start_ms: int, count: int, step_ms: int = 20) -> list[int]:
    return [start_ms + i * step_ms for i in range(count)]


RESPONSES = {"turn-001": _every(1000, 50), "turn-002": _every(4000, 50)}


def test_a_spike_far_from_every_arrival_does_not_degrade_the_trial():
    # 150 ms blocked from 2350 to 2500 ms: the product was silent (between its responses)
    recording = _recording(RESPONSES, late=[(2500, 150), (3200, 3)])
    turns = _turns("turn-001", "turn-002")
    quality = measurement_quality(recording, MeasurementConfig(), turns)
    assert quality.scope == "turn"
    assert quality.degraded is False and quality.reasons == [] and quality.degraded_turns == []
    assert [t.stamp_error_bound_ms for t in turns] == [0.0, 0.0]
    assert [t.timing_degraded for t in turns] == [False, False]
    assert quality.loop_lag_ms == SPIKY  # the whole conversation's lag is still reported


def test_a_spike_over_a_first_audio_degrades_that_turn_only():
    # blocked from 3900 to 4050 ms: turn-002's first chunks were stamped when it ended
    recording = _recording({"turn-001": _every(1000, 50), "turn-002": [4050, 4051, 4060, 4080,
                                                                       4100, 4120]},
                           late=[(1500, 2), (4050, 150)])
    turns = _turns("turn-001", "turn-002")
    quality = measurement_quality(recording, MeasurementConfig(), turns)
    assert quality.degraded is True and quality.degraded_turns == ["turn-002"]
    assert [t.timing_degraded for t in turns] == [False, True]
    # a tick 2 ms late over one of its chunks: the loop was last seen free one 10 ms interval
    # and the 1 ms floor before that tick was due, at 1487: the chunk at 1500 waited 13 ms
    assert turns[0].stamp_error_bound_ms == 13.0
    # the chunk stamped 10 ms after the wake-up waited since 3889: 171 ms
    assert turns[1].stamp_error_bound_ms == 171.0
    assert len(quality.reasons) == 1 and quality.reasons[0].startswith("turn-002: ")
    # its first chunk (4050) may have come 161 ms before its stamp, the next (4051) at its
    # own: the listener may have run dry for 4051 - 3889 - 20 (the first chunk's length) ms
    assert "playback_stall_ms by 142.0 ms (> 25 ms) may be off" in quality.reasons[0]
    # its first chunk, stamped at the wake-up, is the stamp first_audio_latency_ms rests on
    assert turns[1].first_audio_degraded is True and turns[1].first_audio_error_bound_ms == 161
    assert "its first audio's stamp by 161.0 ms > 3 ms" in quality.reasons[0]
    assert turns[0].first_audio_degraded is False  # no late tick around its first chunk


def test_the_bound_of_a_stamp_is_the_worst_covering_tick():
    # a tick due at 70 woke at 100 (the tick before it woke at 60, at most the 1 ms floor
    # late: the loop was last seen free at 59); the ticker re-armed, the next was due at 110
    # and woke at 115 (chained: no on-time tick between); one due at 292 woke at 300 (on-time
    # ticks before: free at 281)
    ticks = late_ticks_of(_recording({}, late=[(100, 30), (115, 5), (300, 8)]))
    assert ticks is not None
    stamps_ms = {"a": [75], "b": [105], "c": [118], "d": [130], "e": [200], "f": [295, 306],
                 "g": [309]}
    bounds = stamp_error_bounds({turn: [ms * MS for ms in times]
                                 for turn, times in stamps_ms.items()}, ticks, interval_ms=10.0)
    assert bounds["a"].max_ms == 30.0  # inside the 30 ms block (70-100 ms)
    assert bounds["b"].max_ms == 46.0  # 5 ms after the wake-up: waiting since 59 ms
    # only the second tick covers it (to 120), but the loop may have been busy since before
    # the first was due: 118 - 59
    assert bounds["c"].max_ms == 59.0
    assert bounds["d"].max_ms == 0.0  # past the second's catch-up (5 ms, to 120)
    assert bounds["e"].max_ms == 0.0  # the loop ran freely around it
    # not chained (on-time ticks came between): busy since 281 at the earliest (306 - 281)
    assert bounds["f"].max_ms == 25.0 and bounds["f"].stamps == 2
    assert bounds["g"].max_ms == 0.0  # past its catch-up (8 ms, to 308)


def test_response_done_counts_as_a_timing_stamp():
    # response_duration_ms rests on response.done's arrival
    recording = _recording({"turn-001": _every(1000, 10)}, late=[(2500, 100)],
                           done_at={"turn-001": 2480})
    assert timed_arrivals(recording)["turn-001"][-1] == 2480 * MS
    turns = _turns("turn-001")
    turns[0].response_duration_ms = 1480.0
    assert measurement_quality(recording, MeasurementConfig(), turns).degraded_turns == \
        ["turn-001"]
    assert turns[0].figure_error_bounds_ms is not None
    assert turns[0].figure_error_bounds_ms["response_duration_ms"] == \
        turns[0].stamp_error_bound_ms


def test_kernel_stamped_audio_is_not_charged_the_loops_lag():
    # SIP's RTP carries the kernel's receive stamps: a blocked loop reads them late, but they
    # are not late; the response's done (read by the loop) still is
    late = [(1041, 60)]
    charged = measurement_quality(_recording({"turn-001": _every(1000, 100)}, late=late),
                                  MeasurementConfig(), turns := _turns("turn-001"))
    assert charged.degraded_turns == ["turn-001"] and turns[0].stamp_error_bound_ms == 70.0
    kernel = _recording({"turn-001": _every(1000, 100)}, late=late, arrival_stamps="kernel")
    quality = measurement_quality(kernel, MeasurementConfig(), turns := _turns("turn-001"))
    assert quality.degraded_turns == [] and turns[0].stamp_error_bound_ms == 0.0
    done = _recording({"turn-001": _every(1000, 10)}, late=[(1090, 60)],
                      done_at={"turn-001": 1080}, arrival_stamps="kernel")
    assert timed_arrivals(done)["turn-001"] == [1080 * MS]
    turns = _turns("turn-001")
    turns[0].response_duration_ms = 1080.0
    assert measurement_quality(done, MeasurementConfig(), turns).degraded


def _closed(recording: Recording, at_ms: int, loop_stamped_ms: list[int] | None, *,
            late_ms: int = -1) -> None:
    """The product's ``closed`` event at ``at_ms``, listing the loop-stamped arrivals (as a
    kernel-stamped WebSocket does: [ns before its own stamp, how late it may be or -1])."""
    data: dict[str, object] = {"reason": "done", "code": 1000}
    if loop_stamped_ms is not None:
        data[LOOP_STAMPED_ATTRIBUTE] = [[(at_ms - ms) * MS, late_ms * MS if late_ms >= 0 else -1]
                                        for ms in loop_stamped_ms]
    recording.record(EventType.PRODUCT_CLOSED, ProductClosed.reported(data), source="product",
                     direction="inbound", at_ns=at_ms * MS)


def test_a_kernel_stamped_stream_is_charged_the_loops_lag_only_where_the_loop_stamped():
    # a WebSocket read with the kernel's stamps: the chunks the kernel stamped are exact
    # however late the loop read them; the two it listed (queued up in one read) are bounded
    # by the lag around them, as every stamp without the list
    late = [(1041, 60)]
    audio = {"turn-001": _every(1000, 10), "turn-002": [3000]}
    stream = _recording(audio, late=late, done_at={"turn-001": 1300},
                        arrival_stamps=KERNEL_STREAM_STAMPS)
    _closed(stream, 5000, [1040, 1060])
    assert timed_arrivals(stream) == {"turn-001": [1040 * MS, 1060 * MS]}
    turns = _turns("turn-001", "turn-002")
    quality = measurement_quality(stream, MeasurementConfig(), turns)
    assert turns[0].stamp_error_bound_ms > 25 and turns[0].first_audio_error_bound_ms == 0.0
    # the two read late arrived no later than stamped, after the first, exact one: they may
    # have arrived earlier, but the listener was still playing what came before them
    assert turns[0].figure_error_bounds_ms == {"playback_stall_ms": 0.0, "dead_air_ms": 0.0}
    assert quality.degraded_turns == []
    assert turns[1].stamp_error_bound_ms == 0.0
    # the list survives the bundle and judges the same again
    records = [json.loads(line) for line in encode_voice_events(stream).splitlines()]
    again = recording_from_records(records, streams={
        USER: stream.streams[USER].pcm(), PRODUCT_STREAM: stream.streams[PRODUCT_STREAM].pcm()})
    assert measurement_quality(again, MeasurementConfig(), again_turns := _turns(
        "turn-001", "turn-002")) == quality and again_turns == turns


def test_a_listed_stamps_own_bound_caps_the_loops():
    # the connection knows a listed stamp's arrival came after a read that emptied the queue
    # 3 ms before it: the 60 ms tick around it cannot make it later than that
    stream = _recording({"turn-001": _every(1000, 10)}, late=[(1041, 60)],
                        arrival_stamps=KERNEL_STREAM_STAMPS)
    _closed(stream, 5000, [1040], late_ms=3)
    turns = _turns("turn-001")
    assert measurement_quality(stream, MeasurementConfig(), turns).degraded is False
    assert turns[0].stamp_error_bound_ms == 3.0
    # unknown (-1): the loop's bound alone
    stream = _recording({"turn-001": _every(1000, 10)}, late=[(1041, 60)],
                        arrival_stamps=KERNEL_STREAM_STAMPS)
    _closed(stream, 5000, [1040])
    measurement_quality(stream, MeasurementConfig(), turns := _turns("turn-001"))
    assert turns[0].stamp_error_bound_ms > 60


def test_a_responses_p99_counts_the_kernels_stamps_as_exact():
    # 100 chunks, 2 of them loop-stamped within a 22 ms lag on a 2 ms watch (bounds 22 and 24
    # ms): over the p99 tolerance (20) if only those two counted, under it among 100
    audio = {"turn-001": _every(1000, 100)}
    stream = _recording(audio, late=[(1041, 22)], arrival_stamps=KERNEL_STREAM_STAMPS,
                        lag=SPIKY.model_copy(update={"interval_ms": 2.0}))
    _closed(stream, 5000, [1040, 1060])
    turns = _turns("turn-001")
    quality = measurement_quality(stream, MeasurementConfig(), turns)
    assert turns[0].stamp_error_bound_ms == 24.0 and quality.degraded is False


@pytest.mark.parametrize("listed", [None, "unreadable"])
def test_a_kernel_stamped_stream_without_its_list_is_charged_everywhere(listed):
    # no closing recorded (or a list that is not one): nothing says which stamps the kernel
    # took, so every arrival is bounded by the loop's lag, as on any connection
    stream = _recording({"turn-001": _every(1000, 10)}, late=[(1041, 60)],
                        arrival_stamps=KERNEL_STREAM_STAMPS)
    if listed is not None:
        stream.record(EventType.PRODUCT_CLOSED, ProductClosed.reported(
            {LOOP_STAMPED_ATTRIBUTE: "1040"}), source="product", direction="inbound",
            at_ns=5000 * MS)
    assert timed_arrivals(stream) == {"turn-001": [ms * MS for ms in _every(1000, 10)]}
    assert measurement_quality(stream, MeasurementConfig(), _turns("turn-001")).degraded


def test_the_p99_tolerance_judges_the_share_of_late_stamps_of_a_recording_judged_per_stamp():
    # 100 chunks, 2 of them within a 22 ms lag on a 2 ms watch (bounds 22 and 24 ms): under
    # the max tolerance (25), over p99's (20). Late ticks recorded before per-figure bounds
    # (without ``since``) are judged per stamp, as then
    recording = _recording({"turn-001": _every(1000, 100)}, late=[(1041, 22)],
                           lag=SPIKY.model_copy(update={"interval_ms": 2.0}))
    list(recording.of_type(EventType.TRIAL_ENDED))[-1].attributes[LATE_TICKS_ATTRIBUTE] \
        .pop("since")
    turns = _turns("turn-001")
    quality = measurement_quality(recording, MeasurementConfig(), turns)
    assert quality.degraded is True and "p99" in quality.reasons[0]
    relaxed = measurement_quality(recording, MeasurementConfig(max_loop_lag_p99_ms=23.0),
                                  _turns("turn-001"))
    assert relaxed.degraded is False


def test_a_bundle_without_late_ticks_is_judged_on_its_whole_trial():
    recording = _recording(RESPONSES, late=None)
    turns = _turns("turn-001", "turn-002")
    quality = measurement_quality(recording, MeasurementConfig(), turns)
    assert quality.scope == "trial" and quality.degraded is True
    assert quality.reasons == ["loop lag p99 150.0 ms > 20 ms", "loop lag max 150.0 ms > 25 ms"]
    assert [t.stamp_error_bound_ms for t in turns] == [None, None]
    assert [t.timing_degraded for t in turns] == [None, None]


def test_unreadable_late_ticks_fall_back_to_the_whole_trial_judgement():
    recording = _recording(RESPONSES, late=[(2500, 150)])
    ended = list(recording.of_type(EventType.TRIAL_ENDED))[-1]
    ended.attributes[LATE_TICKS_ATTRIBUTE] = {"floor_ms": 1.0, "ticks": [[1, 2, 3]]}
    quality = measurement_quality(recording, MeasurementConfig(), _turns("turn-001"))
    assert quality.scope == "trial" and quality.degraded is True


def test_the_late_ticks_survive_the_bundle_and_judge_the_same_again():
    recording = _recording({"turn-001": _every(1000, 5), "turn-002": [4050, 4070]},
                           late=[(4050, 150)])
    records = [json.loads(line) for line in encode_voice_events(recording).splitlines()]
    again = recording_from_records(records, streams={
        USER: recording.streams[USER].pcm(),
        PRODUCT_STREAM: recording.streams[PRODUCT_STREAM].pcm()})
    first, second = _turns("turn-001", "turn-002"), _turns("turn-001", "turn-002")
    assert measurement_quality(recording, MeasurementConfig(), first) == \
        measurement_quality(again, MeasurementConfig(), second)
    assert first == second and second[1].timing_degraded is True


# --- verdicts ---------------------------------------------------------------------------------

def _verdicts(quality, turns) -> dict:
    # limits within the 150 ms the late tick may hide of turn-002's 300 ms and 50 ms
    scenario = ScenarioConfig.model_validate({"id": "s", "eval_spec": {
        "expected_exit": "max_turns", "max_first_audio_latency_ms": 400,
        "max_interruption_stop_ms": 100}})
    verdicts = deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="max_turns", outcome_status="unavailable", outcome=None,
        outcome_error=None, measurement=quality, turn_metrics=turns)
    return {v.name: v for v in verdicts}


@pytest.mark.parametrize(("interrupted", "stop_status"), [("turn-001", "passed"),
                                                          ("turn-002", "inconclusive")])
def test_a_timing_verdict_is_inconclusive_only_when_a_degraded_turns_error_straddles_it(
        interrupted, stop_status):
    recording = _recording({"turn-001": _every(1000, 50), "turn-002": [4050, 4060]},
                           late=[(4050, 150)])
    turns = _turns("turn-001", "turn-002", interrupted=interrupted)
    quality = measurement_quality(recording, MeasurementConfig(), turns)
    verdicts = _verdicts(quality, turns)
    # the first-audio verdict takes the worst of every turn: turn-002 is among them
    latency = verdicts["first_audio_latency"]
    assert latency.status == "inconclusive" and latency.observed == 300.0
    assert "turn-002: " in latency.why
    stop = verdicts["interruption_honoured"]
    assert stop.status == stop_status and stop.observed == 50.0
    assert verdicts["expected_exit"].status == "passed"


def test_a_trial_with_no_degraded_turn_keeps_its_timing_verdicts():
    recording = _recording(RESPONSES, late=[(2500, 150)])
    turns = _turns("turn-001", "turn-002", interrupted="turn-002")
    verdicts = _verdicts(measurement_quality(recording, MeasurementConfig(), turns), turns)
    assert verdicts["first_audio_latency"].status == "passed"
    assert verdicts["interruption_honoured"].status == "passed"


# --- the ticker keeps when each late tick woke --------------------------------------------------

def test_the_window_keeps_the_late_ticks_on_the_recording_clock():
    async def scenario():
        monitor = LoopLagMonitor(interval_ms=5.0)
        start_ns = time.perf_counter_ns()
        window = monitor.open()
        await asyncio.sleep(0.03)
        before = time.perf_counter_ns()
        time.sleep(0.12)  # a synchronous call on the loop
        after = time.perf_counter_ns()
        await asyncio.sleep(0.03)
        monitor.close(window)
        return window.late_ticks(start_ns=start_ns), start_ns, before, after

    late, start_ns, before, after = asyncio.run(scenario())
    blocked = [(woke, lateness) for woke, lateness in late if lateness >= 100_000]
    assert blocked, late
    woke_us, lateness_us = blocked[0]
    # the tick asleep when the block began woke after it ended, at least a block minus one
    # interval late; its window [woke - lateness, woke] lies inside the blocked stretch's reach
    assert woke_us * 1000 >= after - start_ns - 1000
    assert lateness_us >= 120_000 - 5_000
    assert (woke_us - lateness_us) * 1000 >= before - start_ns - 5 * MS
    assert all(lateness > 1000 for _, lateness in late)  # quiet ticks are not kept


def test_a_first_audio_stamp_late_by_more_than_3_ms_is_flagged_on_its_own():
    # a 12 ms late tick at turn-002's first chunk (which may have waited since 3977, one 10 ms
    # interval and the floor before the tick was due): within the turn's tolerances (p99 20,
    # max 25 ms), but first_audio_latency_ms rests on that one stamp
    recording = _recording({"turn-001": _every(1000, 20), "turn-002": _every(4000, 20)},
                           late=[(4000, 12)])
    turns = _turns("turn-001", "turn-002")
    quality = measurement_quality(recording, MeasurementConfig(), turns)
    assert [t.timing_degraded for t in turns] == [False, False]
    assert [t.first_audio_degraded for t in turns] == [False, True]
    assert turns[1].first_audio_error_bound_ms == 23.0
    assert quality.degraded is True and quality.degraded_turns == ["turn-002"]
    assert quality.reasons == ["turn-002: the loop lagged around its first audio, whose stamp "
                               "may be late by 23.0 ms > 3 ms"]
    # a limit within those 23 ms of turn-002's measured 300 ms is undecided, one beyond them
    # decided (turn-001, trusted, answered in 200 ms)
    turns[0].first_audio_latency_ms = 200.0
    scenario = ScenarioConfig.model_validate({"id": "s", "eval_spec": {
        "max_first_audio_latency_ms": 295}})
    verdict = {v.name: v for v in deterministic_verdicts(
        scenario=scenario, persona=PersonaConfig(name="p"), transcript=[],
        exit_reason="max_turns", outcome_status="unavailable", outcome=None,
        outcome_error=None, measurement=quality, turn_metrics=turns)}["first_audio_latency"]
    assert verdict.status == "inconclusive"
    assert _verdicts(quality, turns)["first_audio_latency"].status == "passed"  # 300 vs 400
