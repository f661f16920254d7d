"""The SIP product double over real sockets, driven by a small raw SIP/RTP caller written here
from RFC 3261 / 3550 / 4733 (not voicelab's SIP client: the two check each other), and by
Debian's ``sipp``.

The doubles run on one event loop in a background thread for the whole module (one double
per settings, started on first use); the caller uses blocking sockets in the test's thread.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from voicelab.audio import G711_SAMPLE_RATE_HZ, alaw_encode, mulaw_encode, tone_speech
from voicelab.doubles.sip import SipDouble

Event = dict[str, object]
DATA = Path(__file__).parent / "data"
SHORT_AGENT = {"mode": "agent", "greeting": "Hello there.", "reply_text": "Noted, thanks.",
               "reply_latency_ms": 50, "vad_silence_ms": 300, "ring_ms": 20}


# --- the doubles: one loop thread for the module ---------------------------------------------

class Doubles:
    """Doubles on one background event loop, one per settings; their events in one list."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.started: dict[str, tuple[SipDouble, list[Event]]] = {}

    def get(self, settings: dict[str, object]) -> tuple[SipDouble, list[Event]]:
        key = repr(sorted(settings.items()))
        if key not in self.started:
            events: list[Event] = []
            double = SipDouble(settings, on_event=events.append)
            future: Future[str] = asyncio.run_coroutine_threadsafe(double.start(), self.loop)
            future.result(timeout=30)
            self.started[key] = (double, events)
        return self.started[key]

    def close(self) -> None:
        for double, _ in self.started.values():
            asyncio.run_coroutine_threadsafe(double.stop(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="module")
def doubles() -> Iterator[Doubles]:
    started = Doubles()
    yield started
    started.close()


def wait_for(events: list[Event], call: int, name: str, timeout: float = 10.0, nth: int = 1,
             **fields: object) -> Event:
    """The ``nth`` event ``name`` of ``call`` with ``fields``, once the double reported it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [event for event in list(events)
                 if event["call"] == call and event["event"] == name
                 and all(event.get(k) == v for k, v in fields.items())]
        if len(found) >= nth:
            return found[nth - 1]
        time.sleep(0.01)
    raise AssertionError(f"no {name} {fields} for call {call}: "
                         f"{[e['event'] for e in events if e['call'] == call]}")


def of_call(events: list[Event], call: int, name: str) -> list[Event]:
    return [e for e in list(events) if e["call"] == call and e["event"] == name]


# --- the caller ------------------------------------------------------------------------------

@dataclass
class Message:
    first: str
    headers: dict[str, list[str]]
    body: bytes
    raw: bytes

    @property
    def status(self) -> int | None:
        return int(self.first.split()[1]) if self.first.startswith("SIP/2.0") else None

    @property
    def method(self) -> str | None:
        return None if self.first.startswith("SIP/2.0") else self.first.split()[0]

    def h(self, name: str) -> str:
        return self.headers.get(name, [""])[0]


def parse(raw: bytes) -> Message:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return Message(lines[0], headers, body, raw)


@dataclass
class Caller:
    """A raw SIP user agent client with one RTP socket; everything it receives is queued."""

    port: int
    transport: str = "udp"
    call_id: str = field(default_factory=lambda: secrets.token_hex(8))
    tag: str = field(default_factory=lambda: secrets.token_hex(4))
    cseq: int = 0
    to: str = ""
    inbox: queue.Queue[Message] = field(default_factory=queue.Queue)
    rtp_in: list[tuple[int, bytes, tuple[str, int]]] = field(default_factory=list)
    seq: int = 0
    ts: int = 1000

    def __post_init__(self) -> None:
        kind = socket.SOCK_DGRAM if self.transport == "udp" else socket.SOCK_STREAM
        self.sip = socket.socket(socket.AF_INET, kind)
        if self.transport == "udp":
            self.sip.bind(("127.0.0.1", 0))
        else:
            self.sip.connect(("127.0.0.1", self.port))
        self.rtp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rtp.bind(("127.0.0.1", 0))
        self.rtp_port = self.rtp.getsockname()[1]
        self.closed = False
        for target in (self._read_sip, self._read_rtp):
            threading.Thread(target=target, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self.sip.close()
        self.rtp.close()

    def _read_sip(self) -> None:
        buffer = b""
        with_suppressed = (OSError,)
        try:
            while not self.closed:
                if self.transport == "udp":
                    self.inbox.put(parse(self.sip.recvfrom(70_000)[0]))
                    continue
                chunk = self.sip.recv(1 << 20)
                if not chunk:
                    return
                buffer += chunk
                while b"\r\n\r\n" in buffer:
                    head, _, rest = buffer.partition(b"\r\n\r\n")
                    length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
                    if len(rest) < length:
                        break
                    self.inbox.put(parse(head + b"\r\n\r\n" + rest[:length]))
                    buffer = rest[length:]
        except with_suppressed:
            return

    def _read_rtp(self) -> None:
        try:
            while not self.closed:
                data, source = self.rtp.recvfrom(4096)
                self.rtp_in.append((time.perf_counter_ns(), data, source))
        except OSError:
            return

    def send(self, text: str, body: bytes = b"") -> None:
        data = text.replace("\n", "\r\n").encode() + body
        if self.transport == "udp":
            self.sip.sendto(data, ("127.0.0.1", self.port))
        else:
            self.sip.sendall(data)

    def request(self, method: str, *, body: bytes = b"", content_type: str = "",
                extra: str = "", cseq: int | None = None, branch: str | None = None) -> str:
        if cseq is None:
            self.cseq += 1
            cseq = self.cseq
        branch = branch or "z9hG4bK" + secrets.token_hex(6)
        local = self.sip.getsockname()
        typed = f"Content-Type: {content_type}\n" if content_type else ""
        self.send(f"{method} sip:agent@127.0.0.1:{self.port} SIP/2.0\n"
                  f"Via: SIP/2.0/{self.transport.upper()} 127.0.0.1:{local[1]};branch={branch}\n"
                  f"Max-Forwards: 70\nFrom: <sip:caller@127.0.0.1>;tag={self.tag}\n"
                  f"To: {self.to or '<sip:agent@127.0.0.1>'}\nCall-ID: {self.call_id}\n"
                  f"CSeq: {cseq} {method}\nContact: <sip:caller@127.0.0.1:{local[1]}>\n"
                  f"{extra}{typed}Content-Length: {len(body)}\n\n", body)
        return branch

    def offer(self, formats: str = "0 8 101") -> bytes:
        return (f"v=0\r\no=caller 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
                f"m=audio {self.rtp_port} RTP/AVP {formats}\r\na=rtpmap:0 PCMU/8000\r\n"
                f"a=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
                f"a=fmtp:101 0-16\r\na=sendrecv\r\n").encode()

    def invite(self, formats: str = "0 8 101", extra: str = "") -> str:
        return self.request("INVITE", body=self.offer(formats), content_type="application/sdp",
                            extra=extra)

    def expect(self, want: int | str, timeout: float = 10.0) -> Message:
        """The next message with status (or method) ``want``; others are skipped."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {want} within {timeout} s")
            try:
                message = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if message.status == want or message.method == want:
                return message

    def answered(self, formats: str = "0 8 101") -> Message:
        """INVITE, 100, 180, 200, ACK: the 200."""
        self.invite(formats)
        ok = self.expect(200)
        self.to = ok.h("to")
        self.request("ACK", cseq=self.cseq)
        return ok

    def respond(self, request: Message, status: int) -> None:
        vias = "".join(f"Via: {v}\n" for v in request.headers["via"])
        self.send(f"SIP/2.0 {status} OK\n{vias}From: {request.h('from')}\nTo: {request.h('to')}\n"
                  f"Call-ID: {request.h('call-id')}\nCSeq: {request.h('cseq')}\n"
                  f"Content-Length: 0\n\n")

    def remote_rtp(self, message: Message) -> tuple[str, int]:
        port = int(re.search(rb"m=audio (\d+)", message.body).group(1))
        return "127.0.0.1", port

    def rtp_packet(self, payload_type: int, payload: bytes, *, marker: bool = False) -> bytes:
        self.seq += 1
        return struct.pack("!BBHII", 0x80, payload_type | (0x80 if marker else 0), self.seq,
                           self.ts, 0x1234) + payload

    def speak(self, to: tuple[str, int], samples: np.ndarray, payload_type: int = 0) -> None:
        """Send G.711 packets paced 20 ms apart, as a phone does."""
        codes = mulaw_encode(samples) if payload_type == 0 else alaw_encode(samples)
        begin = time.monotonic()
        for index in range(0, len(codes) - 159, 160):
            self.ts += 160
            self.rtp.sendto(self.rtp_packet(payload_type, codes[index:index + 160]), to)
            time.sleep(max(0.0, begin + (index // 160 + 1) * 0.02 - time.monotonic()))

    def key(self, to: tuple[str, int], key: str) -> None:
        """One RFC 4733 event: three packets, then the end packet three times."""
        self.ts += 160 * 5
        event = "0123456789*#".index(key)
        for duration in (160, 320, 480):
            self.rtp.sendto(self.rtp_packet(101, struct.pack("!BBH", event, 10, duration),
                                            marker=duration == 160), to)
        for _ in range(3):
            self.rtp.sendto(self.rtp_packet(101, struct.pack("!BBH", event, 0x80 | 10, 640)), to)


@pytest.fixture
def caller_factory() -> Iterator[Callable[..., Caller]]:
    made: list[Caller] = []

    def make(port: int, transport: str = "udp") -> Caller:
        made.append(Caller(port, transport))
        return made[-1]

    yield make
    for caller in made:
        caller.close()


def call_index(events: list[Event], caller: Caller, double: SipDouble) -> int:
    """The double's number of the newest call (the caller's INVITE was its last)."""
    return double.calls_started


def tone(seconds: float = 0.6) -> np.ndarray:
    samples = tone_speech("hello can you hear me", seed=3, sample_rate_hz=G711_SAMPLE_RATE_HZ).samples
    return np.concatenate([samples[:int(seconds * 8000)], np.zeros(8000 * 6 // 10, np.int16)])


# --- the agent ---------------------------------------------------------------------------------

def test_agent_call_over_udp_greets_replies_and_hangs_up(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get({**SHORT_AGENT, "hang_up_after_replies": 1})
    caller = caller_factory(double.port)
    ok = caller.answered(formats="8 0 101")
    call = double.calls_started
    assert re.search(rb"m=audio \d+ RTP/AVP 8 101", ok.body), ok.body  # the first offered codec
    assert b"a=rtpmap:8 PCMA/8000" in ok.body and ok.h("contact")
    answered = wait_for(events, call, "answered")
    wait_for(events, call, "ack_received")
    greeting = wait_for(events, call, "reply_sent", reply=0)
    # the double's own truth: its frames went out one every 20 ms, within its stated lateness
    span_ms = (greeting["last_ns"] - greeting["first_ns"]) / 1e6
    expected_ms = (greeting["frames"] - 1) * 20
    assert expected_ms - 1 <= span_ms <= expected_ms + greeting["most_late_ms"] + 25
    assert greeting["first_ns"] > answered["answered_ns"]
    arrivals = [ns for ns, data, _ in caller.rtp_in]
    audio = [data for _, data, _ in caller.rtp_in]
    assert all(len(d) == 12 + 160 and d[1] & 0x7F == 8 for d in audio[:20])
    assert arrivals[0] > greeting["first_ns"]  # a send stamp precedes the arrival stamp
    gaps = np.diff(arrivals[:greeting["frames"]]) / 1e6
    assert 10 < float(np.median(gaps)) < 30  # paced, not a burst
    caller.speak(caller.remote_rtp(ok), tone(), payload_type=8)
    ended = wait_for(events, call, "caller_speech_ended")
    reply = wait_for(events, call, "reply_sent", reply=1)
    assert reply["first_ns"] > ended["ns"]
    bye = caller.expect("BYE")  # the scenario's end: the double hangs up
    caller.respond(bye, 200)
    wait_for(events, call, "bye_sent", why="scenario_ended")
    wait_for(events, call, "bye_answered", status=200)
    wait_for(events, call, "call_ended", why="hung_up")


def test_agent_stops_when_talked_over(doubles: Doubles, caller_factory) -> None:
    long_reply = "This is a long answer that goes on and on so the caller can talk over it."
    double, events = doubles.get({**SHORT_AGENT, "greeting": long_reply})
    caller = caller_factory(double.port)
    ok = caller.answered()
    call = double.calls_started
    wait_for(events, call, "answered")
    time.sleep(0.3)
    caller.speak(caller.remote_rtp(ok), tone(0.8))
    stopped = wait_for(events, call, "barge_in_stopped", reply=0)
    assert stopped["frames_sent"] < stopped["frames"]
    assert not of_call(events, call, "reply_sent") or \
        of_call(events, call, "reply_sent")[0]["reply"] != 0
    caller.request("BYE")
    assert caller.expect(200).h("cseq").endswith("BYE")
    wait_for(events, call, "bye_received")
    wait_for(events, call, "call_ended", why="bye_received")


# --- the standalone double ---------------------------------------------------------------------

def test_main_prints_its_uri_serves_a_call_as_json_lines_and_exits_by_code(
        caller_factory) -> None:
    process = subprocess.Popen([sys.executable, "-m", "voicelab.doubles.sip", "--settings",
                                '{"mode": "agent", "greeting": "Hi.", "ring_ms": 0}'],
                               stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(process.stdout.readline())
        assert first == {"uri": f"sip:agent@127.0.0.1:{first['port']}", "port": first["port"]}
        caller = caller_factory(first["port"])
        caller.answered()
        caller.request("BYE")
        caller.expect(200)
        lines = [json.loads(process.stdout.readline()) for _ in range(3)]
        assert [line["event"] for line in lines] == ["invite_received", "answered",
                                                     "ack_received"]
        assert all(line["call"] == 1 and isinstance(line["ns"], int) for line in lines)
        taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        taken.bind(("127.0.0.1", 0))
        busy = subprocess.run([sys.executable, "-m", "voicelab.doubles.sip", "--port",
                               str(taken.getsockname()[1])], capture_output=True, text=True,
                              timeout=60)
        taken.close()
        assert busy.returncode == 1 and "cannot listen" in busy.stderr
        bad = subprocess.run([sys.executable, "-m", "voicelab.doubles.sip", "--settings",
                              '{"mode": "fax"}'], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr and "mode" in bad.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


# --- the IVR -----------------------------------------------------------------------------------

IVR = {"mode": "ivr", "ring_ms": 20, "menu_latency_ms": 50,
       "greeting": "Agent here.", "invalid_key_text": "Sorry, no."}


def test_ivr_keys_by_both_methods_move_the_menu_and_a_key_stops_the_prompt(
        doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get(IVR)
    caller = caller_factory(double.port)
    ok = caller.answered("0 101")
    call = double.calls_started
    media = caller.remote_rtp(ok)
    main = wait_for(events, call, "prompt_started", menu="main")
    time.sleep(0.3)
    caller.key(media, "1")  # while the main prompt plays: a key barge-in
    stopped = wait_for(events, call, "prompt_stopped", menu="main")
    assert stopped["why"] == "key_barge_in" and stopped["frames_sent"] < stopped["frames"]
    key = wait_for(events, call, "key_received", digit="1")
    assert key["method"] == "rfc4733" and key["first_packet_ns"] > main["first_ns"]
    billing = wait_for(events, call, "prompt_started", menu="billing")
    assert billing["first_ns"] > key["first_packet_ns"]
    time.sleep(0.2)
    assert len(of_call(events, call, "key_received")) == 1  # 6 packets, one key
    assert len(of_call(events, call, "key_ended")) == 1  # the end packet's three copies: one
    caller.request("INFO", body=b"Signal=7\r\nDuration=160\r\n",
                   content_type="application/dtmf-relay")
    assert caller.expect(200).h("cseq").endswith("INFO")
    wait_for(events, call, "key_received", digit="7", method="info")
    wait_for(events, call, "key_refused", key="7", menu="billing")
    wait_for(events, call, "prompt_stopped", menu="invalid", why="finished")
    wait_for(events, call, "prompt_started", nth=2, menu="billing")
    caller.request("INFO", body=b"0", content_type="application/dtmf")
    caller.expect(200)
    wait_for(events, call, "agent_reached", menu="billing")
    greeting = wait_for(events, call, "reply_sent", reply=0)
    assert greeting["text"] == "Agent here."
    caller.request("INFO", body=b"Signal=xyz\r\n", content_type="application/dtmf-relay")
    caller.expect(400)
    caller.request("INFO", body=b"5", content_type="text/plain")
    caller.expect(415)
    caller.request("BYE")
    caller.expect(200)
    ended = wait_for(events, call, "call_ended", why="bye_received")
    assert ended["violations"] == 2 and ended["rtp_received"] == 6  # the key's packets
    assert [e["menu"] for e in of_call(events, call, "prompt_started")] == \
        ["main", "billing", "invalid", "billing"]  # the refused key: sorry, then the menu


def test_early_media_starts_the_prompt_before_the_answer(doubles: Doubles,
                                                           caller_factory) -> None:
    double, events = doubles.get({**IVR, "early_media": True, "ring_ms": 600})
    caller = caller_factory(double.port)
    caller.invite()
    progress = caller.expect(183)
    assert b"m=audio" in progress.body
    ok = caller.expect(200)
    call = double.calls_started
    first_packet = caller.rtp_in[0][0]
    started = wait_for(events, call, "prompt_started", menu="main")
    answered = wait_for(events, call, "answered")
    assert started["first_ns"] < answered["answered_ns"] and first_packet < answered["answered_ns"]
    caller.to = ok.h("to")
    caller.request("ACK", cseq=caller.cseq)
    caller.request("BYE")
    caller.expect(200)
