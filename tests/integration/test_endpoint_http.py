"""The HTTP adapter against a real local HTTP server: exchange, faults, secrets."""

from __future__ import annotations

import asyncio
import json
import logging
import socket

import pytest

from voicelab.audio import PcmAudio, tone_speech
from voicelab.doubles.product import FakeHttpProduct
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent
from voicelab.endpoints.http import HttpEndpoint

TOKEN = "tok-HTTP-SECRET-51a9"
DATA = {"session_id": "planning-session-001",
        "context": {"requested_reminder": "Submit the weekly summary at 16:00"}}


def context() -> EndpointContext:
    return EndpointContext(session_id="planning-session-001", data=DATA)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 15))


async def until(events, *kinds: str, timeout: float = 5.0) -> list[EndpointEvent]:
    seen = []
    while True:
        event = await asyncio.wait_for(anext(events), timeout)
        seen.append(event)
        if event.type in kinds or event.type == "closed":
            return seen


def user_audio() -> PcmAudio:
    return tone_speech("Please record the plan and save the reminder.", seed=42)


def test_opening_and_one_turn_with_tool_events():
    async def scenario():
        async with FakeHttpProduct({"access_token": TOKEN, "input_transcript": "record it"}) \
                as product:
            ctx = context()
            endpoint = HttpEndpoint({"url": product.url, "access_token": TOKEN,
                                     "opening_request": True}, ctx)
            await endpoint.connect()
            events = endpoint.events()
            opening = await until(events, "turn_complete")
            audio = user_audio()
            for frame in audio.chunks(100):
                await endpoint.send_audio(frame)
            await endpoint.commit_turn()
            reply = await until(events, "conversation_complete")
            await endpoint.interrupt()  # a no-op for a non-streaming product
            await endpoint.close()
            closing = await until(events, "closed")
            return ctx, audio, product.requests, opening, reply, closing

    ctx, audio, requests, opening, reply, closing = run(scenario())
    assert [e.type for e in opening] == ["audio_delta", "transcript_final", "turn_complete"]
    assert "daily plan" in opening[1].text
    assert [e.type for e in reply] == ["input_transcript", "tool_call", "tool_result",
                                       "audio_delta", "transcript_final", "turn_complete",
                                       "conversation_complete"]
    assert len({e.received_ns for e in reply}) == 1  # all stamped with the reply's arrival
    assert reply[1].data["arguments"] == {"text": "Submit the weekly summary", "time": "16:00"}
    assert reply[3].raw["audio"] == {"omitted": "base64 pcm", "byte_count": len(reply[3].audio)}
    assert [r["turn_index"] for r in requests] == [0, 1]
    assert requests[1]["audio_bytes"] == audio.byte_count
    assert requests[1]["data"] == DATA
    assert requests[1]["session_id"] == "planning-session-001"
    assert requests[1]["audio_format"] == {"encoding": "pcm_s16le", "sample_rate_hz": 24000,
                                           "channels": 1}
    assert requests[1]["traceparent"] == ctx.traceparent
    assert closing[-1].data["initiated_by"] == "evaluator"


@pytest.mark.parametrize(("fault", "code"), [("status", "http_status"),
                                             ("bad_json", "malformed_json"),
                                             ("non_object", "malformed_message"),
                                             ("slow", "receive_timeout")])
def test_a_failed_turn_becomes_error_then_closed(fault, code):
    async def scenario():
        async with FakeHttpProduct({"fault": fault, "fault_on_turn": 1,
                                    "slow_seconds": 3.0}) as product:
            endpoint = HttpEndpoint({"url": product.url, "timeout_seconds": 0.4}, context())
            await endpoint.connect()
            await endpoint.send_audio(user_audio())
            await endpoint.commit_turn()
            events = await until(endpoint.events(), "closed")
            with pytest.raises(EndpointError) as caught:
                await endpoint.commit_turn()
            await endpoint.close()
            return events, caught.value

    events, send_error = run(scenario())
    # the code is the proof, not a clock: the slow reply would come after 3 s, an answer
    # that is no error, so only the 0.4 s timeout gives ``receive_timeout``
    assert [e.type for e in events] == ["error", "closed"]
    assert events[0].data["code"] == code
    assert events[1].data["initiated_by"] == "adapter"
    assert send_error.code == "connection_closed"


def test_odd_audio_and_product_errors_keep_the_conversation_going():
    async def turn(fault: str) -> list[EndpointEvent]:
        async with FakeHttpProduct({"fault": fault}) as product:
            endpoint = HttpEndpoint({"url": product.url}, context())
            await endpoint.connect()
            await endpoint.send_audio(user_audio())
            await endpoint.commit_turn()
            events = await until(endpoint.events(), "turn_complete")
            await endpoint.close()
            return events

    odd = run(turn("odd_audio"))
    assert "audio_delta" not in [e.type for e in odd]
    assert [e.data["code"] for e in odd if e.type == "error"] == ["invalid_audio"]
    assert odd[-1].data["status"] == "completed"
    failed = run(turn("product_error"))
    errors = [e for e in failed if e.type == "error"]
    assert [(e.data["code"], e.data["origin"]) for e in errors] == [("fault", "product")]
    assert failed[-1].data["status"] == "failed"


def test_unreachable_product():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/turn"

    async def scenario():
        eager = HttpEndpoint({"url": url, "opening_request": True}, context())
        with pytest.raises(EndpointError) as caught:
            await eager.connect()
        lazy = HttpEndpoint({"url": url}, context())
        await lazy.connect()
        await lazy.send_audio(user_audio())
        await lazy.commit_turn()
        events = await until(lazy.events(), "closed")
        await lazy.close()
        return caught.value, events

    error, events = run(scenario())
    assert error.code == "connection_refused"
    assert [(e.type, e.data.get("code")) for e in events][0] == ("error", "connection_refused")
    assert events[-1].type == "closed"


def test_rejected_opening_and_secrets_stay_out_of_errors_and_logs(caplog):
    async def scenario():
        async with FakeHttpProduct({"access_token": TOKEN, "fault": "status",
                                    "fault_on_turn": 1}) as product:
            rejected = HttpEndpoint({"url": product.url + f"?token={TOKEN}",
                                     "access_token": "tok-WRONG-0000", "opening_request": True},
                                    context())
            with pytest.raises(EndpointError) as caught:
                await rejected.connect()
            accepted = HttpEndpoint({"url": product.url, "access_token": TOKEN,
                                     "headers": {"X-Tenant-Key": "tenant-SECRET-88"}}, context())
            await accepted.connect()
            await accepted.send_audio(user_audio())
            await accepted.commit_turn()
            events = await until(accepted.events(), "closed")
            return caught.value, events

    with caplog.at_level(logging.DEBUG, logger="voicelab"):
        error, events = run(scenario())
    assert error.code == "handshake_rejected"
    assert "HTTP 403" in str(error)
    dumped = str(error) + json.dumps([[e.text, e.data, e.raw] for e in events]) + caplog.text
    for secret in (TOKEN, "tok-WRONG-0000", "tenant-SECRET-88"):
        assert secret not in dumped
    assert events[0].data["status_code"] == 500


async def _endless_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         *, declare: int | None) -> None:
    """A hostile product: reads the request, then streams a reply that never ends (or
    declares an enormous length)."""
    await reader.readuntil(b"\r\n\r\n")
    if declare is not None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n{" % declare)
    else:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"a" * (256 * 1024)
    try:
        for _ in range(4096):  # 1 GiB at most: far past any limit
            if declare is None:
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                writer.write(piece)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


@pytest.mark.parametrize("declare", [None, 10 * 1024 ** 3])
def test_a_reply_past_the_size_limit_is_refused_before_it_is_held(declare):
    async def scenario():
        server = await asyncio.start_server(
            lambda r, w: _endless_reply(r, w, declare=declare), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            endpoint = HttpEndpoint({"url": f"http://127.0.0.1:{port}/",
                                     "max_response_bytes": 2 * 1024 * 1024}, context())
            await endpoint.connect()
            await endpoint.send_audio(user_audio())
            await endpoint.commit_turn()
            events = await until(endpoint.events(), "closed", timeout=10)
            await endpoint.close()
            return events

    events = run(scenario())
    assert [e.type for e in events] == ["error", "closed"]
    assert events[0].data["code"] == "resource_limit"
    assert "max_response_bytes (2,097,152)" in events[0].data["message"]
