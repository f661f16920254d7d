"""The Twilio adapter over real sockets: against the Twilio bot double (the golden exchange, both
directions, payloads decoded and compared), against scripted products (marks echoed on the
listener's clock, a clear flushing it, closures), and the bot's own strictness.

Regenerate the golden after an intended protocol change with
``VOICELAB_UPDATE_GOLDEN=1 pytest tests/integration/test_twilio_endpoint.py`` and review the diff.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.signal import resample_poly
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voicelab.audio import PcmAudio, mulaw_decode, mulaw_encode, tone_speech
from voicelab.doubles.twilio import TwilioBot
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent
from voicelab.endpoints._g711_line import LINE_LATENCY_MS
from voicelab.endpoints.twilio import TwilioEndpoint
from voicelab.recording import ATTRIBUTES, EventType, Recording, ReportedAttributes
from voicelab.runner._playback import PlaybackClock

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "twilio_exchange.json"
UPDATE = os.environ.get("VOICELAB_UPDATE_GOLDEN") == "1"

SESSION = "golden-call"
DATA = {"session_id": SESSION, "context": {"topic": "table booking", "party": 2}}
GREETING = "Hello! Thanks for calling the booking line. How can I help you today?"
BARGE = "Wait, one thing first."
BOT = {"burst": True, "greeting": GREETING, "reply_text": "Of course, go ahead.",
       "reply_latency_ms": 100}
CHUNK = 2400  # the line hands the adapter 100 ms at a time, as the runner does by default
DELAY_8K = round(LINE_LATENCY_MS * 8)  # the adapter's conversion delay, in 8 kHz samples


def run(coroutine: Awaitable[Any], timeout: float = 30) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


async def until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.01)


class Line:
    """The caller's side as the runner drives it: every 100 ms the next 100 ms of what the
    caller says, silence between utterances."""

    def __init__(self, endpoint: TwilioEndpoint):
        self.endpoint = endpoint
        self.pending = np.zeros(0, dtype=np.int16)
        self.sent: list[np.ndarray] = []
        self._task: asyncio.Task[None] | None = None

    def say(self, audio: PcmAudio) -> None:
        self.pending = np.concatenate([self.pending, audio.samples])

    @property
    def idle(self) -> bool:
        return self.pending.size == 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        start = time.perf_counter_ns()
        while True:
            chunk = np.zeros(CHUNK, dtype=np.int16)
            take = self.pending[:CHUNK]
            chunk[:take.size] = take
            self.pending = self.pending[take.size:]
            await self.endpoint.send_audio(PcmAudio(chunk))
            self.sent.append(chunk)
            due = start + len(self.sent) * 100_000_000
            await asyncio.sleep(max(0.0, (due - time.perf_counter_ns()) / 1e9))


class Events:
    """Consumes ``endpoint.events()`` for the whole call."""

    def __init__(self, endpoint: TwilioEndpoint, on_event: Callable[[EndpointEvent], None]
                 = lambda event: None):
        self.items: list[EndpointEvent] = []
        self.on_event = on_event
        self.task = asyncio.create_task(self._consume(endpoint))

    async def _consume(self, endpoint: TwilioEndpoint) -> None:
        async for event in endpoint.events():
            self.items.append(event)
            self.on_event(event)

    def of(self, kind: str) -> list[EndpointEvent]:
        return [e for e in self.items if e.type == kind]


# --- the golden exchange ------------------------------------------------------------------------

def collapse(steps: list[Any]) -> list[Any]:
    """Runs of media messages become one step."""
    out: list[Any] = []
    for step in steps:
        if not (out and step == out[-1] and isinstance(step, dict)
                and step.get("event") == "media"):
            out.append(step)
    return out


def stable(message: dict[str, Any], sids: dict[str, str]) -> dict[str, Any]:
    """``message`` with its volatile values as placeholders: SIDs, sequence numbers, chunk
    counters, timestamps and audio (each checked on its own below)."""
    text = json.dumps(message)
    for value, name in sids.items():
        text = text.replace(value, name)
    message = json.loads(text)
    if "sequenceNumber" in message:
        message["sequenceNumber"] = "<n>"
    parameters = (message.get("start") or {}).get("customParameters")
    if isinstance(parameters, dict) and "traceparent" in parameters:
        parameters["traceparent"] = "<traceparent>"  # the trial's, checked on its own below
    media = message.get("media")
    if isinstance(media, dict):
        media["payload"] = "<mu-law>"
        for key in ("chunk", "timestamp"):
            if key in media:
                media[key] = f"<{key}>"
    return message


def test_the_adapter_and_the_bot_produce_the_golden_exchange():
    async def call():
        async with TwilioBot(BOT) as bot:
            context = EndpointContext(session_id=SESSION, data=DATA)
            endpoint = TwilioEndpoint({"uri": bot.uri, "custom_parameters": {
                "caller": "+15550100"}}, context)
            await endpoint.connect()
            events = Events(endpoint)
            line = Line(endpoint)
            line.start()
            await until(lambda: events.of("audio_delta"))
            await asyncio.sleep(0.5)
            line.say(tone_speech(BARGE, seed=42))  # over the greeting: the bot clears
            await until(lambda: events.of("interruption"))
            await until(lambda: line.idle)
            await endpoint.send_dtmf("12#")
            record = bot.calls[0]
            await until(lambda: len(record.replies) == 2 and record.replies[1].mark_echoed_ns)
            await asyncio.sleep(0.1)
            await line.stop()
            await endpoint.close()
            await events.task
            return record, events.items, np.concatenate(line.sent), context

    record, events, line_audio, context = run(call())
    assert record.violations == [] and record.stopped
    start = record.start
    assert start is not None
    sids = {start["accountSid"]: "<account_sid>", start["callSid"]: "<call_sid>",
            start["streamSid"]: "<stream_sid>"}
    caller, bot = record.side("caller"), record.side("bot")
    exchange = {
        "caller": collapse([stable(m, sids) for m in caller]),
        "bot": collapse([stable(m, sids) for m in bot]),
    }
    normalized = collapse([{"event": e.type, **({} if e.type == "audio_delta" else e.data)}
                           for e in events])
    # audio_delta runs collapse like media runs
    normalized = [step for i, step in enumerate(normalized)
                  if not (i and step == normalized[i - 1])]
    actual = {"protocol": "twilio media streams (voicelab as Twilio)", "data": DATA,
              "bot": BOT, "exchange": exchange, "normalized_events": normalized}
    if UPDATE:
        GOLDEN.write_text(json.dumps(actual, indent=2) + "\n", encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert exchange["caller"] == golden["exchange"]["caller"]
    assert exchange["bot"] == golden["exchange"]["bot"]
    assert normalized == golden["normalized_events"]

    # what the placeholders stand for
    numbered = [m for m in caller if m["event"] != "connected"]
    assert [m["sequenceNumber"] for m in numbered] == [str(n) for n in
                                                       range(1, len(numbered) + 1)]
    media = [m["media"] for m in caller if m["event"] == "media"]
    assert [m["chunk"] for m in media] == [str(n) for n in range(1, len(media) + 1)]
    assert [m["timestamp"] for m in media] == [str(20 * n) for n in range(len(media))]
    # the bot joins the trial's trace: its spans are children of the span sent
    assert start["customParameters"] == {"session_id": SESSION, "caller": "+15550100",
                                         "context": '{"topic":"table booking","party":2}',
                                         "traceparent": context.traceparent}

    # caller -> bot: the line the test spoke, at 8 kHz, 3.6 ms later, within mu-law's error
    heard = mulaw_decode(bytes(record.caller_audio)).samples.astype(float)
    spoken = resample_poly(line_audio.astype(float), 1, 3)  # an independent decimator
    # every frame arrived, whole, but those of the last chunk still queued at the hang-up
    assert heard.size % 160 == 0 and spoken.size - 800 <= heard.size <= spoken.size
    error = heard[DELAY_8K:] - spoken[:heard.size - DELAY_8K]
    loud = np.abs(spoken) > 1000
    assert loud.sum() > 4000  # the barge-in speech is in there
    # mu-law quantization is about 3 % of a sample's size; the two lowpass filters differ
    # well below that for tone speech (all its energy is under 3.4 kHz)
    rms = float(np.sqrt(np.mean(spoken[loud] ** 2)))
    assert float(np.sqrt(np.mean(error ** 2))) < 0.03 * rms

    # bot -> caller: what the adapter delivered is the bot's mu-law at 24 kHz, 3.6 ms later
    replies = [m for m in bot if m["event"] == "media"]
    greeting = b"".join(base64.b64decode(m["media"]["payload"])
                        for m in replies[:record.replies[0].frames])
    delivered = np.frombuffer(b"".join(e.audio or b"" for e in events
                                       if e.type == "audio_delta"), dtype="<i2")
    assert delivered.size == 3 * sum(len(base64.b64decode(m["media"]["payload"]))
                                     for m in replies)
    expected = resample_poly(mulaw_decode(greeting).samples.astype(float), 3, 1)
    delay = round(LINE_LATENCY_MS * 24)
    got = delivered[delay:expected.size].astype(float)
    error = got - expected[:expected.size - delay]
    rms = float(np.sqrt(np.mean(expected ** 2)))
    assert float(np.sqrt(np.mean(error ** 2))) < 0.02 * rms  # two interpolators, same signal


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


async def scripted_product(script: Callable[[ServerConnection, list[tuple[int, dict]]],
                                            Awaitable[None]], body: Callable[[str], Awaitable[Any]]
                           ) -> tuple[Any, list[tuple[int, dict]]]:
    """Serve ``script`` (after reading connected and start) and run ``body(uri)`` against it;
    returns what ``body`` returned and every message the product received, stamped."""
    received: list[tuple[int, dict]] = []

    async def product(ws: ServerConnection) -> None:
        async def reader() -> None:
            try:
                async for message in ws:
                    received.append((time.perf_counter_ns(), json.loads(message)))
            except ConnectionClosed:
                pass

        reading = asyncio.create_task(reader())
        await until(lambda: len(received) >= 2)
        try:
            await script(ws, received)
        except ConnectionClosed:
            pass
        await reading

    async with serve(product, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        return await body(f"ws://127.0.0.1:{port}/"), received


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


# --- closures, timeouts and the calls the runner never makes ------------------------------------

@pytest.mark.parametrize("code, expected", [
    (1000, ["conversation_complete", "closed"]),  # the bot hung up
    (1011, ["error", "closed"]),
])
def test_the_products_close(code, expected):
    async def script(ws: ServerConnection, received: list[tuple[int, dict]]) -> None:
        await ws.close(code, "bye")

    async def body(uri: str) -> list[EndpointEvent]:
        endpoint = TwilioEndpoint({"uri": uri}, EndpointContext(session_id="s"))
        await endpoint.connect()
        events = Events(endpoint)
        await events.task
        line = PcmAudio(np.zeros(480, dtype=np.int16))
        if code == 1000:  # a caller talking on after the bot hung up is no failure of the line
            await endpoint.send_audio(line)
        else:
            with pytest.raises(EndpointError) as closed:
                await endpoint.send_audio(line)
            assert closed.value.code == "connection_closed"
        return events.items

    events, _ = run(scripted_product(script, body))
    assert [e.type for e in events] == expected
    assert events[-1].data == {"reason": "bye", "code": code, "initiated_by": "product"}
    if code != 1000:
        assert events[0].data["code"] == "connection_closed"


def test_a_silent_product_times_out_and_the_runner_only_calls_are_harmless():
    async def script(ws: ServerConnection, received: list[tuple[int, dict]]) -> None:
        pass  # listens until the caller hangs up

    async def body(uri: str) -> list[EndpointEvent]:
        endpoint = TwilioEndpoint({"uri": uri, "receive_timeout_seconds": 0.3},
                                  EndpointContext(session_id="s"))
        await endpoint.connect()
        await endpoint.commit_turn()
        await endpoint.interrupt()
        events = Events(endpoint)
        await events.task
        await endpoint.close()
        return events.items

    events, received = run(scripted_product(script, body))
    assert [e.type for e in events] == ["error", "closed"]
    assert events[0].data["code"] == "receive_timeout"
    assert events[1].data["initiated_by"] == "adapter"
    assert [m["event"] for _, m in received] == ["connected", "start"]  # no stop: it timed out


def test_connecting_to_nothing_is_refused():
    async def body() -> None:
        endpoint = TwilioEndpoint({"uri": "ws://127.0.0.1:9/"}, EndpointContext(session_id="s"))
        with pytest.raises(EndpointError) as refused:
            await endpoint.connect()
        assert refused.value.code == "connection_refused"
        await endpoint.close()

    run(body())


def test_dtmf_follows_the_line_audio_already_queued():
    async def script(ws: ServerConnection, received: list[tuple[int, dict]]) -> None:
        pass  # listens until the caller hangs up

    async def body(uri: str) -> None:
        endpoint = TwilioEndpoint({"uri": uri}, EndpointContext(session_id="s"))
        await endpoint.connect()
        events = Events(endpoint)
        await endpoint.send_audio(PcmAudio(np.zeros(2400, dtype=np.int16)))  # 5 frames
        await endpoint.send_dtmf("4*")
        with pytest.raises(ValueError):
            await endpoint.send_dtmf("4a")
        await asyncio.sleep(0.3)
        await endpoint.close()
        await events.task

    _, received = run(scripted_product(script, body))
    kinds = [m["event"] for _, m in received]
    assert kinds == ["connected", "start", *["media"] * 5, "dtmf", "dtmf", "stop"]
    assert [m["dtmf"]["digit"] for _, m in received if m["event"] == "dtmf"] == ["4", "*"]
    stamps = [ns for ns, m in received if m["event"] == "media"]
    # one frame every 20 ms, not five at once: the five span 80 ms (less scheduling jitter)
    assert stamps[-1] - stamps[0] >= 50_000_000


def test_the_bot_closes_on_a_protocol_violation():
    async def call() -> tuple[list[str], list[EndpointEvent]]:
        async with TwilioBot({"greeting": ""}) as bot:
            from websockets.asyncio.client import connect

            async with connect(bot.uri) as ws:
                await ws.send(json.dumps({"event": "connected", "protocol": "Call",
                                          "version": "1.0.0"}))
                await ws.send(json.dumps({"event": "media", "sequenceNumber": "1"}))
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
            return bot.calls[0].violations, []

    violations, _ = run(call())
    assert violations == ["expected start after connected, got 'media'"]


@pytest.mark.parametrize("field, value, violation", [
    ("dtmf", "5", "malformed dtmf '5'"),
    ("media", "x", "media chunk None (expected 1), track None, timestamp None"),
    ("mark", "x", "echo of a mark never sent (or echoed twice): None"),
])
def test_a_field_that_is_not_an_object_is_a_violation(field, value, violation):
    start = {"accountSid": "AC1", "callSid": "CA1", "streamSid": "MZ1", "tracks": ["inbound"],
             "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
             "customParameters": {}}

    async def call() -> tuple[list[str], int | None]:
        async with TwilioBot({"greeting": ""}) as bot:
            from websockets.asyncio.client import connect

            async with connect(bot.uri) as ws:
                await ws.send(json.dumps({"event": "connected", "protocol": "Call",
                                          "version": "1.0.0"}))
                await ws.send(json.dumps({"event": "start", "sequenceNumber": "1",
                                          "streamSid": "MZ1", "start": start}))
                await ws.send(json.dumps({"event": field, "sequenceNumber": "2",
                                          "streamSid": "MZ1", field: value}))
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
            return bot.calls[0].violations, closed.value.rcvd.code if closed.value.rcvd else None

    violations, code = run(call())
    assert violations == [violation]
    assert code == 1008
