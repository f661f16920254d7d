"""The Twilio adapter's marks and clear on the listener's clock, over real sockets: a mark is
echoed when its audio has played (against the Twilio bot double), and a clear flushes the
listener and echoes the pending marks at once (against a scripted product).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

from _twilio_calls import Events, run, scripted_product, until
from websockets.asyncio.server import ServerConnection

from voicelab.audio import mulaw_encode, tone_speech
from voicelab.doubles.twilio import TwilioBot
from voicelab.endpoints import EndpointContext, EndpointEvent
from voicelab.endpoints.twilio import TwilioEndpoint
from voicelab.recording import ATTRIBUTES, EventType, Recording, ReportedAttributes
from voicelab.runner._playback import PlaybackClock

# --- marks and clear on the listener's clock -----------------------------------------------------

class MiniIntake:
    """Records product events as the runner's intake does, so the recording's listener places
    the audio and ``PlaybackClock`` answers the adapter's waits."""

    def __init__(self) -> None:
        self.recording = Recording(session_id="s", trace_id="t" * 32, root_span_id="r" * 16)
        self.playback = PlaybackClock(self.recording)

    def context(self) -> EndpointContext:
        return EndpointContext(session_id="s", playback=self.playback,
                               clock_ns=self.recording.clock_ns)

    def __call__(self, event: EndpointEvent) -> None:
        kinds = {"audio_delta": EventType.PRODUCT_AUDIO, "raw": EventType.PRODUCT_RAW,
                 "interruption": EventType.PRODUCT_INTERRUPTION,
                 "closed": EventType.PRODUCT_CLOSED, "error": EventType.PRODUCT_ERROR,
                 "conversation_complete": EventType.PRODUCT_CONVERSATION_COMPLETED}
        kind = kinds[event.type]
        model = ATTRIBUTES[kind]
        attributes = model.reported(event.data) if issubclass(model, ReportedAttributes) \
            else None
        self.recording.record(kind, attributes, source="product", direction="inbound",
                              at_ns=event.received_ns, turn_id="turn-000", raw=event.raw,
                              audio=event.audio if event.type == "audio_delta" else None)

    def of(self, kind: EventType) -> list[Any]:
        return [e for e in self.recording.events if e.type is kind]

    def monotonic(self, offset_ns: int) -> int:
        return self.recording.start_ns + offset_ns


def test_a_mark_is_echoed_when_its_audio_has_played_on_the_listeners_clock():
    """The bot sends 3.1 s of audio at once, then its mark: the echo comes when the listener
    has heard the last sample, not when the mark arrived."""
    intake = MiniIntake()

    async def call():
        async with TwilioBot({"burst": True, "barge_in": False,
                              "greeting": "Your table for two is booked for seven."}) as bot:
            endpoint = TwilioEndpoint({"uri": bot.uri}, intake.context())
            await endpoint.connect()
            events = Events(endpoint, intake)
            await until(lambda: bot.calls and bot.calls[0].replies
                        and bot.calls[0].replies[0].mark_echoed_ns)
            await endpoint.close()
            await events.task
            return bot.calls[0].replies[0]

    reply = run(call())
    audio = intake.of(EventType.PRODUCT_AUDIO)
    [mark] = intake.of(EventType.PRODUCT_RAW)
    assert mark.attributes["mark"] == "reply-0"
    played = intake.playback.played_at_ns(audio[-1].audio_end)  # the last sample, listener time
    assert played is not None
    played_ns, arrived_ns = intake.monotonic(played), intake.monotonic(mark.offset_ns)
    duration_ns = audio[-1].audio_end * 1_000_000_000 // 24_000
    assert duration_ns >= 2_000_000_000 and reply.frames * 20 * 1_000_000 >= duration_ns
    # every frame came at once, the mark right behind them: its audio played ~3 s later
    assert audio[-1].offset_ns - audio[0].offset_ns < 200_000_000
    assert played_ns - arrived_ns > duration_ns - 300_000_000
    # the echo reached the bot after the listener heard the last sample, and promptly
    assert played_ns <= reply.mark_echoed_ns < played_ns + 500_000_000


def media(seconds: float, sid: str, *, frame_ms: int = 20) -> list[str]:
    codes = mulaw_encode(tone_speech("one two three four five six seven eight nine ten",
                                     seed=3, sample_rate_hz=8000).samples[:int(seconds * 8000)])
    step = frame_ms * 8
    return [json.dumps({"event": "media", "streamSid": sid, "media": {
        "payload": base64.b64encode(codes[i:i + step]).decode()}})
        for i in range(0, len(codes), step)]


def sid_of(received: list[tuple[int, dict]]) -> str:
    return received[1][1]["streamSid"]


def test_a_clear_flushes_the_listener_and_echoes_the_pending_marks_at_once():
    intake = MiniIntake()
    times: dict[str, int] = {}

    async def script(ws: ServerConnection, received: list[tuple[int, dict]]) -> None:
        sid = sid_of(received)
        for message in media(2.0, sid):  # 2 s at once, like a bot in a hurry
            await ws.send(message)
        await ws.send(json.dumps({"event": "mark", "streamSid": sid, "mark": {"name": "m1"}}))
        await asyncio.sleep(0.3)
        times["clear"] = time.perf_counter_ns()
        await ws.send(json.dumps({"event": "clear", "streamSid": sid}))
        for message in media(0.2, sid):
            await ws.send(message)
        await ws.send(json.dumps({"event": "mark", "streamSid": sid, "mark": {"name": "m2"}}))
        await until(lambda: sum(m.get("event") == "mark" for _, m in received) == 2)
        await ws.close()

    async def body(uri: str) -> list[EndpointEvent]:
        endpoint = TwilioEndpoint({"uri": uri}, intake.context())
        await endpoint.connect()
        events = Events(endpoint, intake)
        await events.task
        return events.items

    events, received = run(scripted_product(script, body))
    [interruption] = [e for e in events if e.type == "interruption"]
    assert interruption.data == {"flush": True, "reason": "clear"}
    [recorded] = intake.of(EventType.PRODUCT_INTERRUPTION)
    # about 1.7 s of the 2 s had not played when the clear came (0.3 s after the audio)
    assert 1300 <= recorded.attributes["dropped_ms"] <= 1800
    echoes = [(ns, m["mark"]["name"]) for ns, m in received if m["event"] == "mark"]
    assert [name for _, name in echoes] == ["m1", "m2"]
    # m1 came back at the clear, long before its 2 s could have played; m2 after its 0.2 s
    assert echoes[0][0] - times["clear"] < 200_000_000
    assert echoes[1][0] - echoes[0][0] >= 150_000_000
    assert [e.type for e in events][-2:] == ["conversation_complete", "closed"]
