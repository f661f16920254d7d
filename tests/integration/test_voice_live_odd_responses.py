"""``speech_provider: voice_live`` against a service whose ``response`` is not a JSON object
(a string in ``response.created``, a list or a number in ``response.done``): the provider
neither crashes nor hangs. Audio that arrived is the synthesis; without audio it is a clear
:class:`ExecutionError`. A scripted WebSocket service on 127.0.0.1 plays the service."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
from websockets.asyncio.server import ServerConnection, serve

from voicelab.config import Providers, VoiceLiveProvider
from voicelab.errors import ExecutionError
from voicelab.speech import SpeechContext
from voicelab.speech._voice_live import VoiceLiveSpeechProvider

TEXT = "Your table is booked."
PCM = (np.arange(2400, dtype=np.int16) % 200 * 50).astype("<i2").tobytes()  # 0.1 s at 24 kHz


def events(*, audio: bool, created: object, done: object) -> list[dict[str, object]]:
    """A response's events, its ``response`` fields replaced by ``created`` and ``done``."""
    scripted: list[dict[str, object]] = [{"type": "response.created", "response": created}]
    if audio:
        scripted += [{"type": "response.audio.delta",
                      "delta": base64.b64encode(PCM).decode("ascii")},
                     {"type": "response.audio_transcript.done", "transcript": TEXT}]
    return [*scripted, {"type": "response.done", "response": done}]


def synthesize(scripted: list[dict[str, object]]) -> object:
    """What the provider returns (or raises) for one synthesis against ``scripted``."""
    async def service(ws: ServerConnection) -> None:
        async for frame in ws:
            if json.loads(frame).get("type") == "response.create":
                for event in scripted:
                    await ws.send(json.dumps(event))

    async def scenario() -> object:
        async with serve(service, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            context = SpeechContext(providers=Providers(voice_live=VoiceLiveProvider(
                endpoint=f"http://127.0.0.1:{port}", api_key="speech-key-0123456789")),
                environ={})
            provider = VoiceLiveSpeechProvider({"response_timeout_seconds": 5}, context)
            try:
                return await asyncio.wait_for(provider.synthesize(TEXT, voice=None, seed=1), 10)
            except ExecutionError as error:
                return error
            finally:
                await provider.aclose()

    return asyncio.run(scenario())


def test_a_response_that_is_not_an_object_still_gives_the_audio_that_arrived() -> None:
    for created, done in (("resp_1", ["completed"]), (None, 7), ([1, 2], "completed")):
        audio = synthesize(events(audio=True, created=created, done=done))
        assert not isinstance(audio, BaseException), (created, done, audio)
        assert audio.to_bytes() == PCM


def test_a_response_that_is_not_an_object_and_held_no_audio_is_a_clear_error() -> None:
    error = synthesize(events(audio=False, created="garbage", done="garbage"))
    assert isinstance(error, ExecutionError)
    assert str(error) == "voice_live: the response held no audio"
