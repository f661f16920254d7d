"""Golden wire test of the pipecat adapter: a recorded exchange with the pipecat-protocol bot,
both directions with their payloads, and the normalized events the adapter made of it.

The fixture holds decoded frames: every field of a non-audio frame (a transcription's
``timestamp`` is ``"<timestamp>"``), and each run of audio frames as one step with its rate,
channels, frame count, sample count and level. Regenerate after an intended change with
``VOICELAB_UPDATE_GOLDEN=1 pytest tests/integration/test_pipecat_golden.py`` and review the diff.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voicelab.audio import PcmAudio, tone_speech
from voicelab.doubles.pipecat import PipecatBot
from voicelab.endpoints import EndpointContext, EndpointEvent
from voicelab.endpoints.pipecat import PipecatEndpoint
from voicelab.endpoints.pipecat._wire import DecodedFrame, audio_frame, decode_frame, encode_frame

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "pipecat_exchange.json"
UPDATE = os.environ.get("VOICELAB_UPDATE_GOLDEN") == "1"

USER_LINE = "Please record the plan and save the reminder."
SETTINGS = {"connect_messages": [{"label": "rtvi-ai", "type": "client-ready", "id": "c1",
                                  "data": {"version": "1.0.0"}}]}
BOT = {"greeting": "Hello! What is your plan?", "heard": ["please record the plan"],
       "replies": ["Your plan is recorded."]}


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


def level_dbfs(pcm: bytes) -> float:
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    return round(float(10 * np.log10(np.mean(samples ** 2) / 32768 ** 2)), 1)


def frame_steps(frames: list[DecodedFrame]) -> list[dict[str, Any]]:
    """Decoded frames as fixture steps: audio runs collapsed, volatile values replaced."""
    steps: list[dict[str, Any]] = []
    run_pcm: list[bytes] = []
    for frame in [*frames, None]:
        if frame is not None and frame.kind == "audio":
            if not run_pcm:
                steps.append({"type": "audio", "sample_rate": frame.fields["sample_rate"],
                              "num_channels": frame.fields["num_channels"], "frames": 0,
                              "frame_samples": len(frame.fields["audio"]) // 2})
            run_pcm.append(frame.fields["audio"])
            steps[-1]["frames"] += 1
            continue
        if run_pcm:
            pcm = b"".join(run_pcm)
            steps[-1].update(samples=len(pcm) // 2, level_dbfs=level_dbfs(pcm))
            run_pcm = []
        if frame is not None:
            fields = dict(frame.fields)
            if frame.kind == "message":
                fields["data"] = json.loads(fields["data"])
            if "timestamp" in fields:
                fields["timestamp"] = "<timestamp>"
            steps.append({"type": frame.kind, **fields})
    return steps


def event_steps(events: list[EndpointEvent]) -> list[dict[str, Any]]:
    """Normalized events with their payloads; runs of audio as their canonical sample count."""
    steps: list[dict[str, Any]] = []
    for event in events:
        if event.type == "audio_delta":
            samples = len(event.audio or b"") // 2
            if steps and steps[-1]["type"] == "audio_delta":
                steps[-1]["samples"] += samples
            else:
                steps.append({"type": "audio_delta", "samples": samples})
            continue
        step: dict[str, Any] = {"type": event.type}
        if event.text is not None:
            step["text"] = event.text
        if event.data:
            step["data"] = event.data
        if isinstance(event.raw, dict):
            step["raw"] = {**event.raw, **({"timestamp": "<timestamp>"}
                                           if "timestamp" in event.raw else {})}
        steps.append(step)
    return steps


def stopped_speaking(event: EndpointEvent) -> bool:
    return event.type == "raw" and event.raw.get("data", {}).get("type") == "bot-stopped-speaking"


async def drive(uri: str) -> list[EndpointEvent]:
    """The golden call: the bot's greeting, one utterance (speech then a second of silence, in
    the runner's 20 ms chunks), its answer, hang up."""
    endpoint = PipecatEndpoint({"uri": uri, **SETTINGS}, EndpointContext(session_id="golden"))
    await endpoint.connect()
    events = endpoint.events()
    seen: list[EndpointEvent] = []

    async def until(predicate) -> None:
        while not seen or not predicate(seen[-1]):
            seen.append(await asyncio.wait_for(anext(events), 8))

    await until(stopped_speaking)
    await asyncio.sleep(0.3)  # the caller answers after hearing the silence
    line = PcmAudio.concat([tone_speech(USER_LINE, seed=42), PcmAudio.silence(1.0)])
    for chunk in line.chunks(20):
        await endpoint.send_audio(chunk)
    await until(lambda e: e.type == "input_transcript")
    await until(stopped_speaking)
    await asyncio.sleep(0.3)
    await endpoint.close()
    await until(lambda e: e.type == "closed")
    return seen


def recorded_exchange() -> dict[str, Any]:
    async def scenario():
        async with PipecatBot(BOT) as bot:
            events = await drive(bot.uri)
            return bot.calls[0], events

    call, events = run(scenario())
    return {"protocol": "pipecat frames (ProtobufFrameSerializer, frames.proto: text, audio, "
                        "transcription, message, interruption)",
            "adapter_settings": SETTINGS, "bot_settings": BOT, "user_turns": [USER_LINE],
            "evaluator_to_product": frame_steps(call.received),
            "product_to_evaluator": frame_steps(call.sent),
            "normalized_events": event_steps(events)}


def test_the_adapter_and_the_bot_produce_the_golden_exchange():
    actual = recorded_exchange()
    if UPDATE:
        GOLDEN.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert actual["evaluator_to_product"] == golden["evaluator_to_product"]
    assert actual["product_to_evaluator"] == golden["product_to_evaluator"]
    assert actual["normalized_events"] == golden["normalized_events"]


def concrete(step: dict[str, Any]) -> list[bytes]:
    """The frames a fixture step stands for (audio: a tone of the recorded shape)."""
    if step["type"] == "audio":
        total, size = step["samples"], step["frame_samples"]
        tone = tone_speech("golden replay", seed=5, sample_rate_hz=step["sample_rate"]).samples
        samples = np.resize(tone, total)
        return [audio_frame(PcmAudio(samples[i:i + size], step["sample_rate"]), id=i + 1)
                for i in range(0, total, size)]
    fields = {k: v for k, v in step.items() if k != "type"}
    if step["type"] == "message":
        fields["data"] = json.dumps(fields["data"])
    if fields.get("timestamp") == "<timestamp>":
        fields["timestamp"] = "2026-01-01T00:00:00.000+00:00"
    return [encode_frame(step["type"], **fields)]


def test_the_adapter_replays_the_golden_exchange_against_a_scripted_bot():
    """A bot that plays the recorded product frames (waiting for the caller's audio before the
    answer): the adapter sends exactly the recorded evaluator frames and makes the recorded
    events of the product's."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    caller_samples = sum(s["samples"] for s in golden["evaluator_to_product"]
                         if s["type"] == "audio")
    received: list[DecodedFrame] = []

    async def bot(ws: ServerConnection) -> None:
        async def hear_the_caller() -> None:
            async for message in ws:
                received.append(decode_frame(message))
                heard = sum(len(f.fields.get("audio", b"")) // 2 for f in received)
                if heard >= caller_samples:
                    return

        for step in golden["product_to_evaluator"]:
            if step["type"] == "transcription":  # the answer: after the caller has spoken
                await hear_the_caller()
            for frame in concrete(step):
                await ws.send(frame)
        with contextlib.suppress(ConnectionClosed):
            async for message in ws:
                received.append(decode_frame(message))

    async def scenario():
        async with serve(bot, "127.0.0.1", 0, compression=None) as server:
            return await drive(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/")

    events = run(scenario())
    assert frame_steps(received) == golden["evaluator_to_product"]
    assert event_steps(events) == golden["normalized_events"]
