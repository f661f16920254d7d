"""The double's SIP listener: UDP and TCP on one port of 127.0.0.1, calls by Call-ID.

A datagram is one message; a TCP stream is framed by Content-Length (RFC 3261 18.3) within
:data:`~._sip.MAX_MESSAGE_BYTES`, and a stream that cannot be framed is closed. A request the
double cannot read is answered 400 when it can be (its Via, From, To, Call-ID and CSeq are
there) and is otherwise a counted violation; a request outside any call gets 481, an INVITE
over ``max_calls`` calls in progress 503. Ended calls are kept (the newest
:data:`KEPT_ENDED_CALLS`) so a retransmitted BYE or ACK still finds its call.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Self

import numpy as np

from ...audio import G711_SAMPLE_RATE_HZ, StreamingVad, mulaw_decode, mulaw_encode, tone_speech
from ...endpoints import parse_settings
from .._json import JsonObject
from .._voice import DoubleVoice
from ._call import SipCall
from ._codec import Codec, encode
from ._hostile import start_hostile
from ._links import TcpLink, UdpLink
from ._settings import SipDoubleSettings
from ._sip import MAX_MESSAGE_BYTES, SipError, SipMessage, framed, parse_message
from ._sip import response as build_response

logger = logging.getLogger(__name__)
#: tries at a port free for both UDP and TCP (see SipDouble.start)
_PORT_ATTEMPTS = 5
KEPT_ENDED_CALLS = 1000
#: calls whose caller audio is kept (``record_caller_seconds``)
MAX_KEPT_RECORDINGS = 16
READ_BYTES = 16_384
STOP_TIMEOUT_SECONDS = 3.0


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, double: SipDouble):
        self.double = double

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.double.datagram(data, addr)

    def error_received(self, exc: Exception) -> None:
        pass  # ICMP from a caller that went away: its call ends by timeout


class SipDouble:
    """The double as a server: ``await start()`` returns its ``sip:agent@host:port`` URI;
    ``on_event`` gets every thing it did (``{"call", "event", "ns", ...}``)."""

    def __init__(self, settings: SipDoubleSettings | Mapping[str, object] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0,
                 on_event: Callable[[JsonObject], None] | None = None):
        self.settings = parse_settings(SipDoubleSettings, settings)
        self.host, self._requested_port = host, port
        self.port: int | None = None
        self.on_event = on_event
        self.voice = DoubleVoice(self.settings.voice, seed=self.settings.voice_seed,
                                 sample_rate_hz=G711_SAMPLE_RATE_HZ)
        self.calls: OrderedDict[str, SipCall] = OrderedDict()
        self.calls_started = 0
        self._frames: dict[tuple[str, str], list[bytes]] = {}
        #: what the caller said in each of the last calls (``record_caller_seconds``), by number
        self.caller_audio: OrderedDict[int, np.ndarray] = OrderedDict()
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def uri(self) -> str:
        if self.port is None:
            raise RuntimeError("the SIP double is not started")
        return f"sip:agent@{self.host}:{self.port}"

    def report(self, entry: JsonObject) -> None:
        if self.on_event is not None:
            self.on_event(entry)

    def frames(self, text: str, codec: Codec) -> list[bytes]:
        """``text`` in the double's voice as 20 ms G.711 frames (made once per text)."""
        key = (text, codec)
        if key not in self._frames:
            self._frames[key] = encode(self.voice.speak(text), codec)
        return self._frames[key]

    def keep_caller_audio(self, call: int, audio: np.ndarray) -> None:
        self.caller_audio[call] = audio
        while len(self.caller_audio) > MAX_KEPT_RECORDINGS:
            self.caller_audio.popitem(last=False)

    def _warm_up(self) -> None:
        """Run the listening and speaking code once, and every line the double may say,
        so no first call waits for them."""
        StreamingVad(sample_rate_hz=G711_SAMPLE_RATE_HZ).push(mulaw_decode(mulaw_encode(
            tone_speech("warm up", seed=1, sample_rate_hz=G711_SAMPLE_RATE_HZ))).samples)
        for text in self.settings.spoken_texts():
            if text:
                for codec in ("PCMU", "PCMA"):
                    self.frames(text, codec)

    async def start(self) -> str:
        self._warm_up()
        # SIP over UDP and TCP on one port: the port the OS picks for UDP may be taken for TCP
        # (another connection's ephemeral port), so a port of its choosing is tried again
        for attempt in range(_PORT_ATTEMPTS):
            try:
                await self._listen()
                break
            except OSError as error:
                if self._requested_port or error.errno != errno.EADDRINUSE or \
                        attempt == _PORT_ATTEMPTS - 1:
                    raise
        return self.uri

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        self._udp, _ = await loop.create_datagram_endpoint(
            lambda: _UdpProtocol(self), local_addr=(self.host, self._requested_port))
        self.port = int(self._udp.get_extra_info("sockname")[1])
        try:
            self._tcp = await asyncio.start_server(self._connection, self.host, self.port)
        except OSError:
            self._udp.close()
            raise

    async def stop(self) -> None:
        for call in list(self.calls.values()):
            await call.close()
        if self._tcp is not None:
            self._tcp.close()
        for writer in list(self._writers):
            writer.close()  # its reader sees the end of the stream
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._connections, return_exceptions=True),
                                   STOP_TIMEOUT_SECONDS)
        if self._udp is not None:
            self._udp.close()
        self._udp = self._tcp = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # --- receiving ----------------------------------------------------------------------------

    def datagram(self, data: bytes, peer: tuple[str, int]) -> None:
        assert self._udp is not None and self.port is not None
        link = UdpLink(self._udp, peer, (self.host, self.port))
        message = self._parse(data, link)
        if message is not None:
            task = asyncio.ensure_future(self.dispatch(message, link))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    def _parse(self, data: bytes, link: UdpLink | TcpLink) -> SipMessage | None:
        try:
            return parse_message(data)
        except SipError as error:
            self.report({"call": 0, "event": "violation", "ns": time.perf_counter_ns(),
                         "reason": f"unreadable SIP from {link.transport}: {error}"})
            return None

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None and self.port is not None
        self._connections.add(task)
        link = TcpLink(writer, (self.host, self.port))
        self._writers.add(writer)
        buffer = b""
        try:
            while chunk := await reader.read(READ_BYTES):
                buffer += chunk
                while (found := framed(buffer)) is not None:
                    data, length = found
                    buffer = buffer[length:]
                    message = self._parse(data, link)
                    if message is None:
                        return
                    await self.dispatch(message, link)
                if len(buffer) > 2 * MAX_MESSAGE_BYTES:
                    return
        except SipError as error:
            self.report({"call": 0, "event": "violation", "ns": time.perf_counter_ns(),
                         "reason": f"TCP stream: {error}"})
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def dispatch(self, message: SipMessage, link: UdpLink | TcpLink) -> None:
        """Hand a message to its call (a new one for an INVITE)."""
        call = self.calls.get(message.call_id)
        if message.method is None:
            if call is not None:
                call.requests.answered(message)
            return
        try:
            message.cseq  # noqa: B018 - a request without a readable CSeq is refused here
        except SipError as error:
            self._refuse(message, link, 400, str(error))
            return
        if call is None:
            call = self._new_call(message, link)
            if call is None:
                return
        try:
            await call.request(message, link)
        except Exception as error:  # a bug must not stop the double: say so, keep serving
            logger.debug("call %s: handling %s", call.index, message.method, exc_info=True)
            call.violation(f"the double failed handling {message.method}: "
                           f"{type(error).__name__}: {error}")

    def _new_call(self, message: SipMessage, link: UdpLink | TcpLink) -> SipCall | None:
        if message.method != "INVITE":
            if message.method != "ACK":
                self._refuse(message, link, 481, "a request outside any call")
            return None
        if not message.call_id or not message.header("from") or not message.header("to"):
            self._refuse(message, link, 400, "an INVITE without Call-ID, From or To")
            return None
        active = sum(1 for c in self.calls.values() if c.state != "ended")
        if active >= self.settings.max_calls:
            self._refuse(message, link, 503, f"over {self.settings.max_calls} calls")
            return None
        self.calls_started += 1
        call = SipCall(self, self.calls_started, link, on_answered=start_hostile)
        self.calls[message.call_id] = call
        self._forget_ended()
        return call

    def _forget_ended(self) -> None:
        ended = [key for key, c in self.calls.items() if c.state == "ended"]
        for key in ended[:max(0, len(ended) - KEPT_ENDED_CALLS)]:
            del self.calls[key]

    def _refuse(self, message: SipMessage, link: UdpLink | TcpLink, status: int,
                reason: str) -> None:
        self.report({"call": 0, "event": "violation", "ns": time.perf_counter_ns(),
                     "reason": reason, "status": status})
        if message.header("via") and message.method != "ACK":
            link.send(build_response(message, status))
