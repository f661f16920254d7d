"""The pipecat adapter over real sockets: against the pipecat-protocol bot, and against scripted
servers for the wire's edges (the bot hanging up, silence, garbage, the resampler's tail)."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voicelab.audio import PcmAudio, tone_speech
from voicelab.config import SecretScrubber
from voicelab.doubles.pipecat import PipecatBot
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent, load_endpoint_class
from voicelab.endpoints.pipecat import PipecatEndpoint
from voicelab.endpoints.pipecat._wire import decode_frame, encode_frame

HEADER_SECRET = "hdr-SECRET-5e1f0c"
CLIENT_READY = {"label": "rtvi-ai", "type": "client-ready", "id": "1", "data": {}}
USER_LINE = "Please record the plan and save the reminder."


def context() -> EndpointContext:
    return EndpointContext(session_id="s-1", scrubber=SecretScrubber())


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


def pipecat(uri: str, **settings) -> PipecatEndpoint:
    return PipecatEndpoint({"uri": uri, **settings}, context())


async def until(events, predicate, seen: list[EndpointEvent], timeout: float = 8.0) -> None:
    async def collect() -> None:
        while True:
            seen.append(await anext(events))
            if predicate(seen[-1]) or seen[-1].type == "closed":
                return
    await asyncio.wait_for(collect(), timeout)


def stopped_speaking(event: EndpointEvent) -> bool:
    return event.type == "raw" and isinstance(event.raw, dict) and \
        event.raw.get("data", {}).get("type") == "bot-stopped-speaking"


@contextlib.asynccontextmanager
async def scripted(handler):
    """A WebSocket server on 127.0.0.1 running ``handler(ws)`` per connection."""
    async def session(ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            await handler(ws)

    async with serve(session, "127.0.0.1", 0, compression=None) as server:
        yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


def test_the_registry_names_the_adapter_and_it_listens():
    adapter = load_endpoint_class("pipecat")
    assert adapter is PipecatEndpoint
    assert adapter.turn_taking({}) == "server_vad"
    assert adapter.capabilities["input_transcripts"] and not adapter.capabilities["tool_events"]


def test_a_conversation_with_the_bot():
    """Greeting, the caller's utterance (16 kHz frames on the wire), what the bot heard, its
    answer; the connect message reaches the bot."""
    async def scenario():
        async with PipecatBot({"greeting": "Hello there.", "replies": ["Noted, thank you."],
                               "heard": ["record the plan"]}) as bot:
            endpoint = pipecat(bot.uri, connect_messages=[CLIENT_READY],
                               headers={"X-Api-Key": HEADER_SECRET})
            await endpoint.connect()
            events, seen = endpoint.events(), []
            await until(events, stopped_speaking, seen)
            # a caller answers after hearing silence; by then the resampler's tail is out
            await asyncio.sleep(0.2)
            line = PcmAudio.concat([tone_speech(USER_LINE, seed=42), PcmAudio.silence(0.8)])
            for chunk in line.chunks(20):
                await endpoint.send_audio(chunk)
            await until(events, stopped_speaking, seen)
            await endpoint.commit_turn()  # harmless: the bot takes turns itself
            await endpoint.close()
            await until(events, lambda e: False, seen)
            return bot.calls[0], seen, line

    call, seen, line = run(scenario())
    kinds = [e.type for e in seen]
    assert [e.text for e in seen if e.type == "transcript_final"] == ["Hello there.",
                                                                      "Noted, thank you."]
    assert [e.text for e in seen if e.type == "input_transcript"] == ["record the plan"]
    assert kinds.index("input_transcript") > kinds.index("transcript_final")
    assert kinds[-1] == "closed" and seen[-1].data["initiated_by"] == "evaluator"
    greeting = sum(len(e.audio or b"") for e in seen[:kinds.index("input_transcript")]
                   if e.type == "audio_delta")
    assert greeting == tone_speech("Hello there.", seed=7).byte_count  # 24 kHz, every sample
    received = call.received
    assert received[0].kind == "message" and received[0].fields["data"] == \
        '{"label": "rtvi-ai", "type": "client-ready", "id": "1", "data": {}}'
    audio = [f for f in received if f.kind == "audio"]
    assert {(f.fields["sample_rate"], f.fields["num_channels"]) for f in audio} == {(16000, 1)}
    sent_samples = sum(len(f.fields["audio"]) // 2 for f in audio)
    assert abs(sent_samples - line.num_samples * 2 / 3) <= 800  # the resampler holds < 50 ms
    assert HEADER_SECRET not in repr(seen)


def test_interrupt_sends_an_interruption_frame_that_stops_the_bot():
    async def scenario():
        async with PipecatBot({"greeting": "One two three four five six seven eight nine."}) \
                as bot:
            endpoint = pipecat(bot.uri)
            await endpoint.connect()
            events, seen = endpoint.events(), []
            await until(events, lambda e: e.type == "audio_delta", seen)
            await endpoint.interrupt()
            await until(events, lambda e: e.type == "interruption", seen)
            await endpoint.close()
            await until(events, lambda e: False, seen)
            return bot.calls[0], seen

    call, seen = run(scenario())
    assert [f.kind for f in call.received] == ["interruption"]
    assert call.replies[0].interrupted_ns is not None
    interruption = next(e for e in seen if e.type == "interruption")
    assert interruption.data == {"status": "cancelled", "flush": True}
    heard = sum(len(e.audio or b"") for e in seen if e.type == "audio_delta") / 48_000
    assert heard < tone_speech("One two three four five six seven eight nine.",
                               seed=7).duration_seconds / 2


def test_the_resamplers_tail_arrives_once_the_bots_audio_pauses():
    """Three 40 ms frames, then nothing: all 120 ms arrive (as 24 kHz) without another frame."""
    frame = np.full(640, 3000, dtype=np.int16).tobytes()

    async def bot(ws: ServerConnection) -> None:
        for _ in range(3):
            await ws.send(encode_frame("audio", audio=frame, sample_rate=16000, num_channels=1))
            await asyncio.sleep(0.04)
        await ws.wait_closed()

    async def scenario():
        async with scripted(bot) as uri:
            endpoint = pipecat(uri)
            await endpoint.connect()
            events, seen = endpoint.events(), []
            await until(events, lambda e: sum(len(x.audio or b"") for x in seen) >= 2880 * 2,
                        seen, timeout=2.0)
            await endpoint.close()
            return seen

    seen = run(scenario())
    assert sum(len(e.audio or b"") for e in seen if e.type == "audio_delta") == 2880 * 2


def test_a_bot_hanging_up_is_a_clean_end_and_an_error_close_is_not():
    async def hang_up(code: int):
        async def bot(ws: ServerConnection) -> None:
            await ws.send(encode_frame("text", text="Goodbye."))
            await ws.close(code, "bye")

        async with scripted(bot) as uri:
            endpoint = pipecat(uri)
            await endpoint.connect()
            seen: list[EndpointEvent] = []
            await until(endpoint.events(), lambda e: False, seen)
            with pytest.raises(EndpointError) as closed:
                await endpoint.send_audio(PcmAudio.silence(0.02))
            assert closed.value.code == "connection_closed"
            await endpoint.close()
            await endpoint.close()  # idempotent
            return seen

    clean = run(hang_up(1000))
    assert [e.type for e in clean] == ["transcript_final", "closed"]
    assert clean[-1].data == {"reason": "bye", "code": 1000, "initiated_by": "product"}
    failed = run(hang_up(1011))
    assert [e.type for e in failed] == ["transcript_final", "error", "closed"]
    assert failed[1].data["code"] == "connection_closed"


def test_garbage_from_the_bot_is_an_error_event_and_the_call_goes_on():
    async def bot(ws: ServerConnection) -> None:
        await ws.send(b"\xff\xff\xff")
        await ws.send(bytes.fromhex("3a020801"))  # a frame kind this schema does not define
        await ws.send(encode_frame("transcription", text="still here"))
        await ws.wait_closed()

    async def scenario():
        async with scripted(bot) as uri:
            endpoint = pipecat(uri)
            await endpoint.connect()
            events, seen = endpoint.events(), []
            await until(events, lambda e: e.type == "input_transcript", seen)
            await endpoint.close()
            return seen

    seen = run(scenario())
    assert [e.type for e in seen] == ["error", "raw", "input_transcript"]
    assert seen[0].data["code"] == "malformed_frame"


def test_a_silent_bot_hits_the_receive_timeout():
    async def scenario():
        async with scripted(lambda ws: ws.wait_closed()) as uri:
            endpoint = pipecat(uri, receive_timeout_seconds=0.3)
            await endpoint.connect()
            seen: list[EndpointEvent] = []
            await until(endpoint.events(), lambda e: False, seen, timeout=5.0)
            return seen

    seen = run(scenario())
    assert [e.type for e in seen] == ["error", "closed"]
    assert seen[0].data["code"] == "receive_timeout"
    assert seen[1].data["initiated_by"] == "adapter"


def test_nothing_listening_is_refused_at_connect():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def scenario():
        await pipecat(f"ws://127.0.0.1:{port}/", connect_timeout_seconds=2).connect()

    with pytest.raises(EndpointError) as refused:
        run(scenario())
    assert refused.value.code == "connection_refused"


def test_the_callers_audio_goes_out_at_the_configured_rate():
    received: list[bytes] = []

    async def bot(ws: ServerConnection) -> None:
        async for message in ws:
            received.append(message)

    async def scenario():
        async with scripted(bot) as uri:
            endpoint = pipecat(uri, sample_rate_hz=8000, resample_quality="LQ")
            await endpoint.connect()
            for chunk in PcmAudio.silence(0.5).chunks(20):
                await endpoint.send_audio(chunk)
            with pytest.raises(ValueError, match="24000 Hz"):
                await endpoint.send_audio(PcmAudio.silence(0.02, sample_rate_hz=16000))
            await endpoint.close()

    run(scenario())
    frames = [decode_frame(message) for message in received]
    assert {(f.kind, f.fields["sample_rate"]) for f in frames} == {("audio", 8000)}
    assert 3600 <= sum(len(f.fields.get("audio", b"")) // 2 for f in frames) <= 4000
