"""The SIP adapter against the SIP product double (written independently from the RFCs), in
one process over real sockets on 127.0.0.1: a call, both audio directions, keys by both
methods, the product hanging up, and every way a call fails (docs/adapters/sip.md)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio, tone_speech
from voicelab.config import SecretScrubber
from voicelab.doubles.sip import SipDouble
from voicelab.endpoints import EndpointContext, EndpointError, EndpointEvent
from voicelab.endpoints.sip import SipEndpoint

SHORT_AGENT = {"mode": "agent", "greeting": "Hello there.", "reply_text": "Noted, thanks.",
               "reply_latency_ms": 50, "vad_silence_ms": 300, "ring_ms": 20}
CHUNK = CANONICAL_SAMPLE_RATE_HZ // 50  # 20 ms


class Call:
    """A double and an adapter calling it; the events each side reported."""

    def __init__(self, double: dict[str, Any], settings: dict[str, Any] | None = None):
        self.double_settings = double
        self.settings = settings or {}
        self.truth: list[dict[str, Any]] = []
        self.events: list[EndpointEvent] = []
        self.double: SipDouble | None = None
        self.endpoint: SipEndpoint | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Call:
        self.double = SipDouble(self.double_settings, on_event=self.truth.append)
        uri = await self.double.start()
        context = EndpointContext(session_id="sip-test", scrubber=SecretScrubber(),
                                  clock_ns=time.perf_counter_ns)
        host = self.settings.get("host")  # a name for the double's address, e.g. localhost
        if host is not None:
            uri = uri.replace(self.double.host, host)
        settings = {key: value for key, value in self.settings.items() if key != "host"}
        self.endpoint = SipEndpoint({"uri": uri, **settings}, context)
        return self

    async def connect(self) -> None:
        assert self.endpoint is not None
        await self.endpoint.connect()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.endpoint is not None
        async for event in self.endpoint.events():
            self.events.append(event)

    async def until(self, done: Callable[[], bool], seconds: float = 10.0) -> None:
        # a wait's limit, not a timing: what it waits for comes within a few hundred ms, and
        # 10 s only ends a test whose call never delivers it
        deadline = time.monotonic() + seconds
        while not done():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.02)

    async def say(self, audio: np.ndarray, *, then_silence_seconds: float) -> None:
        """``audio`` then silence on the line, 20 ms at a time in real time."""
        assert self.endpoint is not None
        line = np.concatenate([audio, np.zeros(int(then_silence_seconds
                                                   * CANONICAL_SAMPLE_RATE_HZ), np.int16)])
        start = time.perf_counter()
        for index, offset in enumerate(range(0, len(line), CHUNK)):
            await self.endpoint.send_audio(PcmAudio(line[offset:offset + CHUNK]))
            await asyncio.sleep(max(0.0, start + (index + 1) * 0.02 - time.perf_counter()))

    def truth_of(self, event: str) -> list[dict[str, Any]]:
        return [entry for entry in self.truth if entry["event"] == event]

    def of(self, kind: str) -> list[EndpointEvent]:
        return [event for event in self.events if event.type == kind]

    def heard_seconds(self) -> float:
        return sum(len(e.audio or b"") for e in self.of("audio_delta")) / 2 \
            / CANONICAL_SAMPLE_RATE_HZ

    def facts(self) -> dict[str, Any]:
        [facts] = [e.raw for e in self.of("raw") if isinstance(e.raw, dict)
                   and e.raw.get("sip_event") == "call_facts"]
        return facts

    async def __aexit__(self, *exc_info: object) -> None:
        if self.endpoint is not None:
            await self.endpoint.close()
        if self._reader is not None:
            await asyncio.wait_for(self._reader, 10)
        if self.double is not None:
            await self.double.stop()


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


def test_a_call_carries_audio_both_ways_and_keeps_its_evidence() -> None:
    async def test() -> None:
        async with Call(SHORT_AGENT, {"username": "caller", "password": "s3cret-pw"}) as call:
            await call.connect()
            assert call.endpoint is not None and call.endpoint.negotiated is not None
            assert call.endpoint.negotiated.codec == "pcmu"
            await call.until(lambda: bool(call.truth_of("reply_sent")))  # the greeting
            speech = tone_speech("a table for two", seed=3,
                                 sample_rate_hz=CANONICAL_SAMPLE_RATE_HZ).samples
            await call.say(speech, then_silence_seconds=0.6)
            await call.until(lambda: len(call.truth_of("reply_sent")) >= 2)
            await call.say(np.zeros(0, np.int16), then_silence_seconds=0.3)
        # the double heard one utterance and answered it; voicelab heard both replies
        assert len(call.truth_of("caller_speech_ended")) == 1
        # (the double streams silence between its replies, as phones do: counted, not heard)
        [ended] = call.truth_of("call_ended")
        sent = int(ended["rtp_sent"])
        withheld = call.facts()["adapter"]["silence_not_delivered"]
        assert withheld > 0
        assert call.heard_seconds() + withheld * 0.02 == pytest.approx(sent * 0.02, abs=0.1)
        # arrival stamps never run backwards, and none precedes the double's first send
        stamps = [e.received_ns for e in call.of("audio_delta")]
        assert stamps == sorted(stamps)
        assert stamps[0] > int(call.truth_of("reply_sent")[0]["first_ns"])
        facts = call.facts()
        assert facts["sip"]["setup_ms"] > 0
        # (the double's last packets may still be on their way when the BYE ends the call)
        assert sent - 3 <= facts["rtp"]["received"]["packets"] <= sent
        assert facts["rtp"]["sent"]["packets"] > 50
        assert "s3cret-pw" not in json.dumps(facts)
        assert call.events[-1].type == "closed"
        assert call.events[-1].data["initiated_by"] == "evaluator"
        assert call.truth_of("bye_received")

    run(test)


@pytest.mark.parametrize("method", ["rfc4733", "info"])
def test_keys_reach_the_menu_by_either_method(method: str) -> None:
    async def test() -> None:
        async with Call({"mode": "ivr", "ring_ms": 20, "menu_latency_ms": 50},
                        {"dtmf": method}) as call:
            await call.connect()
            await call.until(lambda: bool(call.truth_of("prompt_started")))
            assert call.endpoint is not None
            await call.endpoint.send_audio(PcmAudio(np.zeros(CHUNK * 5, np.int16)))
            await call.endpoint.send_dtmf("1")
            await call.until(lambda: len(call.truth_of("prompt_started")) >= 2)
        [key] = call.truth_of("key_received")
        assert key["digit"] == "1" and key["method"] == ("rfc4733" if method == "rfc4733"
                                                         else "info")
        assert call.facts()["dtmf"]["sent"][0]["digit"] == "1"

    run(test)


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_a_uri_whose_host_is_a_name_resolves_and_calls(transport: str) -> None:
    async def test() -> None:
        async with Call(SHORT_AGENT, {"host": "localhost", "transport": transport}) as call:
            assert call.endpoint is not None and "@localhost:" in call.endpoint.settings.uri
            await call.connect()
            await call.until(lambda: bool(call.truth_of("reply_sent")))  # the greeting
        [invite] = call.truth_of("invite_received")
        assert invite["transport"] == transport.upper()
        assert call.heard_seconds() > 0.5
        messages = call.facts()["sip"]["messages"]
        assert messages[0]["start_line"].startswith("INVITE sip:agent@localhost:")

    run(test)


def test_the_product_hanging_up_completes_the_conversation() -> None:
    async def test() -> None:
        async with Call({**SHORT_AGENT, "hang_up_after_seconds": 0.5}) as call:
            await call.connect()
            await call.until(lambda: bool(call.of("closed")))
            assert call.endpoint is not None
            # audio after the product hung up is dropped, as on a phone
            await call.endpoint.send_audio(PcmAudio(np.zeros(CHUNK, np.int16)))
        kinds = [e.type for e in call.events if e.type != "audio_delta"]
        assert kinds[-2:] == ["conversation_complete", "closed"] or \
            kinds[-3:-1] == ["conversation_complete", "raw"]
        assert call.of("closed")[0].data["initiated_by"] == "product"

    run(test)


@pytest.mark.parametrize("double, settings, code, says", [
    ({"respond_with": 486}, {}, "busy", "486"),
    ({"respond_with": 603}, {}, "declined", "603"),
    ({"respond_with": 404}, {}, "not_found", "404"),
    ({"never_answer": True}, {"answer_timeout_seconds": 0.5}, "no_answer", "no_answer"),
    ({"require_auth": {"username": "caller", "password": "right"}},
     {"username": "caller", "password": "wrong-pw"}, "auth_refused", "auth"),
    ({"require_auth": {"username": "caller", "password": "right"}}, {}, "auth_refused", "401"),
])
def test_a_call_that_fails_names_the_sip_status(double: dict[str, Any],
                                                settings: dict[str, Any], code: str,
                                                says: str) -> None:
    async def test() -> None:
        async with Call({**SHORT_AGENT, **double}, settings) as call:
            with pytest.raises(EndpointError) as caught:
                await call.connect()
        assert caught.value.code == code
        assert says in str(caught.value)
        assert "wrong-pw" not in str(caught.value)

    run(test)


def test_digest_credentials_answer_a_challenge() -> None:
    async def test() -> None:
        async with Call({**SHORT_AGENT, "require_auth": {"username": "caller",
                                                         "password": "right",
                                                         "algorithm": "SHA-256"}},
                        {"username": "caller", "password": "right"}) as call:
            await call.connect()
            await call.until(lambda: bool(call.of("audio_delta")))
        assert "right" not in json.dumps(call.facts()["sip"]).replace("\"Right", "")

    run(test)


def test_no_audio_after_the_answer_ends_the_call_with_no_rtp() -> None:
    async def test() -> None:
        async with Call({**SHORT_AGENT, "no_media_after_answer": True},
                        {"rtp_timeout_seconds": 0.5}) as call:
            await call.connect()
            await call.until(lambda: bool(call.of("closed")))
        [error] = call.of("error")
        assert error.data["code"] == "no_rtp"
        assert call.of("closed")[0].data["initiated_by"] == "adapter"

    run(test)


def test_an_rtp_flood_is_bounded_and_named() -> None:
    async def test() -> None:
        async with Call({**SHORT_AGENT, "rtp_flood": True}) as call:
            await call.connect()
            await call.until(lambda: bool(call.of("closed")))
        [error] = call.of("error")
        assert error.data["code"] == "hostile_product" and "flood" in str(error.text)

    run(test)
