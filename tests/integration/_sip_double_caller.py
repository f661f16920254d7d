"""The raw SIP/RTP caller the double's tests drive it with, written here from RFC 3261 / 3550 /
4733 (not voicelab's SIP client: the two check each other), and the doubles it calls.

The doubles run on one event loop in a background thread for a test module (one double per
settings, started on first use: ``serve_doubles``); the caller uses blocking sockets in the
test's thread (``make_callers``).
"""

from __future__ import annotations

import asyncio
import queue
import re
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

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
            future.result(timeout=120)  # a piper voice synthesizes every line first
            self.started[key] = (double, events)
        return self.started[key]

    def close(self) -> None:
        for double, _ in self.started.values():
            asyncio.run_coroutine_threadsafe(double.stop(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def serve_doubles() -> Iterator[Doubles]:
    """A test module's ``doubles`` fixture (module scope): the loop thread, closed after."""
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


def make_callers() -> Iterator[Callable[..., Caller]]:
    """A test's ``caller_factory`` fixture: callers on a port, all closed after the test."""
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



IVR = {"mode": "ivr", "ring_ms": 20, "menu_latency_ms": 50,
       "greeting": "Agent here.", "invalid_key_text": "Sorry, no."}
