"""The SIP product double over real sockets, driven by a small raw SIP/RTP caller written here
from RFC 3261 / 3550 / 4733 (not voicelab's SIP client: the two check each other), and by
Debian's ``sipp``.

The doubles run on one event loop in a background thread for the whole module (one double
per settings, started on first use); the caller uses blocking sockets in the test's thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import queue
import re
import secrets
import shutil
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
from voicelab.doubles.sip.__main__ import main as sip_main

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
            future.result(timeout=120)  # a piper voice synthesizes every line first
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


def wait_for(log: list[Event], call: int, name: str, /, timeout: float = 10.0, nth: int = 1,
             **fields: object) -> Event:
    """The ``nth`` event ``name`` of ``call`` with ``fields``, once the double reported it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [event for event in list(log)
                 if event["call"] == call and event["event"] == name
                 and all(event.get(k) == v for k, v in fields.items())]
        if len(found) >= nth:
            return found[nth - 1]
        time.sleep(0.01)
    raise AssertionError(f"no {name} {fields} for call {call}: "
                         f"{[e['event'] for e in log if e['call'] == call]}")


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
        self.rtcp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rtcp.bind(("127.0.0.1", 0))
        self.rtcp_in: list[bytes] = []
        self.closed = False
        for target in (self._read_sip, self._read_rtp, self._read_rtcp):
            threading.Thread(target=target, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self.sip.close()
        self.rtp.close()
        self.rtcp.close()

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

    def _read_rtcp(self) -> None:
        try:
            while not self.closed:
                self.rtcp_in.append(self.rtcp.recv(4096))
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
                f"a=fmtp:101 0-16\r\na=sendrecv\r\n"
                f"a=rtcp:{self.rtcp.getsockname()[1]}\r\n").encode()

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

    def respond(self, request: Message, status: int, body: bytes = b"") -> None:
        vias = "".join(f"Via: {v}\n" for v in request.headers["via"])
        typed = "Content-Type: application/sdp\n" if body else ""
        self.send(f"SIP/2.0 {status} OK\n{vias}From: {request.h('from')}\nTo: {request.h('to')}\n"
                  f"Call-ID: {request.h('call-id')}\nCSeq: {request.h('cseq')}\n"
                  f"{typed}Content-Length: {len(body)}\n\n", body)

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


def tone(seconds: float = 0.6) -> np.ndarray:
    """A caller's utterance: ``seconds`` of tone speech, then 0.6 s of silence."""
    samples = tone_speech("hello can you hear me", seed=3,
                          sample_rate_hz=G711_SAMPLE_RATE_HZ).samples
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
    late_ms = greeting["most_late_ms"]  # the clock's own stated lateness (a busy machine)
    assert expected_ms - late_ms - 1 <= span_ms <= expected_ms + late_ms + 25
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

def test_main_exit_codes_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    try:
        assert sip_main(["--port", str(taken.getsockname()[1])]) == 1
    finally:
        taken.close()
    assert "cannot listen" in capsys.readouterr().err
    assert sip_main(["--settings", '{"mode": "fax"}']) == 2
    nowhere = '{"menus": {"main": {"prompt": "x", "keys": {"1": "nowhere"}}}}'
    assert sip_main(["--settings", nowhere]) == 2
    error = capsys.readouterr().err
    assert "mode" in error and "no menu 'nowhere'" in error and "Traceback" not in error


def test_main_prints_its_uri_and_serves_a_call_as_json_lines(caller_factory) -> None:
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


# --- TCP, failing and hostile far ends ---------------------------------------------------------

def test_a_call_over_tcp(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get(SHORT_AGENT)
    caller = caller_factory(double.port, "tcp")
    ok = caller.answered()
    call = double.calls_started
    assert ok.h("contact").endswith(";transport=tcp>")
    wait_for(events, call, "invite_received", transport="TCP")
    wait_for(events, call, "reply_sent", reply=0)
    caller.request("BYE")
    assert caller.expect(200).h("cseq").endswith("BYE")
    wait_for(events, call, "call_ended", why="bye_received")


@pytest.mark.parametrize("status", [486, 603, 404, 480])
def test_respond_with_a_final_status(doubles: Doubles, caller_factory, status: int) -> None:
    double, events = doubles.get({"respond_with": status})
    caller = caller_factory(double.port)
    branch = caller.invite()
    caller.expect(100)
    assert caller.expect(status).h("to")
    caller.request("ACK", cseq=caller.cseq, branch=branch)  # the ACK of a failure: same branch
    wait_for(events, double.calls_started, "call_ended", why=f"rejected_{status}")


def test_never_answered_then_cancelled(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get({"never_answer": True})
    caller = caller_factory(double.port)
    branch = caller.invite()
    caller.expect(180)
    caller.request("CANCEL", cseq=caller.cseq, branch=branch)
    assert caller.expect(200).h("cseq").endswith("CANCEL")
    assert caller.expect(487).h("cseq").endswith("INVITE")
    caller.request("ACK", cseq=caller.cseq, branch=branch)
    wait_for(events, double.calls_started, "call_ended", why="cancelled")


def digest(challenge: str, *, password: str, algorithm: str, port: int) -> str:
    def h(text: str) -> str:
        return hashlib.new("sha256" if algorithm == "SHA-256" else "md5",
                           text.encode()).hexdigest()

    realm = re.search(r'realm="([^"]+)"', challenge).group(1)
    nonce = re.search(r'nonce="([^"]+)"', challenge).group(1)
    uri, cnonce = f"sip:agent@127.0.0.1:{port}", "0a4f113b"
    ha1, ha2 = h(f"caller:{realm}:{password}"), h(f"INVITE:{uri}")
    response = h(f"{ha1}:{nonce}:00000001:{cnonce}:auth:{ha2}")
    return (f'Authorization: Digest username="caller", realm="{realm}", nonce="{nonce}", '
            f'uri="{uri}", response="{response}", algorithm={algorithm}, qop=auth, '
            f'nc=00000001, cnonce="{cnonce}"\n')


@pytest.mark.parametrize("algorithm", ["MD5", "SHA-256"])
def test_digest_authentication(doubles: Doubles, caller_factory, algorithm: str) -> None:
    auth = {"username": "caller", "password": "s3cret", "algorithm": algorithm}
    double, events = doubles.get({**SHORT_AGENT, "require_auth": auth})
    for password, final in (("wrong", 403), ("s3cret", 200)):
        caller = caller_factory(double.port)
        branch = caller.invite()
        challenge = caller.expect(401).h("www-authenticate")
        assert f"algorithm={algorithm}" in challenge and 'qop="auth"' in challenge
        caller.request("ACK", cseq=caller.cseq, branch=branch)
        caller.invite(extra=digest(challenge, password=password, algorithm=algorithm,
                                   port=double.port))
        assert caller.expect(final).h("cseq") == "2 INVITE"
        caller.request("ACK", cseq=caller.cseq)
    call = double.calls_started
    wait_for(events, call - 1, "auth_refused", reason="wrong response hash")
    wait_for(events, call, "auth_accepted")
    assert not [e for e in events if "s3cret" in repr(e)]  # the password is never reported


def test_no_media_after_answer(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get({**SHORT_AGENT, "no_media_after_answer": True})
    caller = caller_factory(double.port)
    caller.answered()
    wait_for(events, double.calls_started, "ack_received")
    time.sleep(0.5)
    assert caller.rtp_in == []
    caller.request("BYE")
    caller.expect(200)


def test_hang_up_and_hold(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get({**SHORT_AGENT, "reinvite_after_seconds": 0.2,
                                  "hang_up_after_seconds": 0.6})
    caller = caller_factory(double.port)
    caller.answered()
    call = double.calls_started
    hold = caller.expect("INVITE")
    assert b"a=sendonly" in hold.body and hold.h("call-id") == caller.call_id
    caller.respond(hold, 200, caller.offer())
    assert caller.expect("ACK").h("cseq") == hold.h("cseq").replace("INVITE", "ACK")
    wait_for(events, call, "reinvite_answered", status=200)
    bye = caller.expect("BYE")
    assert bye.h("from").endswith(caller.to.split(";tag=")[1])  # the dialog's tags, swapped
    caller.respond(bye, 200)
    wait_for(events, call, "bye_sent", why="hang_up_after_seconds")
    wait_for(events, call, "bye_answered", status=200)


def test_rtp_flood_and_foreign_rtp(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get({**SHORT_AGENT, "rtp_flood": True, "foreign_rtp": True})
    caller = caller_factory(double.port)
    ok = caller.answered()
    time.sleep(0.6)
    caller.request("BYE")
    caller.expect(200)
    ended = wait_for(events, double.calls_started, "call_ended")
    assert ended["rtp_sent"] > 500  # 5000 a second of flood beside 50 of media
    assert len(caller.rtp_in) > 200
    answered_port = caller.remote_rtp(ok)[1]
    assert {source[1] for _, _, source in caller.rtp_in} - {answered_port}  # another port


def test_dtmf_storm_and_bye_storm(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get({**SHORT_AGENT, "dtmf_storm": True, "bye_storm": True,
                                  "storm_count": 1000, "hang_up_after_seconds": 1.0})
    caller = caller_factory(double.port)
    caller.answered()
    call = double.calls_started
    wait_for(events, call, "dtmf_storm_sent", events=1000)
    wait_for(events, call, "bye_storm_sent", requests=1000)
    time.sleep(0.2)
    keys = [d for _, d, _ in caller.rtp_in if d[1] & 0x7F == 101]
    assert len(keys) > 200  # four packets an event, some may overflow the socket buffer
    byes = []
    while not caller.inbox.empty():
        message = caller.inbox.get()
        if message.method == "BYE":
            byes.append(message.h("cseq"))
    assert len(set(byes)) > 50
    for bye in byes[:50]:  # answers to the storm: only the first BYE's is reported
        cseq = bye.split()[0]
        caller.send(f"SIP/2.0 481 No\nVia: SIP/2.0/UDP 127.0.0.1:{double.port};branch=z9hG4bKx\n"
                    f"From: <sip:agent@127.0.0.1>;tag=x\nTo: <sip:caller@127.0.0.1>;tag={caller.tag}"
                    f"\nCall-ID: {caller.call_id}\nCSeq: {cseq} BYE\nContent-Length: 0\n\n")
    time.sleep(0.3)
    assert len(of_call(events, call, "bye_answered")) <= 1


def test_huge_sdp_over_tcp(doubles: Doubles, caller_factory) -> None:
    double, _ = doubles.get({**SHORT_AGENT, "huge_sdp": True, "huge_sdp_bytes": 3_000_000})
    caller = caller_factory(double.port, "tcp")
    ok = caller.answered()
    assert len(ok.body) > 3_000_000 and b"m=audio" in ok.body
    udp = caller_factory(double.port)
    assert 50_000 < len(udp.answered().body) < 65_000  # as big as one datagram may be


def test_hostile_callers_are_bounded(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get(SHORT_AGENT)
    caller = caller_factory(double.port)
    caller.sip.sendto(b"\x00garbage" * 100, ("127.0.0.1", double.port))
    caller.sip.sendto(b"OPTIONS sip:a SIP/2.0\r\n" + b"X-A: b\r\n" * 150 + b"\r\n",
                      ("127.0.0.1", double.port))
    caller.request("BYE")  # outside any call
    assert caller.expect(481)
    reasons = [e["reason"] for e in events if e["call"] == 0 and e["event"] == "violation"]
    assert any("no blank line after the header fields" in r for r in reasons)
    assert any("more than 100 header lines" in r for r in reasons)
    ok = caller.answered()
    to = caller.remote_rtp(ok)
    packet = caller.rtp_packet(0, b"\xff" * 160)
    for index in range(2000):  # ~20 000 a second, far over the 400 the double reads
        caller.rtp.sendto(packet, to)
        if index % 100 == 99:
            time.sleep(0.005)
    time.sleep(0.3)
    caller.request("BYE")
    caller.expect(200)
    ended = wait_for(events, double.calls_started, "call_ended")
    # what the kernel delivered (a busy machine may drop some) was read up to the rate only
    assert ended["rtp_received"] <= 400 < ended["rtp_received"] + ended["rtp_over_rate"], \
        repr(ended)
    wait_for(events, double.calls_started, "violation", reason="RTP over 400 packets a second")
    stream = socket.create_connection(("127.0.0.1", double.port))
    stream.sendall(b"OPTIONS sip:a SIP/2.0\r\nVia: x\r\n\r\n")  # no Content-Length on TCP
    assert stream.recv(100) == b""  # the double closes a stream it cannot frame
    stream.close()


# --- real SIP software -------------------------------------------------------------------------

def free_udp_port() -> int:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.mark.skipif(shutil.which("sipp") is None, reason="sipp (Debian's sip-tester) is not "
                                                         "installed")
@pytest.mark.parametrize("transport", ["u1", "t1"])
def test_sipp_completes_a_call_against_the_double(doubles: Doubles, tmp_path: Path,
                                                  transport: str) -> None:
    double, events = doubles.get({**SHORT_AGENT, "greeting": "Hello from the double."})
    before = double.calls_started
    run = subprocess.run(
        ["sipp", "-sf", str(DATA / "sipp_uac_hold_bye.xml"), "-m", "1", "-s", "agent",
         f"127.0.0.1:{double.port}", "-i", "127.0.0.1", "-p", str(free_udp_port()),
         "-mp", str(free_udp_port()), "-t", transport, "-nostdin", "-timeout", "20s",
         "-timeout_error", "-trace_err", "-error_file", str(tmp_path / "errors.log")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    errors = (tmp_path / "errors.log").read_text() if (tmp_path / "errors.log").exists() else ""
    assert run.returncode == 0, run.stdout[-2000:] + errors
    call = double.calls_started
    assert call == before + 1
    wait_for(events, call, "invite_received", transport="TCP" if transport == "t1" else "UDP")
    wait_for(events, call, "ack_received")
    wait_for(events, call, "bye_received")
    ended = wait_for(events, call, "call_ended", why="bye_received")
    assert ended["rtp_sent"] > 25 and ended["violations"] == 0  # it spoke through the pause


def test_a_piper_prompt_is_heard_as_words(doubles: Doubles, caller_factory) -> None:
    """``voice: piper`` gives real words: the caller recognizes the menu's prompt from the
    RTP it received (what the IVR verdict "the expected prompt was heard" reads)."""
    pytest.importorskip("piper")
    pytest.importorskip("pocketsphinx")
    from voicelab.audio import mulaw_decode
    from voicelab.speech import recognize

    prompt = "I recorded your daily plan, and I saved the reminder."
    double, events = doubles.get({"voice": "piper", "ring_ms": 0, "greeting": "Hi.",
                                  "invalid_key_text": "No.", "reply_text": "Yes.",
                                  "menus": {"main": {"prompt": prompt, "keys": {"0": "agent"}}}})
    caller = caller_factory(double.port)
    caller.answered("0 101")
    stopped = wait_for(events, double.calls_started, "prompt_stopped", menu="main", timeout=30)
    assert stopped["why"] == "finished"
    time.sleep(0.1)
    payloads = [data[12:] for ns, data, _ in caller.rtp_in if data[1] & 0x7F == 0]
    words = recognize(mulaw_decode(b"".join(payloads)))
    assert "recorded" in words and "reminder" in words, words
    caller.request("BYE")
    caller.expect(200)


def test_the_caller_holds_and_resumes(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get(SHORT_AGENT)
    caller = caller_factory(double.port)
    caller.answered()
    call = double.calls_started
    wait_for(events, call, "ack_received")
    hold = caller.offer().replace(b"a=sendrecv", b"a=sendonly")
    caller.request("INVITE", body=hold, content_type="application/sdp")
    assert b"a=recvonly" in caller.expect(200).body
    caller.request("ACK", cseq=caller.cseq)
    wait_for(events, call, "reinvite_received", direction="sendonly", answer_direction="recvonly")
    time.sleep(0.2)  # packets sent before the hold have arrived
    held_from = len(caller.rtp_in)
    time.sleep(0.4)
    assert len(caller.rtp_in) == held_from  # a held caller is sent nothing
    caller.request("INVITE", body=caller.offer("8 101"), content_type="application/sdp")
    resumed = caller.expect(200)
    assert b"a=sendrecv" in resumed.body and b"RTP/AVP 8 101" in resumed.body
    caller.request("ACK", cseq=caller.cseq)
    time.sleep(0.3)
    assert len(caller.rtp_in) > held_from + 5 and caller.rtp_in[-1][1][1] & 0x7F == 8
    caller.request("INVITE", body=b"v=0\r\n", content_type="application/sdp")
    assert caller.expect(488)
    caller.request("BYE")
    caller.expect(200)


def test_rtcp_sender_reports_both_ways(doubles: Doubles, caller_factory) -> None:
    double, events = doubles.get({**SHORT_AGENT, "rtcp_interval_seconds": 0.2})
    caller = caller_factory(double.port)
    ok = caller.answered()
    rtcp_port = int(re.search(rb"a=rtcp:(\d+)", ok.body).group(1))
    caller.rtcp.sendto(struct.pack("!BBHI", 0x80, 201, 1, 0x1234), ("127.0.0.1", rtcp_port))
    time.sleep(0.7)
    reports = list(caller.rtcp_in)
    assert len(reports) >= 2
    first, received = reports[0], len(caller.rtp_in)
    version, kind, length, ssrc = struct.unpack_from("!BBHI", first)
    assert (version >> 6, kind, length) == (2, 200, 6)  # a sender report, RFC 3550 6.4.1
    assert ssrc == struct.unpack_from("!I", caller.rtp_in[0][1], 8)[0]  # the RTP stream's
    packets, octets = struct.unpack_from("!II", first, 20)
    assert 0 < packets <= received and octets == packets * 160
    assert first[28 + 1] == 202 and b"voicelab-double@127.0.0.1" in first  # SDES CNAME
    caller.request("BYE")
    caller.expect(200)
    ended = wait_for(events, double.calls_started, "call_ended")
    assert ended["rtcp_received"] == 1 and ended["rtcp_sent"] >= len(reports)


def test_retransmissions_over_udp(doubles: Doubles, caller_factory) -> None:
    """A retransmitted INVITE gets the same answer (not a second call); the 200 is sent again
    (T1 = 500 ms) until the ACK comes."""
    double, events = doubles.get(SHORT_AGENT)
    caller = caller_factory(double.port)
    before = double.calls_started
    branch = caller.invite()
    first = caller.expect(200)
    caller.cseq -= 1
    caller.request("INVITE", body=caller.offer(), content_type="application/sdp", branch=branch)
    assert caller.expect(200).h("to") == first.h("to")  # the same dialog, the same tag
    again = caller.expect(200, timeout=3)  # no ACK yet: the 200 again
    assert again.raw == first.raw and double.calls_started == before + 1
    caller.to = first.h("to")
    caller.request("ACK", cseq=caller.cseq)
    wait_for(events, double.calls_started, "ack_received")
    time.sleep(1.2)
    assert all(m.status != 200 for m in list(caller.inbox.queue))  # acknowledged: no more
    caller.request("BYE")
    caller.expect(200)


@pytest.mark.skipif(shutil.which("sipp") is None, reason="sipp (Debian's sip-tester) is not "
                                                         "installed")
def test_sipp_presses_through_the_ivr_by_rfc4733_and_info(doubles: Doubles,
                                                          tmp_path: Path) -> None:
    """sipp plays its own RFC 4733 capture of key 1 from its media port, then sends key 0 by
    INFO: the double's menu moves to billing, then to the agent."""
    if not Path("/usr/share/sip-tester/dtmf_2833_1.pcap").exists():
        pytest.skip("sipp's dtmf_2833_1.pcap is not installed")
    double, events = doubles.get({**IVR, "ring_ms": 0})
    run = subprocess.run(
        ["sipp", "-sf", str(DATA / "sipp_uac_ivr_keys.xml"), "-m", "1", "-s", "agent",
         f"127.0.0.1:{double.port}", "-i", "127.0.0.1", "-p", str(free_udp_port()),
         "-mp", str(free_udp_port()), "-nostdin", "-timeout", "20s", "-timeout_error"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:]
    call = double.calls_started
    wait_for(events, call, "key_received", digit="1", method="rfc4733")
    wait_for(events, call, "menu_entered", menu="billing")
    wait_for(events, call, "key_received", digit="0", method="info")
    wait_for(events, call, "agent_reached", menu="billing")
    wait_for(events, call, "call_ended", why="bye_received")
    assert len(of_call(events, call, "key_received")) == 2  # the capture's packets: one key


def test_unanswerable_offers_and_too_many_calls_are_refused(doubles: Doubles,
                                                            caller_factory) -> None:
    double, events = doubles.get({**SHORT_AGENT, "max_calls": 1})
    g722 = caller_factory(double.port)
    g722.invite(formats="9 101")  # no codec the double speaks
    assert g722.expect(488)
    wait_for(events, double.calls_started, "call_ended", why="rejected_488")
    offerless = caller_factory(double.port)
    offerless.request("INVITE")  # no SDP: the double needs the offer in the INVITE
    assert offerless.expect(488)
    first = caller_factory(double.port)
    first.answered()
    second = caller_factory(double.port)
    second.invite()
    assert second.expect(503)  # over max_calls calls in progress
    first.request("BYE")
    first.expect(200)
