"""A minimal pipecat bot served over SmallWebRTC, with no cloud services: what voicelab's
``adapter: webrtc`` is pointed at in docs/adapters/webrtc.md's worked example.

    python3 -m venv /work/venv-pipecat && /work/venv-pipecat/bin/pip install "pipecat-ai[webrtc]"
    /work/venv-pipecat/bin/python examples/pipecat-smallwebrtc/bot.py --port 7860

It serves pipecat's SmallWebRTC offer endpoint (``POST /api/offer``, trickle ``PATCH
/api/offer``: the contract of pipecat's development runner, through pipecat's own
``SmallWebRTCRequestHandler``) and runs one pipecat pipeline per call: the transport's input,
a canned-reply processor, the transport's output, with pipecat's RTVI (its ``PipelineWorker``
adds the RTVI processor and observer, so the caller gets ``bot-started-speaking``,
``bot-output`` and the rest on the data channel). The processor stands in for STT -> LLM ->
TTS: it greets when the client connects, detects the end of each utterance by its energy
(600 ms under the threshold) and answers with a tone "sentence". It prints one JSON line per
thing it did with ``time.perf_counter_ns`` stamps (``reply_queued``: when its audio was handed
to pipecat's output transport, which then paces and encodes it: not an RTP send stamp).

This file is an example, not part of voicelab: it runs in pipecat's own environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import numpy as np
from aiohttp import web
from pipecat.frames.frames import (
    Frame,
    InputAudioRawFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.transports.base_transport import TransportParams
from pipecat.transports.smallwebrtc.connection import SmallWebRTCConnection
from pipecat.transports.smallwebrtc.request_handler import (
    IceCandidate,
    SmallWebRTCPatchRequest,
    SmallWebRTCRequest,
    SmallWebRTCRequestHandler,
)
from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport

OUT_RATE_HZ = 24_000
IN_RATE_HZ = 16_000
SPEECH_RMS = 300.0
END_OF_SPEECH_S = 0.6
GREETING = "Hello! Thanks for calling. How can I help you today?"
REPLY = "Sure, that is booked."


def say(event: str, **details: object) -> None:
    print(json.dumps({"event": event, "ns": time.perf_counter_ns(), **details}), flush=True)


def tone_sentence(words: int, *, seed: int) -> bytes:
    """``words`` tone bursts of 250 ms with 80 ms gaps: speech-like audio, no TTS needed."""
    rng = np.random.default_rng(seed)
    pieces = []
    for _ in range(words):
        t = np.arange(int(0.25 * OUT_RATE_HZ)) / OUT_RATE_HZ
        pitch = rng.uniform(140, 260)
        envelope = np.minimum(1, np.minimum(t, t[::-1]) / 0.02)
        pieces.append(0.3 * envelope * np.sin(2 * np.pi * pitch * t))
        pieces.append(np.zeros(int(0.08 * OUT_RATE_HZ)))
    return (np.concatenate(pieces) * 32767).astype(np.int16).tobytes()


class CannedReply(FrameProcessor):
    """Greets, then answers each utterance (ended by 600 ms of low energy) with a tone reply."""

    def __init__(self) -> None:
        super().__init__()
        self._speaking = False
        self._last_loud = 0.0

    async def speak(self, text: str, *, seed: int) -> None:
        audio = tone_sentence(len(text.split()), seed=seed)
        say("reply_queued", text=text, audio_ms=len(audio) // 2 * 1000 // OUT_RATE_HZ)
        await self.push_frame(TTSStartedFrame())
        await self.push_frame(TTSTextFrame(text, aggregated_by="sentence"))
        await self.push_frame(TTSAudioRawFrame(audio=audio, sample_rate=OUT_RATE_HZ,
                                               num_channels=1))
        await self.push_frame(TTSStoppedFrame())

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame):
            samples = np.frombuffer(frame.audio, dtype=np.int16).astype(np.float64)
            loud = samples.size > 0 and float(np.sqrt(np.mean(samples ** 2))) > SPEECH_RMS
            now = time.monotonic()
            if loud:
                if not self._speaking:
                    say("user_speech_started")
                self._speaking, self._last_loud = True, now
            elif self._speaking and now - self._last_loud > END_OF_SPEECH_S:
                self._speaking = False
                say("user_speech_ended", detected_after_ms=round(END_OF_SPEECH_S * 1000))
                await self.speak(REPLY, seed=2)
            return  # the caller's audio goes no further
        await self.push_frame(frame, direction)


async def run_bot(connection: SmallWebRTCConnection) -> None:
    transport = SmallWebRTCTransport(webrtc_connection=connection, params=TransportParams(
        audio_in_enabled=True, audio_out_enabled=True, audio_in_sample_rate=IN_RATE_HZ,
        audio_out_sample_rate=OUT_RATE_HZ))
    replies = CannedReply()
    worker = PipelineWorker(Pipeline([transport.input(), replies, transport.output()]),
                            params=PipelineParams(audio_in_sample_rate=IN_RATE_HZ,
                                                  audio_out_sample_rate=OUT_RATE_HZ))

    @transport.event_handler("on_client_connected")
    async def _connected(transport: SmallWebRTCTransport, client: object) -> None:
        say("client_connected", pc_id=connection.pc_id)
        await replies.speak(GREETING, seed=1)

    @transport.event_handler("on_client_disconnected")
    async def _disconnected(transport: SmallWebRTCTransport, client: object) -> None:
        say("client_disconnected", pc_id=connection.pc_id)
        await worker.cancel()

    await PipelineRunner(handle_sigint=False).run(worker)


def app() -> web.Application:
    handler = SmallWebRTCRequestHandler()
    bots: set[asyncio.Task[None]] = set()

    async def started(connection: SmallWebRTCConnection) -> None:
        task = asyncio.create_task(run_bot(connection))
        bots.add(task)
        task.add_done_callback(bots.discard)

    async def offer(request: web.Request) -> web.Response:
        answer = await handler.handle_web_request(
            SmallWebRTCRequest.from_dict(await request.json()), started)
        return web.json_response(answer)

    async def candidates(request: web.Request) -> web.Response:
        body = await request.json()
        await handler.handle_patch_request(SmallWebRTCPatchRequest(
            pc_id=body["pc_id"], candidates=[IceCandidate(**c) for c in body["candidates"]]))
        return web.json_response({"status": "success"})

    application = web.Application()
    application.router.add_post("/api/offer", offer)
    application.router.add_patch("/api/offer", candidates)
    return application


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    args = parser.parse_args()
    print(json.dumps({"url": f"http://{args.host}:{args.port}"}), flush=True)
    web.run_app(app(), host=args.host, port=args.port, print=lambda *_: None)


if __name__ == "__main__":
    sys.exit(main())
