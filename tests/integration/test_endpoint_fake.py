"""The embedded fake product through the production WebSocket adapter, over 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from voicelab.audio import PcmAudio, analyze_signal, tone_speech
from voicelab.doubles.product import FakeProduct, FakeProductEndpoint, FakeProductProbe
from voicelab.endpoints import EndpointContext, EndpointEvent
from voicelab.endpoints.websocket import WebSocketEndpoint

SESSION = "planning-session-001"
DATA = {"session_id": SESSION,
        "context": {"topic": "daily planning",
                    "requested_reminder": "Submit the weekly summary at 16:00"}}
USER_LINE = "Please record the plan and save the reminder."
TIMEOUT = 5.0


def context(**overrides) -> EndpointContext:
    return EndpointContext(session_id=SESSION, data=overrides.pop("data", DATA), **overrides)


def user_audio(text: str = USER_LINE) -> PcmAudio:
    return tone_speech(text, seed=42)


async def until(events, *kinds: str, timeout: float = TIMEOUT) -> list[EndpointEvent]:
    """Events up to and including the first of ``kinds`` (or ``closed``)."""
    seen = []
    while True:
        event = await asyncio.wait_for(anext(events), timeout)
        seen.append(event)
        if event.type in kinds or event.type == "closed":
            return seen


def types(events: list[EndpointEvent]) -> list[str]:
    collapsed: list[str] = []
    for event in events:
        if not (event.type == "audio_delta" and collapsed and collapsed[-1] == "audio_delta"):
            collapsed.append(event.type)
    return collapsed


def audio_of(events: list[EndpointEvent]) -> PcmAudio:
    return PcmAudio.from_bytes(b"".join(e.audio for e in events if e.type == "audio_delta"))


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


def test_full_exchange_plays_the_seed_example_and_persists_the_outcome():
    async def scenario():
        endpoint = FakeProductEndpoint({}, context())
        await endpoint.connect()
        events = endpoint.events()
        opening = await until(events, "turn_complete")
        await endpoint.send_audio(user_audio())
        await endpoint.commit_turn()
        reply = await until(events, "conversation_complete")
        record = endpoint.session_record
        probe = endpoint.outcome_probe()
        await endpoint.close()
        closing = await until(events, "closed")
        outcome = await probe.probe({"session_id": SESSION})
        return opening, reply, closing, record, outcome

    opening, reply, closing, record, outcome = run(scenario())
    assert types(opening) == ["audio_delta", "transcript_final", "turn_complete"]
    assert "daily plan" in opening[-2].text and "reminder" in opening[-2].text
    assert types(reply) == ["tool_call", "tool_result", "audio_delta", "transcript_final",
                            "turn_complete", "conversation_complete"]
    call = reply[0].data
    assert call["name"] == "save_reminder"
    assert call["arguments"] == {"session_id": SESSION, "text": "Submit the weekly summary",
                                 "time": "16:00"}
    assert reply[1].data["call_id"] == call["call_id"]
    final_text = next(e.text for e in reply if e.type == "transcript_final")
    assert all(word in final_text for word in ("plan", "recorded", "reminder", "saved", "16:00"))
    assert closing[-1].type == "closed"
    assert closing[-1].data["initiated_by"] == "evaluator"
    # receive timestamps are monotonic in arrival order
    stamps = [e.received_ns for e in opening + reply + closing]
    assert stamps == sorted(stamps)
    # the seed's protocol-order contract, as the product saw it
    frames = len(user_audio().chunks(100))
    assert record.client_messages == ["evaluator.init", *["binary_audio"] * frames,
                                      "input_audio_buffer.commit", "response.create"]
    assert reply[-1].raw["client_messages"] == record.client_messages
    assert outcome == {"session_id": SESSION, "follow_up_created": True,
                       "report_fields_complete": True, "reminder_created": True,
                       "reminder_time": "16:00"}


def test_traceparent_and_server_timing():
    async def scenario():
        ctx = context()
        endpoint = FakeProductEndpoint({"opening_text": ""}, ctx)
        await endpoint.connect()
        events = endpoint.events()
        await endpoint.send_audio(user_audio("Hi."))
        await endpoint.commit_turn()
        reply = await until(events, "turn_complete")
        await endpoint.close()
        return ctx, endpoint.session_record, reply

    ctx, record, reply = run(scenario())
    assert record.handshake_headers["traceparent"] == ctx.traceparent
    timing = reply[-1].raw["server_timing"]
    assert 0 < timing["response_create_ns"] <= timing["first_audio_ns"]
    assert types(reply)[0] == "tool_call"  # no opening: the first response answers the user


def test_base64_transport_carries_the_same_audio_as_binary():
    async def reply_audio(transport: str) -> PcmAudio:
        endpoint = FakeProductEndpoint({"audio_transport": transport}, context())
        await endpoint.connect()
        opening = await until(endpoint.events(), "turn_complete")
        await endpoint.close()
        assert all((e.raw.get("binary") is True) == (transport == "binary")
                   for e in opening if e.type == "audio_delta")
        return audio_of(opening)

    binary = run(reply_audio("binary"))
    base64_audio = run(reply_audio("base64"))
    assert binary.num_samples > 24_000
    np.testing.assert_array_equal(binary.samples, base64_audio.samples)


def test_barge_in_sends_cancel_and_the_product_stops_promptly():
    async def scenario():
        endpoint = FakeProductEndpoint({"audio_pacing": "realtime", "pacing_speed": 5.0},
                                       context())
        await endpoint.connect()
        events = endpoint.events()
        first = await until(events, "audio_delta")
        await endpoint.interrupt()
        await endpoint.send_audio(user_audio())
        await endpoint.commit_turn()
        rest = await until(events, "conversation_complete")
        await endpoint.close()
        return first + rest, endpoint.session_record

    events, record = run(scenario())
    sequence = types(events)
    cancelled_at = sequence.index("interruption")
    assert sequence[cancelled_at + 1] == "turn_complete"
    turn_completes = [e for e in events if e.type == "turn_complete"]
    assert [e.data["status"] for e in turn_completes] == ["cancelled", "completed"]
    opening_audio = audio_of(events[:events.index(turn_completes[0])])
    assert opening_audio.duration_seconds < 2.0  # the opening is ~5.2 s long; it stopped early
    assert "transcript_final" not in sequence[:cancelled_at]
    messages = record.client_messages
    cancel = messages.index("response.cancel")
    assert messages[cancel + 1] == "binary_audio"
    assert messages[-2:] == ["input_audio_buffer.commit", "response.create"]
    assert sequence[-1] == "conversation_complete"


def test_ignore_cancel_keeps_streaming_the_whole_response():
    async def scenario():
        endpoint = FakeProductEndpoint({"audio_pacing": "realtime", "pacing_speed": 20.0,
                                        "ignore_cancel": True}, context())
        await endpoint.connect()
        events = endpoint.events()
        first = await until(events, "audio_delta")
        await endpoint.interrupt()
        rest = await until(events, "turn_complete")
        await endpoint.close()
        return first + rest

    events = run(scenario())
    assert "interruption" not in types(events)
    assert events[-1].data["status"] == "completed"
    assert audio_of(events).duration_seconds > 3.0


def test_multi_turn_with_input_transcripts_and_per_turn_replies():
    async def scenario():
        endpoint = FakeProductEndpoint({"complete_after_turns": 2, "input_transcript": "my plan",
                                        "replies": ["What time?"], "opening_text": ""},
                                       context())
        await endpoint.connect()
        events = endpoint.events()
        collected = []
        for line in ("Record my plan.", "At four."):
            await endpoint.send_audio(user_audio(line))
            await endpoint.commit_turn()
            collected += await until(events, "turn_complete")
        collected += await until(events, "conversation_complete")
        await endpoint.close()
        return collected, await endpoint.outcome_probe().probe({"session_id": SESSION})

    events, outcome = run(scenario())
    assert [e.text for e in events if e.type == "input_transcript"] == ["my plan", "my plan"]
    finals = [e.text for e in events if e.type == "transcript_final"]
    assert finals[0] == "What time?"
    assert "saved" in finals[1]
    assert [e.type for e in events].count("tool_call") == 1
    assert types(events)[-1] == "conversation_complete"
    assert outcome["reminder_created"] is True


def test_claim_without_tool_says_saved_but_persists_nothing():
    async def scenario():
        endpoint = FakeProductEndpoint({"claim_without_tool": True}, context())
        await endpoint.connect()
        events = endpoint.events()
        await until(events, "turn_complete")
        await endpoint.send_audio(user_audio())
        await endpoint.commit_turn()
        reply = await until(events, "conversation_complete")
        await endpoint.close()
        return reply, await endpoint.outcome_probe().probe({"session_id": SESSION})

    reply, outcome = run(scenario())
    assert "tool_call" not in types(reply)
    assert "saved" in next(e.text for e in reply if e.type == "transcript_final")
    assert outcome["reminder_created"] is False
    assert outcome["report_fields_complete"] is False


@pytest.mark.parametrize(("fault", "check"), [
    ({"clip": True}, lambda a, clean: a.clipped_sample_ratio > 0.05),
    ({"truncate": True}, lambda a, clean: a.possible_truncation and not clean.possible_truncation),
    # 800 ms of inserted digital silence = 19 200 samples = 38 400 bytes, exactly
    ({"silence_ms": 800}, lambda a, clean: a.byte_count - clean.byte_count == 38_400
     and a.silence_ratio > clean.silence_ratio),
])
def test_signal_faults_reach_the_evaluator(fault, check):
    async def opening_signal(settings):
        endpoint = FakeProductEndpoint(settings, context())
        await endpoint.connect()
        opening = await until(endpoint.events(), "turn_complete")
        await endpoint.close()
        return analyze_signal(audio_of(opening))

    assert check(run(opening_signal(fault)), run(opening_signal({})))


def test_reply_latency_and_a_stall_shorter_than_the_receive_timeout():
    async def scenario():
        endpoint = FakeProductEndpoint({"reply_latency_ms": [300], "stall_ms": 300,
                                        "stall_after_seconds": 0.2,
                                        "receive_timeout_seconds": 2.0}, context())
        loop = asyncio.get_running_loop()
        started = loop.time()
        await endpoint.connect()
        events = endpoint.events()
        first = await until(events, "audio_delta")
        latency = loop.time() - started
        rest = await until(events, "turn_complete")
        await endpoint.close()
        gaps = np.diff([e.received_ns for e in first + rest if e.type == "audio_delta"])
        return latency, gaps.max() / 1e9, rest[-1]

    latency, longest_gap, done = run(scenario())
    assert latency >= 0.3
    assert longest_gap >= 0.28  # the 300 ms stall, minus scheduling jitter
    assert done.data["status"] == "completed"


@pytest.mark.parametrize("settings", [
    {"never_answer": True, "opening_text": ""},
    {"stall_ms": 5000, "stall_after_seconds": 0.0, "opening_text": ""},
])
def test_silence_while_a_response_is_pending_becomes_receive_timeout(settings):
    async def scenario():
        endpoint = FakeProductEndpoint({**settings, "receive_timeout_seconds": 0.3}, context())
        await endpoint.connect()
        events = endpoint.events()
        await endpoint.send_audio(user_audio("Hi."))
        await endpoint.commit_turn()
        seen = await until(events, "closed")
        await endpoint.close()
        return seen

    seen = run(scenario())
    # the error's code is the proof, not a clock: the product stays silent for longer than
    # ``until`` waits for any event (5 s), so only the 0.3 s receive timeout ends the wait
    errors = [e for e in seen if e.type == "error"]
    assert [e.data["code"] for e in errors] == ["receive_timeout"]
    assert seen[-1].type == "closed"
    assert seen[-1].data["initiated_by"] == "adapter"


def test_error_on_response_and_close_mid_response():
    async def error_run():
        endpoint = FakeProductEndpoint({"error_on_response": 1}, context())
        await endpoint.connect()
        seen = await until(endpoint.events(), "turn_complete")
        await endpoint.close()
        return seen

    async def close_run():
        endpoint = FakeProductEndpoint({"close_mid_response": 2}, context())
        await endpoint.connect()
        events = endpoint.events()
        await until(events, "turn_complete")
        await endpoint.send_audio(user_audio())
        await endpoint.commit_turn()
        seen = await until(events, "closed")
        with pytest.raises(Exception) as caught:
            await endpoint.send_audio(user_audio("more"))
        await endpoint.close()
        return seen, caught.value

    seen = run(error_run())
    assert types(seen) == ["error", "turn_complete"]
    assert seen[0].data["origin"] == "product"
    assert seen[1].data["status"] == "failed"

    seen, send_error = run(close_run())
    sequence = types(seen)
    assert sequence[-2:] == ["error", "closed"]
    assert "turn_complete" not in sequence
    assert seen[-2].data["code"] == "connection_closed"
    assert seen[-1].data["code"] == 1011
    assert seen[-1].data["initiated_by"] == "product"
    assert getattr(send_error, "code", None) == "connection_closed"


INIT = json.dumps({"type": "evaluator.init", "request": {}})


@pytest.mark.parametrize(("messages", "violation"), [
    ([json.dumps({"type": "input_audio_buffer.commit"})], "init_required"),
    ([b"\x00\x00"], "init_required"),
    ([json.dumps({"type": "evaluator.init"})], "malformed_init"),
    ([INIT, json.dumps({"type": "input_audio_buffer.commit"})], "empty_commit"),
    ([INIT, json.dumps({"type": "response.create"})], "create_without_commit"),
    ([INIT, b"\x00\x02", json.dumps({"type": "input_audio_buffer.commit"}),
      json.dumps({"type": "input_audio_buffer.commit"})], "empty_commit"),
    ([INIT, b"\x00\x00\x00"], "invalid_audio"),
    ([INIT, INIT], "duplicate_init"),
    ([INIT, json.dumps({"type": "session.update"})], "unknown_message_type"),
    ([INIT, "{nope"], "malformed_json"),
])
def test_the_fake_is_strict_about_protocol_slips(messages, violation):
    async def scenario():
        async with FakeProduct({"opening_text": ""}) as product:
            async with connect(product.uri) as ws:
                for message in messages:
                    await ws.send(message)
                replies = []
                with contextlib.suppress(ConnectionClosed):
                    async for reply in ws:
                        replies.append(json.loads(reply))
                return replies, ws.close_code, product.sessions[0].violations

    replies, close_code, violations = run(scenario())
    assert replies[-1]["type"] == "error"
    assert replies[-1]["error"]["code"] == violation
    assert close_code == 1008
    assert violations == [violation]


def test_standalone_fake_server_process():
    settings = json.dumps({"opening_text": "", "reply_latency_ms": 10})
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab.doubles.product", "--port", "0",
         "--settings", settings], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        ready = json.loads(process.stdout.readline())

        async def scenario():
            endpoint = WebSocketEndpoint({"uri": ready["uri"], "receive_timeout_seconds": 5},
                                         context())
            await endpoint.connect()
            events = endpoint.events()
            await endpoint.send_audio(user_audio())
            await endpoint.commit_turn()
            seen = await until(events, "conversation_complete")
            await endpoint.close()
            probe = FakeProductProbe({"database_path": ready["database_path"]})
            return seen, await probe.probe({"session_id": SESSION})

        seen, outcome = run(scenario())
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert types(seen)[-1] == "conversation_complete"
    assert outcome["reminder_time"] == "16:00"
    assert process.returncode == 0


def test_receive_timeout_also_applies_to_a_consumer_already_waiting_before_the_commit():
    # the intake waits on events() between turns (nothing pending); the commit must start the
    # receive timeout for that same wait
    async def scenario():
        endpoint = FakeProductEndpoint({"never_answer": True, "opening_text": "",
                                        "receive_timeout_seconds": 0.3}, context())
        await endpoint.connect()
        consumer = asyncio.create_task(until(endpoint.events(), "closed"))
        await asyncio.sleep(0.1)
        await endpoint.send_audio(user_audio("Hi."))
        committed_ns = time.perf_counter_ns()
        await endpoint.commit_turn()
        seen = await asyncio.wait_for(consumer, 5)
        await endpoint.close()
        return seen, committed_ns

    seen, committed_ns = run(scenario())
    # it fired (a product that never answers: nothing else ends the 5 s wait), and counted
    # from the commit, not from when the consumer began waiting 0.1 s before it: the error's
    # own stamp is a full timeout after the commit (a lower bound, which a busy machine only
    # makes larger; 1 ms for the timer's rounding)
    [error] = [e for e in seen if e.type == "error"]
    assert error.data["code"] == "receive_timeout"
    assert error.received_ns - committed_ns >= 0.3e9 - 1e6
