"""A reply that arrives while the evaluator's loop is blocked is stamped when it arrived, not
when the loop got round to it: the WebRTC bot double runs in its own thread (its own loop, so
the block does not hold it) and its RTP send stamps are the truth."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from voicelab.audio import SILENCE_THRESHOLD, PcmAudio
from voicelab.endpoints import EndpointContext

pytest.importorskip("aiortc")

from voicelab.doubles.webrtc import WebRtcBot  # noqa: E402
from voicelab.doubles.webrtc._call import ReplyRecord  # noqa: E402
from voicelab.endpoints.webrtc import WebRtcEndpoint  # noqa: E402

MS = 1_000_000
BLOCK_SECONDS = 0.6
#: the greeting starts this long into the call, so inside the block that follows the connect
GREETING_DELAY_MS = 200.0
#: the stamp of the first audible audio against the bot's send stamp of its first audible
#: sample: loopback delivery, the packet's own 20 ms (the onset is read to the packet) and the
#: clocks' pairing; a loop-read stamp would be late by most of the block
TOLERANCE_MS = 25.0


class BotThread:
    """The bot double serving in a thread of its own until :meth:`stop`."""

    def __init__(self) -> None:
        self.url = ""
        self.reply: ReplyRecord | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        async with WebRtcBot({"greeting": "Hello there, how are you today?",
                              "greeting_delay_ms": GREETING_DELAY_MS}) as bot:
            self.url = bot.url
            self._ready.set()
            await self._stop.wait()
            self.reply = bot.calls[0].replies[0] if bot.calls and bot.calls[0].replies else None

    def __enter__(self) -> BotThread:
        self._thread.start()
        assert self._ready.wait(30), "the bot did not start"
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


async def onset_after_a_blocked_loop(url: str) -> tuple[int, int, int, str, float]:
    """Connect, block the loop while the greeting starts, then read the call; the first
    audible sample's stamp, the block's start and end, how arrivals were stamped and the
    longest a packet waited for the adapter's consumer."""
    adapter = WebRtcEndpoint({"url": url, "ice_host_addresses": ["127.0.0.1"]},
                             EndpointContext(session_id="stamps"))
    await adapter.connect()
    await adapter.send_audio(PcmAudio.silence(2.0))
    blocked_ns = time.perf_counter_ns()
    time.sleep(BLOCK_SECONDS)  # the evaluator's loop is busy elsewhere: nothing is read
    unblocked_ns = time.perf_counter_ns()
    onset_ns = 0
    events = adapter.events()
    async for event in events:
        if event.type == "audio_delta" and event.audio:
            samples = np.frombuffer(event.audio, dtype=np.int16)
            loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SILENCE_THRESHOLD)
            if loud.size:
                onset_ns = event.received_ns + int(loud[0] * 1e9 / 24_000)
                break
    stamps = adapter.arrival_stamps()
    await adapter.close()
    behind_ms = -1.0
    async for event in events:  # the closing events: the call's facts, then closed
        if event.type == "raw" and "webrtc" in event.data:
            behind_ms = event.data["webrtc"]["received"]["most_behind_ms"]
    return onset_ns, blocked_ns, unblocked_ns, stamps, behind_ms


def test_a_reply_arriving_while_the_loop_is_blocked_keeps_its_arrival_stamp():
    with BotThread() as bot:
        onset_ns, blocked_ns, unblocked_ns, stamps, behind_ms = asyncio.run(
            onset_after_a_blocked_loop(bot.url))
    assert stamps == "kernel_stream"
    reply = bot.reply
    assert reply is not None and reply.speech_start_ns is not None
    # the greeting began while the loop was blocked, early enough to be read late
    assert blocked_ns < reply.speech_start_ns < unblocked_ns - 100 * MS
    error_ms = (onset_ns - reply.speech_start_ns) / MS
    assert abs(error_ms) < TOLERANCE_MS, error_ms
    # the call says how stale the audio was when it was read (the block, less what came first)
    assert behind_ms >= (unblocked_ns - reply.speech_start_ns) / MS - TOLERANCE_MS, behind_ms
