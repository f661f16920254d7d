"""The WebRTC adapter (``adapter: webrtc``): voicelab as the browser of a WebRTC voice agent.

The product is reached by its signalling (``settings.signalling``: pipecat's ``smallwebrtc``,
``whip``, ``fastrtc``; :mod:`._signalling`) and speaks Opus over SRTP through aiortc.

* **The user's line.** A WebRTC product listens (``turn_taking`` is ``server_vad``): the runner
  hands :meth:`WebRtcEndpoint.send_audio` the live line every ``chunk_ms`` (20 ms by default);
  the adapter encodes it into 20 ms Opus packets that leave in real time (:mod:`._line`), each
  stamped as the sender takes it.
* **The product's audio** is stamped per RTP packet where it arrives, before aiortc's jitter
  buffer (:mod:`._rtp` explains the seam), decoded in arrival order and emitted as one
  ``audio_delta`` a packet, stamped with its arrival; the listener's own documented jitter buffer
  places it (docs/channel.md). Lost, late and duplicate packets and the interarrival jitter are
  counted and recorded with RCTP's round trip when the call ends (a ``raw`` event,
  ``data.webrtc``).
* **Text** comes on a data channel the adapter opens: pipecat's RTVI messages become
  ``transcript_final`` / ``input_transcript`` (:mod:`._rtvi`).
* **Connection life.** ``connect`` fails with :class:`EndpointError` naming the cause
  (``connection_refused``, ``handshake_rejected``, ``call_refused``, ``resource_limit``,
  ``ice_failed``, ``dtls_failed``, ``connect_timeout``). Afterwards a failed connection, a product
  that sends no RTP for ``receive_timeout_seconds``, or one past a limit (an RTP flood, data-channel
  floods or huge messages) ends the call with an ``error`` then ``closed`` (exit 4); a product
  that closes the connection has hung up (``conversation_complete``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import JsonValue

from ..._extras import require_modules
from ...audio import PcmAudio
from .._abilities import EndpointSettings
from .._protocol import EndpointContext, EndpointError, EndpointEvent
from .._settings import parse_settings, secret_values
from .._socket import KERNEL_STREAM_STAMPS
from ._opus import DECODER_DELAY_MS, ENCODER_LOOKAHEAD_MS, OpusLineDecoder
from ._rtp import ArrivedPacket, InboundAudio, LoopStamped
from ._rtvi import decode_message
from ._settings import WebRtcSettings

if TYPE_CHECKING:
    from ._line import CallerLine
    from ._peer import ConnectionState, InboxItem, Peer
    from ._signalling import Signalling

logger = logging.getLogger(__name__)
PURPOSE = "endpoint adapter 'webrtc'"
T = TypeVar("T")
#: a product whose track is silent still sends RTCP reports (aiortc: every 0.5-1.5 s) and
#: answers consent checks; nothing at all for this long means its transport is gone
TRANSPORT_SILENT_NS = 3_000_000_000
#: the longest :meth:`WebRtcEndpoint.send_audio` waits for its audio's first packet to leave
#: (aiortc's sender stopped: the call is failing, and says so by its own events)
DEPARTURE_WAIT_SECONDS = 1.0
#: the longest the call's teardown waits for each of aiortc's steps (its statistics, closing
#: the peer connection): a product whose transport vanished must not hold the evaluator
TEARDOWN_STEP_SECONDS = 5.0


class _Closing:
    """The evaluator closed the call."""


class WebRtcEndpoint:
    """voicelab as a WebRTC peer of the product (audio both ways, RTVI text)."""

    capabilities = {
        "streaming_input": True,
        "streaming_output": True,
        "interruption": False,  # a WebRTC track has no clear: the product just stops
        "tool_events": False,
        "input_transcripts": True,   # RTVI user-transcription, when the product sends it
        "output_transcripts": True,  # RTVI bot-transcription, when the product sends it
    }
    #: the encoder's look-ahead toward the product, the decoder's resampling toward the user
    conversion_delay_ms = {"to_product": ENCODER_LOOKAHEAD_MS, "to_user": DECODER_DELAY_MS}

    #: ``endpoint.settings`` are parsed into this once, at ``validate``
    settings_model = WebRtcSettings

    def __init__(self, settings: Mapping[str, Any] | WebRtcSettings, context: EndpointContext):
        self._settings: WebRtcSettings = parse_settings(WebRtcSettings, settings)
        self._context = context
        self._scrubber = context.scrubber.with_values(
            secret_values(self._settings.headers, self._settings.token, uri=self._settings.url))
        self._webrtc_id = self._settings.webrtc_id or uuid.uuid5(
            uuid.NAMESPACE_URL, f"{context.session_id}/{context.trial_index}").hex
        self._queue: asyncio.Queue[InboxItem | _Closing] = asyncio.Queue()
        #: the arrival stamps of the packets in ``_queue``, oldest first
        self._waiting: deque[int] = deque()
        self._inbound = InboundAudio()
        self._line: CallerLine | None = None
        self._peer: Peer | None = None
        self._signalling: Signalling | None = None
        self._state = "new"  # new -> open -> closed
        self._last_rtp_ns = 0
        #: the longest a packet waited between its arrival and this adapter's consumer: how
        #: stale the audio the conversation took turns on was, at worst
        self._most_behind_ns = 0
        self._events_finished = False
        self._departed_ns: int | None = None
        #: what names the call at the product (pc_id, WHIP location, webrtc_id)
        self._session: str | None = None
        #: the stamps of this adapter's events that the loop took, not the kernel (listed by
        #: ``closed``: see :meth:`arrival_stamps`)
        self._loop_stamped = LoopStamped()

    @classmethod
    def check_settings(cls, settings: EndpointSettings) -> None:
        """aiortc, which the settings alone cannot say is missing."""
        require_modules(["aiortc"], purpose=PURPOSE)

    @classmethod
    def turn_taking(cls, settings: EndpointSettings) -> str:
        """A WebRTC voice agent listens: it detects the end of the user's speech itself."""
        return "server_vad"

    def arrival_stamps(self) -> str:
        """``kernel_stream`` when the product's RTP carries the kernel's receive stamps (Linux,
        the tested aiortc and aioice: :mod:`._kernel_stamps`), else ``loop``
        (``ReportsArrivalStamps``).

        ``kernel_stream``, not ``kernel``: every event of the call carries the kernel's stamp
        but those the ``closed`` event lists, each charged the loop's lag as before: audio
        whose datagram the kernel gave no stamp (stamped when the loop read it) or whose stamp
        was forgotten (stamped when tapped), the data channel's messages (stamped when aiortc's
        SCTP task handed them on) and the call's closing events. Kernel-stamped audio is not
        charged the loop's lag: a busy loop that falls behind aiortc's task delivers it late,
        but with its stamp right, and the listener hears nothing past the oldest packet not yet
        delivered (``ReportsReceiveBacklog``), so no turn is taken on audio still on its way.
        A call whose ``closed`` was not recorded lists nothing, and every arrival is charged."""
        return KERNEL_STREAM_STAMPS if self._peer is not None and self._peer.stamps.kernel \
            else "loop"

    @property
    def settings(self) -> WebRtcSettings:
        return self._settings

    # --- connecting -----------------------------------------------------------------------

    async def connect(self) -> None:
        """Offer, signal, connect (ICE, DTLS) within ``connect_timeout_seconds``; raises
        :class:`EndpointError` naming what failed, with everything opened so far closed."""
        require_modules(["aiortc"], purpose=PURPOSE)
        from ._line import CallerLine
        from ._peer import Peer
        from ._signalling import Signalling

        settings, context = self._settings, self._context
        self._line = CallerLine(clock_ns=context.clock_ns)
        self._line.warm_up()
        OpusLineDecoder.warm_up()
        self._peer = Peer(settings, self._line, enqueue=self._enqueue,
                          clock_ns=context.clock_ns)
        self._signalling = Signalling(settings, scrubber=self._scrubber,
                                      webrtc_id=self._webrtc_id,
                                      traceparent=context.traceparent,
                                      timeout_seconds=settings.connect_timeout_seconds)
        timeout = settings.connect_timeout_seconds
        try:
            answer = await asyncio.wait_for(self._peer.open(self._signalling), timeout)
        except TimeoutError:
            peer = self._peer
            await self._release()
            raise EndpointError(f"the call was not connected within {timeout:g} s (ICE "
                                f"{peer.pc.iceConnectionState}, connection "
                                f"{peer.pc.connectionState})", code="connect_timeout") from None
        except BaseException:
            await self._release()
            raise
        self._state = "open"
        self._session = answer.session
        self._last_rtp_ns = context.clock_ns()
        logger.info("WebRTC call up with %s (%s, session %s)", self._where(),
                    settings.signalling, answer.session)

    def _where(self) -> str:
        from .._settings import redacted_url

        return redacted_url(self._settings.offer_url)

    # --- sending ---------------------------------------------------------------------------

    async def send_audio(self, audio: PcmAudio) -> None:
        """Queue ``audio`` (canonical PCM) as 20 ms Opus packets sent in real time, and return
        once the first of them has left (at its due time; at most
        :data:`DEPARTURE_WAIT_SECONDS`): the line's moments are stamped when the user's audio
        really left, not when a busy loop handed it over (its sender's step may come an
        event-loop iteration later). After the product hung up the audio is dropped; on a
        broken call, raises :class:`EndpointError` (``connection_closed``)."""
        expected = self._context.audio_format.sample_rate_hz
        if audio.sample_rate_hz != expected:
            raise ValueError(f"send_audio needs {expected} Hz PCM, got {audio.sample_rate_hz} Hz")
        if self._state == "hung_up":
            return
        if self._state != "open" or self._line is None:
            raise EndpointError("the call with the product is closed", code="connection_closed")
        self._departed_ns = None
        departure = self._line.queue_audio(audio.samples)
        if departure is not None:
            # asyncio.wait, not wait_for: Python 3.11's wait_for loses a cancellation that
            # comes as the future completes, and the runner's line task, cancelled at hang-up,
            # then ran on and its stop() waited forever (seen at 20 calls on a loaded machine)
            done, _ = await asyncio.wait({departure}, timeout=DEPARTURE_WAIT_SECONDS)
            if done:
                self._departed_ns = departure.result()
            else:
                logger.debug("a packet of the line did not leave within %g s",
                             DEPARTURE_WAIT_SECONDS)

    def last_departure_ns(self) -> int | None:
        """When the first packet of the audio last handed to :meth:`send_audio` left (the
        sender took it and sent it in that step; ``ReportsDeparture``), or None."""
        return self._departed_ns

    async def commit_turn(self) -> None:
        """Never called in ``server_vad`` mode (the product detects turns); does nothing."""
        logger.debug("commit_turn() ignored: a WebRTC product detects the user's turns")

    async def interrupt(self) -> None:
        """Never called in ``server_vad`` mode (a user barges in by speaking); does nothing."""
        logger.debug("interrupt() ignored: on a WebRTC call the user can only speak")

    # --- receiving -------------------------------------------------------------------------

    def _enqueue(self, item: InboxItem) -> None:
        if isinstance(item, ArrivedPacket):
            self._waiting.append(item.arrival_ns)
        self._queue.put_nowait(item)

    def oldest_waiting_ns(self) -> int | None:
        """The arrival stamp of the oldest product packet not yet out of :meth:`events`: in
        this adapter's queue, or read from the socket but not yet decrypted by aiortc (its
        task falls behind its socket on a busy loop; None: nothing waits). The runner hears
        nothing past it (``ReportsReceiveBacklog``)."""
        if self._events_finished:
            return None
        pending = self._peer.stamps.oldest_pending_ns() if self._peer is not None else None
        if self._waiting and (pending is None or self._waiting[0] < pending):
            return self._waiting[0]
        return pending

    async def events(self) -> AsyncIterator[EndpointEvent]:
        """Normalized events in arrival order; the last one is ``closed``. One consumer only."""
        from ._peer import ConnectionState, DataMessage, Problem

        while not self._events_finished:
            item = await self._next_item()
            if isinstance(item, ArrivedPacket):
                if self._waiting:
                    self._waiting.popleft()
                self._last_rtp_ns = item.arrival_ns
                self._most_behind_ns = max(self._most_behind_ns,
                                           self._context.clock_ns() - item.arrival_ns)
                pcm = self._inbound.push(item)
                if pcm is not None and pcm.size:
                    if not item.kernel_stamped:
                        self._loop_stamped.note(item.arrival_ns)
                    yield EndpointEvent("audio_delta", item.arrival_ns,
                                        audio=PcmAudio(pcm).to_bytes())
            elif isinstance(item, DataMessage):
                self._loop_stamped.note(item.received_ns)
                for event in decode_message(item.received_ns, item.message):
                    if event.type == "error":  # the product asked for what voicelab refuses
                        for closing in await self._finish("error", str(event.data["code"]),
                                                          str(event.text)):
                            yield closing
                        break
                    yield event
            elif item is None:
                for event in await self._finish("error", *self._silence_cause()):
                    yield event
            elif isinstance(item, Problem):
                for event in await self._finish("error", item.code, item.message):
                    yield event
            elif isinstance(item, _Closing):
                for event in await self._finish("evaluator", None, "closed by the evaluator"):
                    yield event
            elif isinstance(item, ConnectionState) and self._state == "open":
                ending = self._connection_ended(item)
                if ending is not None:
                    for event in await self._finish(*ending):
                        yield event

    def _connection_ended(self, item: ConnectionState) -> tuple[str, str | None, str] | None:
        """How a change of the connection's state ends the call, if it does."""
        peer = self._peer
        if item.state == "failed" and peer is not None:
            return "error", peer.failure_code(), peer.failure()
        if item.state == "closed":
            return "product", None, "the product closed the connection"
        return None

    async def _next_item(self) -> InboxItem | _Closing | None:
        """The next inbox item, or None once the product's track has been silent too long."""
        while True:
            if not self._queue.empty() or self._state != "open":
                return await self._queue.get()
            timeout_ns = self._settings.receive_timeout_seconds * 1e9
            remaining = (self._last_rtp_seen_ns() + timeout_ns - self._context.clock_ns()) / 1e9
            try:
                return await asyncio.wait_for(self._queue.get(), max(remaining, 0.0))
            except TimeoutError:
                if self._context.clock_ns() - self._last_rtp_seen_ns() >= timeout_ns:
                    return None

    def _last_rtp_seen_ns(self) -> int:
        """When RTP last came: the last packet through the tap, or a later datagram read from
        the socket that aiortc has not decrypted yet (a busy loop lags behind its socket)."""
        read = self._peer.stamps.last_rtp_read_ns if self._peer is not None else None
        return self._last_rtp_ns if read is None else max(read, self._last_rtp_ns)

    def _silence_cause(self) -> tuple[str, str]:
        """Why the product's track went silent: its transport gone (nothing at all came for
        longer than RTCP's reports may be apart: ICE failed) or just no RTP."""
        timeout = self._settings.receive_timeout_seconds
        silent = f"sent no RTP for {timeout:g} s (endpoint.settings.receive_timeout_seconds)"
        peer = self._peer
        quiet_ns = peer.transport_silent_ns(self._context.clock_ns()) if peer else None
        if peer is not None and (peer.pc.iceConnectionState in ("failed", "closed") or (
                quiet_ns is not None and quiet_ns >= TRANSPORT_SILENT_NS)):
            return "ice_failed", (f"ICE failed during the call: nothing at all came from the "
                                  f"product (no RTP, RTCP, ICE or DTLS) for "
                                  f"{(quiet_ns or 0) / 1e9:.1f} s (ICE "
                                  f"{peer.pc.iceConnectionState}): its transport is gone; it "
                                  f"{silent}")
        return "receive_timeout", f"the product's track {silent}"

    async def _finish(self, initiator: str, code: str | None,
                      message: str) -> list[EndpointEvent]:
        """The call's last events: the error that ended it (if one did), its RTP facts,
        ``closed``; everything is released."""
        now = self._context.clock_ns()
        self._loop_stamped.note(now)
        message = self._scrubber.scrub_text(message)
        events: list[EndpointEvent] = []
        if initiator == "error":
            logger.warning("%s: %s", self._where(), message)
            events.append(EndpointEvent("error", now, text=message, data={
                "code": code, "message": message, "origin": "adapter"}))
        elif initiator == "product":
            events.append(EndpointEvent("conversation_complete", now,
                                        data={"reason": message}))
        facts: dict[str, JsonValue] = {"webrtc": await self._facts()}
        events.append(EndpointEvent("raw", now, data=facts, raw=facts))
        self._state = "hung_up" if initiator == "product" else "closed"
        self._events_finished = True
        await self._release()
        closed_ns = self._context.clock_ns()
        events.append(EndpointEvent("closed", closed_ns, data={
            "reason": message, "initiated_by": "adapter" if initiator == "error" else initiator,
            **(self._loop_stamped.record(closed_ns)
               if self.arrival_stamps() == KERNEL_STREAM_STAMPS else {})}))
        logger.info("WebRTC call with %s ended: %s", self._where(), message)
        return events

    async def _facts(self) -> dict[str, JsonValue]:
        """What the bundle keeps of the call's RTP: received, sent, RTCP's round trip."""
        facts: dict[str, JsonValue] = {"session": self._session,
                                       "received": {**self._inbound.facts(),
                                                    "most_behind_ms": round(
                                                        self._most_behind_ns / 1e6, 3)}}
        if self._line is not None:
            facts["sent"] = self._line.facts()
        if self._peer is not None:
            facts["connection"] = self._peer.facts()
            facts["rtcp_round_trip_ms"] = await _within(self._peer.round_trip_ms(),
                                                        "reading RTCP's round trip")
        return facts

    # --- closing -------------------------------------------------------------------------

    async def _release(self) -> None:
        """Stop the line, close the peer connection, end the signalling session; never raises."""
        line, peer, signalling = self._line, self._peer, self._signalling
        self._signalling = None
        if line is not None:
            line.stop()
        try:
            if peer is not None:
                await _within(peer.close(), "closing the peer connection")
        except Exception as error:  # noqa: BLE001  (aiortc's teardown: nothing left to save)
            logger.debug("closing the peer connection raised %s", type(error).__name__)
        if signalling is not None:
            await signalling.end()

    async def close(self) -> None:
        """End the call (WHIP: its session is deleted); idempotent, never raises."""
        if self._state == "open":
            self._state = "closing"
            self._queue.put_nowait(_Closing())
            await self._release()
        elif self._state == "new":
            await self._release()


async def _within(step: Coroutine[Any, Any, T], what: str) -> T | None:
    """``step``'s result, or None when it takes longer than :data:`TEARDOWN_STEP_SECONDS`
    (it then runs on, abandoned, and is logged). ``asyncio.wait``, not ``wait_for``: that one
    waits for the cancelled step to finish, which a step stuck on a dead transport never does."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=TEARDOWN_STEP_SECONDS)
    if not done:
        logger.warning("WebRTC teardown: %s took over %g s; left behind", what,
                       TEARDOWN_STEP_SECONDS)
        task.add_done_callback(_retrieved)
        return None
    return task.result()


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Collects an abandoned step's outcome, so its error is never reported as unretrieved."""
    if not task.cancelled():
        task.exception()
