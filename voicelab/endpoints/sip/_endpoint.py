"""The SIP adapter (``adapter: sip``): voicelab places a phone call to the product.

A call (:mod:`._call`) is an INVITE with an SDP offer, provisional answers (a 183 with SDP is
early media: the product's audio before it answers), 200 and ACK, then RTP both ways until a
BYE from either side. This adapter turns that into the protocol every wire shares:

* **The user's line.** Phone products take turns by listening (``turn_taking`` is
  ``server_vad``): the runner hands :meth:`SipEndpoint.send_audio` the live line every
  ``chunk_ms``; it is coded once, into 20 ms payloads of the negotiated codec (:mod:`._codecs`:
  G.711 by the phone wire's shared converter, :mod:`.._g711_line`, the one the Twilio wire
  uses; Opus by libopus at 24 kHz), and the call's paced line sends one RTP packet every 20 ms,
  stamping each as it leaves.
* **The product's audio.** Every RTP packet carries the moment the kernel received it
  (:mod:`._stamped_socket`); packets are decoded in arrival order (:mod:`._arrivals`) (a payload that does not
  decode is counted), a gap in the sequence (lost
  packets, at most :data:`MAX_CONCEALED_PACKETS`) is filled with silence so the product's
  speech keeps its length, and a packet older than one already played is late and dropped
  (counted). Each becomes an ``audio_delta`` at its arrival stamp: the listener's playback
  places it from there as on every wire. A phone streams all the time: its silence between
  replies is counted, not delivered (:mod:`.._silence_gate`), so one late packet cannot delay
  every later reply on the listener's clock.
* **Keys.** :meth:`SipEndpoint.send_dtmf` queues RFC 4733 events (or SIP INFO requests) after
  the line audio already queued; keys the product sends are recorded as raw events.
* **Hanging up.** A BYE from the product is the product ending the conversation
  (``conversation_complete``, exit reason ``endpoint_completion`` as on every wire); ``close()``
  sends BYE (or CANCEL while it still rings).
* **Evidence.** The call's SIP messages (credentials removed), its RTP counts, loss, jitter and
  RTCP reports, the keys both ways and the call setup time (INVITE to 200) are one ``raw``
  event when the call ends (``raw-endpoint-events.json``); answering, provisional responses,
  re-INVITEs and received keys are raw events when they happen.

Failures to place the call are :class:`EndpointError` from ``connect()`` whose code names what
the far end said (``busy``, ``declined``, ``not_found``, ``no_answer``, ``auth_refused``,
``rejected``, ``unreachable``, ``protocol_error``) and whose message carries the SIP status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ...audio import PcmAudio
from ...errors import MissingDependencyError
from .._abilities import EndpointSettings
from .._g711_line import LINE_LATENCY_MS
from .._protocol import EndpointContext, EndpointError, EndpointEvent
from .._settings import parse_settings
from ._arrivals import Arrivals
from ._call import SipCall
from ._codecs import Codec, WireEncoder, conversion_delay_ms, encoder_for, require_opus
from ._settings import SipSettings
from ._types import CallEvent, CallOptions, Negotiated, RtpPacket, SipError

logger = logging.getLogger(__name__)

#: each codec's name as an environment line names it (``channel.*.codec``)
LINE_CODEC_OF: dict[Codec, str] = {"pcmu": "mulaw", "pcma": "alaw", "opus": "opus"}
#: What the call may hold for ``events()`` before the consumer reads it: a minute of packets.
#: A consumer that has stopped gets there; past it, packets are dropped and counted.
MAX_PENDING_ITEMS = 3000

_CLOSED = object()  # queued once the call is over on this side


class SipEndpoint:
    """voicelab as the caller of a phone call to the product (see the module docstring)."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": True,  # a user barges in by speaking; the product's stop is heard
        "tool_events": False,
        "input_transcripts": False,
        "output_transcripts": False,  # a phone call carries audio only
    }
    #: the codec the wire carries when the call offers its default (pcmu first): an
    #: environment line with this codec codes once, here (docs/channel.md); an adapter object
    #: says the first codec its settings offer
    wire_codec = "mulaw"
    #: the G.711 rate conversion's constant group delay each way (voicelab's own processing);
    #: an adapter object says its negotiated codec's once connected (Opus: the encoder's
    #: look-ahead toward the product, nothing toward the user)
    conversion_delay_ms = {"to_product": LINE_LATENCY_MS, "to_user": LINE_LATENCY_MS}
    USER_AGENT = "voicelab-evaluator (sip)"

    #: ``endpoint.settings`` are parsed into this once, at ``validate``
    settings_model = SipSettings

    def __init__(self, settings: Mapping[str, Any] | SipSettings, context: EndpointContext):
        self._settings: SipSettings = parse_settings(SipSettings, settings)
        self.wire_codec = LINE_CODEC_OF[self._settings.codecs[0]]
        secrets = [self._settings.password or "", *self._settings.headers.values()]
        self._scrubber = context.scrubber.with_values([value for value in secrets if value])
        self._context = context
        self._queue: asyncio.Queue[tuple[int, object]] = asyncio.Queue()
        self._dropped_items = 0
        self._arrivals = Arrivals()
        self._call: SipCall | None = None
        self._negotiated: Negotiated | None = None
        self._encoder: WireEncoder | None = None
        self._encoder_codec = ""
        self._state = "new"  # new -> open -> closed
        self._product_hung_up = False
        self._closing_queued = False
        self._facts_sent = False

    @classmethod
    def check_settings(cls, settings: EndpointSettings) -> None:
        """libopus when the settings offer ``opus`` (``validate``: exit 2 naming the key,
        before any call)."""
        parsed = parse_settings(SipSettings, settings)
        if "opus" in parsed.codecs:
            try:
                require_opus()
            except MissingDependencyError as error:
                raise MissingDependencyError(error.package, extra=error.extra,
                                             purpose="The opus codec of a SIP call",
                                             key="endpoint.settings.codecs") from None

    @classmethod
    def turn_taking(cls, settings: EndpointSettings) -> str:
        """A phone product listens: it detects the end of the user's speech itself."""
        return "server_vad"

    @property
    def settings(self) -> SipSettings:
        return self._settings

    def arrival_stamps(self) -> str:
        """``kernel`` when the call's RTP is read with the kernel's receive stamps (Linux),
        else ``loop`` (see :mod:`._stamped_socket`)."""
        call = self._call
        return "kernel" if call is not None and call.media.kernel_stamps else "loop"

    def call_setup_ms(self) -> float | None:
        """INVITE sent to 200 OK received, on the trial clock (None before the answer)."""
        return self._call.setup_ms if self._call is not None else None

    @property
    def negotiated(self) -> Negotiated | None:
        """The codec and media addresses the call agreed on last (None before it is
        answered; a re-INVITE may change them)."""
        call = self._call
        return call.negotiated if call is not None and self._negotiated is not None else None

    def _options(self) -> CallOptions:
        settings = self._settings
        return CallOptions(
            uri=settings.uri, local_address=settings.local_address,
            transport=settings.transport, codecs=tuple(settings.codecs), dtmf=settings.dtmf,
            username=settings.username, password=settings.password,
            headers={**settings.headers, "X-Voicelab-Session": self._context.session_id,
                     "traceparent": self._context.traceparent},
            user_agent=self.USER_AGENT,
            answer_timeout_seconds=settings.answer_timeout_seconds,
            rtp_timeout_seconds=settings.rtp_timeout_seconds)

    async def connect(self) -> None:
        """Place the call and return once it is answered.

        Raises :class:`EndpointError` with the code of the failure (see the module docstring);
        the SIP status is in the message.
        """
        if self._state != "new":
            raise EndpointError("connect() may be called once", code="already_connected")
        self._state = "open"
        call = self._call = SipCall(self._options(), clock_ns=self._context.clock_ns,
                                    on_packet=self._on_packet, on_event=self._on_event)
        try:
            negotiated = await call.start()
        except SipError as error:
            await self._end_call()
            message = self._scrubber.scrub_text(f"the call to {self._settings.uri} failed: "
                                                f"{error}")
            raise EndpointError(message, code=error.code) from None
        except (TimeoutError, OSError) as error:
            await self._end_call()
            raise EndpointError(self._scrubber.scrub_text(
                f"the call to {self._settings.uri} failed: {error}"), code="unreachable") from None
        self._negotiated = negotiated
        self._encoder = self._encoder_for(negotiated.codec)
        self._arrivals.use(negotiated.codec, negotiated.payload_type)
        self.conversion_delay_ms = conversion_delay_ms(negotiated.codec)
        logger.info("call to %s answered in %s ms (%s, session %s)",
                    self._scrubber.scrub_text(self._settings.uri), call.setup_ms,
                    negotiated.codec, self._context.session_id)

    def _encoder_for(self, codec: Codec) -> WireEncoder:
        self._encoder_codec = codec
        return encoder_for(codec)

    # --- from the call (the loop's datagram callbacks: nothing here waits) -----------------

    def _enqueue(self, received_ns: int, item: object) -> None:
        if self._queue.qsize() >= MAX_PENDING_ITEMS:
            self._dropped_items += 1
            return
        self._queue.put_nowait((received_ns, item))

    def _on_packet(self, packet: RtpPacket) -> None:
        self._enqueue(packet.received_ns, packet)

    def _on_event(self, event: CallEvent) -> None:
        self._enqueue(event.received_ns, event)

    # --- sending -------------------------------------------------------------------------

    def _line_open(self) -> bool:
        """Whether the line still takes audio; raises once the call is gone for another reason
        than the product hanging up (a phone whose other end hung up just drops the audio)."""
        if self._product_hung_up:
            return False
        call = self._call
        if self._state != "open" or call is None or self._encoder is None or call.line.broken:
            raise EndpointError("the call to the product is over", code="connection_closed")
        return True

    async def send_audio(self, audio: PcmAudio) -> None:
        """Queue ``audio`` (canonical PCM) as 20 ms RTP packets; never sleeps (see
        :mod:`._call`'s paced line: packet ``n`` leaves ``n * 20 ms`` after the line started)."""
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        if not self._line_open():
            return
        assert self._call is not None and self._encoder is not None
        negotiated = self._call.negotiated
        if negotiated is not None and negotiated.codec != self._encoder_codec:
            self._encoder = self._encoder_for(negotiated.codec)  # a re-INVITE changed it
        frames = self._encoder.push(audio.samples)
        if frames:
            self._call.line.queue_frames(frames)

    async def send_dtmf(self, digits: str) -> None:
        """Press ``digits`` (0-9, ``*``, ``#``) after the line audio already queued, by the
        configured method (``dtmf``), each held ``dtmf_duration_ms``."""
        if not digits or any(digit not in "0123456789*#" for digit in digits):
            raise ValueError("dtmf digits are 0-9, * and #")
        if not self._line_open():
            return
        assert self._call is not None
        self._call.line.queue_digits(digits, duration_ms=self._settings.dtmf_duration_ms,
                                     gap_ms=self._settings.dtmf_gap_ms)

    async def commit_turn(self) -> None:
        """Never called in ``server_vad`` mode (the product detects turns); does nothing."""
        logger.debug("commit_turn() ignored: a phone product detects the user's turns")

    async def interrupt(self) -> None:
        """Never called in ``server_vad`` mode (a user barges in by speaking); does nothing."""
        logger.debug("interrupt() ignored: on a phone call the user can only speak")

    # --- receiving -----------------------------------------------------------------------

    async def events(self) -> AsyncIterator[EndpointEvent]:
        """Normalized events in arrival order; the last one is ``closed``. One consumer only."""
        while True:
            received_ns, item = await self._queue.get()
            if item is _CLOSED:
                for event in self._closing_events(received_ns, "evaluator", "closed by the "
                                                  "evaluator"):
                    yield event
                return
            if isinstance(item, RtpPacket):
                negotiated = self._call.negotiated if self._call is not None else None
                if negotiated is not None:  # a re-INVITE may have changed the codec
                    self._arrivals.use(negotiated.codec, negotiated.payload_type)
                pcm = self._arrivals.decode(item)
                if pcm:
                    yield EndpointEvent("audio_delta", received_ns, audio=pcm)
                continue
            assert isinstance(item, CallEvent)
            events, ended = self._call_events(item)
            for event in events:
                yield event
            if ended is not None:
                await self._end_call()
                for event in self._closing_events(received_ns, *ended):
                    yield event
                return

    def _call_events(self, event: CallEvent) -> tuple[list[EndpointEvent],
                                                      tuple[str, str] | None]:
        """The events of one call event, and (initiator, reason) when it ends the call."""
        at, data = event.received_ns, {"sip_event": event.kind, **event.data}
        if event.kind == "bye":
            self._product_hung_up = True
            return [EndpointEvent("raw", at, data=data, raw=data),
                    EndpointEvent("conversation_complete", at,
                                  data={"reason": "the product hung up (BYE)"})], \
                ("product", "the product hung up")
        failure = _FAILURES.get(event.kind)
        if failure is not None:
            what = str(event.data.get("what", event.kind))
            message = self._scrubber.scrub_text(failure.format(what=what))
            return [EndpointEvent("raw", at, data=data, raw=data),
                    EndpointEvent("error", at, text=message, data={
                        "code": event.kind if event.kind != "hostile" else "hostile_product",
                        "message": message, "origin": "adapter"})], ("adapter", message)
        return [EndpointEvent("raw", at, data=data, raw=data)], None

    def _closing_events(self, at_ns: int, initiator: str, reason: str) -> list[EndpointEvent]:
        events = []
        if not self._facts_sent and self._call is not None:
            self._facts_sent = True
            facts = dict(self._call.facts())
            facts["adapter"] = {"concealed_packets": self._arrivals.concealed_packets,
                                "late_packets": self._arrivals.late_packets,
                                "undecodable_packets": self._arrivals.undecodable_packets,
                                "silence_not_delivered": self._arrivals.silence_withheld,
                                "dropped_items": self._dropped_items}
            record = {"sip_event": "call_facts", **facts}
            events.append(EndpointEvent("raw", at_ns, data=record, raw=record))
        events.append(EndpointEvent("closed", at_ns, data={
            "reason": reason, "code": None, "initiated_by": initiator}))
        self._state = "closed"
        return events

    # --- closing -------------------------------------------------------------------------

    async def _end_call(self) -> None:
        call = self._call
        if call is None:
            return
        with contextlib.suppress(Exception):
            await call.hang_up()
        with contextlib.suppress(Exception):
            await call.close()

    async def close(self) -> None:
        """Hang up (BYE, or CANCEL while ringing) and stop receiving; idempotent, never raises."""
        if self._closing_queued:
            return
        self._closing_queued = True
        try:
            await self._end_call()
        except Exception as error:  # noqa: BLE001
            logger.debug("close() swallowed %s", type(error).__name__)
        finally:
            if self._state != "closed":
                self._queue.put_nowait((self._context.clock_ns(), _CLOSED))

    async def __aenter__(self) -> SipEndpoint:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


#: Call events that end the call, and the message each gives (``what``: the call's detail).
_FAILURES = {
    "no_rtp": "the product sent no audio (RTP) after answering",
    "hostile": "the product broke the call's bounds: {what}",
    "transport_closed": "the call's signalling connection closed",
}
