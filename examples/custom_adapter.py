"""A custom endpoint adapter for a product that speaks its own JSON dialect, and that product.

Use it from a run config (the run file's folder is on the import path):

    endpoint:
      adapter: custom_adapter.EchoDialectAdapter
      settings:
        uri: ws://127.0.0.1:8770/

The "echo dialect" product (``serve_echo_product`` below) carries audio as base64 inside JSON
and names its events differently from voicelab's protocol v1:

    evaluator -> product: {"event": "start", "session": ..., "payload": {...}}
                          {"event": "audio", "pcm_b64": ...}   {"event": "end_of_turn"}
    product -> evaluator: {"event": "speech", "pcm_b64": ...}  {"event": "text", "value": ...}
                          {"event": "heard", "value": ...}     {"event": "turn_done"}
                          {"event": "goodbye"}

The adapter translates that dialect into voicelab's normalized events. Run this file to see one
exchange: ``python examples/custom_adapter.py``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voicelab.audio import PcmAudio, tone_speech
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent

logger = logging.getLogger(__name__)


class EchoDialectAdapter:
    """Adapter for the echo-dialect product: ``EchoDialectAdapter(settings, context)``."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": False,
        "tool_events": False,
        "input_transcripts": True,
        "output_transcripts": True,
    }

    def __init__(self, settings: Mapping[str, Any], context: EndpointContext):
        self.check_settings(settings)
        self._uri = str(settings["uri"])
        self._timeout = float(settings.get("connect_timeout_seconds", 5.0))
        self._context = context
        self._queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
        self._ws: ClientConnection | None = None
        self._receiver: asyncio.Task[None] | None = None

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        unknown = set(settings) - {"uri", "connect_timeout_seconds"}
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
        if not str(settings.get("uri", "")).startswith(("ws://", "wss://")):
            raise ValueError("settings.uri must be a ws:// or wss:// URI")

    async def connect(self) -> None:
        try:
            self._ws = await asyncio.wait_for(connect(self._uri, compression=None), self._timeout)
        except (OSError, TimeoutError) as error:
            raise EndpointError(f"cannot reach the echo product: {type(error).__name__}",
                                code="connection_refused") from None
        await self._ws.send(json.dumps({"event": "start", "session": self._context.session_id,
                                        "payload": dict(self._context.data)}))
        self._receiver = asyncio.create_task(self._receive(self._ws))

    async def _receive(self, ws: ClientConnection) -> None:
        try:
            async for message in ws:  # only timestamp and enqueue here
                self._queue.put_nowait((self._context.clock_ns(), message))
        except ConnectionClosed:
            pass
        self._queue.put_nowait((self._context.clock_ns(), None))

    async def _send(self, message: dict[str, Any]) -> None:
        if self._ws is None:
            raise EndpointError("not connected", code="connection_closed")
        try:
            await self._ws.send(json.dumps(message))
        except ConnectionClosed:
            raise EndpointError("the echo product closed the connection",
                                code="connection_closed") from None

    async def send_audio(self, audio: PcmAudio) -> None:
        await self._send({"event": "audio",
                          "pcm_b64": base64.b64encode(audio.to_bytes()).decode("ascii")})

    async def commit_turn(self) -> None:
        await self._send({"event": "end_of_turn"})

    async def interrupt(self) -> None:
        return None  # the dialect has no cancel; capabilities say interruption: false

    async def events(self) -> AsyncIterator[EndpointEvent]:
        while True:
            received_ns, message = await self._queue.get()
            if message is None:
                code = self._ws.close_code if self._ws is not None else None
                yield EndpointEvent("closed", received_ns,
                                    data={"reason": "connection closed", "code": code})
                return
            yield self._normalize(received_ns, json.loads(message))

    @staticmethod
    def _normalize(received_ns: int, message: dict[str, Any]) -> EndpointEvent:
        kind = message.get("event")
        if kind == "speech":
            audio = base64.b64decode(message["pcm_b64"])
            raw = {**message, "pcm_b64": f"<{len(audio)} bytes>"}
            return EndpointEvent("audio_delta", received_ns, audio=audio, raw=raw)
        if kind == "text":
            return EndpointEvent("transcript_final", received_ns, text=message["value"],
                                 raw=message)
        if kind == "heard":
            return EndpointEvent("input_transcript", received_ns, text=message["value"],
                                 raw=message)
        if kind == "turn_done":
            return EndpointEvent("turn_complete", received_ns, data={"status": "completed"},
                                 raw=message)
        if kind == "goodbye":
            return EndpointEvent("conversation_complete", received_ns, raw=message)
        logger.debug("echo dialect: unknown event %r", kind)
        return EndpointEvent("raw", received_ns, raw=message)

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._receiver is not None:
            await asyncio.gather(self._receiver, return_exceptions=True)


async def serve_echo_product(host: str = "127.0.0.1", port: int = 0, *,
                             turns_before_goodbye: int = 2) -> Server:
    """The echo-dialect product: speaks the user's audio back at half volume."""

    async def session(ws: ServerConnection) -> None:
        heard = bytearray()
        turns = 0
        async for message in ws:
            event = json.loads(message)
            if event.get("event") == "audio":
                heard.extend(base64.b64decode(event["pcm_b64"]))
            elif event.get("event") == "end_of_turn":
                turns += 1
                echo = (np.frombuffer(bytes(heard), dtype="<i2") // 2).astype("<i2").tobytes()
                seconds = len(heard) / 48_000
                await ws.send(json.dumps({"event": "heard", "value": f"{seconds:.1f} s of audio"}))
                await ws.send(json.dumps({"event": "speech",
                                          "pcm_b64": base64.b64encode(echo).decode("ascii")}))
                await ws.send(json.dumps({"event": "text",
                                          "value": f"I heard {seconds:.1f} seconds of audio."}))
                await ws.send(json.dumps({"event": "turn_done"}))
                heard.clear()
                if turns >= turns_before_goodbye:
                    await ws.send(json.dumps({"event": "goodbye"}))

    return await serve(session, host, port, compression=None)


async def _demo() -> None:
    server = await serve_echo_product(turns_before_goodbye=1)
    port = server.sockets[0].getsockname()[1]
    adapter = EchoDialectAdapter({"uri": f"ws://127.0.0.1:{port}/"},
                                 EndpointContext(session_id="demo"))
    await adapter.connect()
    await adapter.send_audio(tone_speech("Hello there.", seed=1))
    await adapter.commit_turn()
    async for event in adapter.events():
        print(event.type, event.text or "")
        if event.type == "conversation_complete":
            await adapter.close()
    server.close()
    await server.wait_closed()


if __name__ == "__main__":
    asyncio.run(_demo())
