"""The Twilio adapter over real sockets against the Twilio bot double: the golden exchange, both
directions, payloads decoded and compared. Marks and clear on the listener's clock:
test_twilio_marks.py; closures, timeouts and the bot's own strictness: test_twilio_closures.py;
what they share: _twilio_calls.py.

Regenerate the golden after an intended protocol change with
``VOICELAB_UPDATE_GOLDEN=1 pytest tests/integration/test_twilio_endpoint.py`` and review the diff.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from _twilio_calls import Events, run, until
from scipy.signal import resample_poly

from voicelab.audio import PcmAudio, mulaw_decode, tone_speech
from voicelab.doubles.twilio import TwilioBot
from voicelab.endpoints import EndpointContext
from voicelab.endpoints._g711_line import LINE_LATENCY_MS
from voicelab.endpoints._socket import LOOP_STAMPED_ATTRIBUTE
from voicelab.endpoints.twilio import TwilioEndpoint

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
    # which messages the loop stamped (queued together in one read) depends on the machine
    normalized = collapse([{"event": e.type, **({} if e.type == "audio_delta" else {
        k: v for k, v in e.data.items() if k != LOOP_STAMPED_ATTRIBUTE})} for e in events])
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
