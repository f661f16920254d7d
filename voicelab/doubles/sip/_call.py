"""One call at the double: its INVITE server transaction, its dialog and its media.

States: ``new`` (an INVITE came, or a 401 asked for credentials), ``proceeding`` (ringing),
``answered`` (200 sent, waiting for the ACK), ``confirmed``, ``ended``. Over UDP a final
response to an INVITE is sent again (T1 doubling to T2, RFC 3261 17.2.1 and 13.3.1.4) until
the ACK comes, and the double's own requests (BYE, re-INVITE) until a response comes; those
retransmissions outlive the call's end, so a lost ACK or 200 is still answered.

Requests go back to where the INVITE came from (its source address, as ``rport`` would have
it), over the same connection on TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Protocol

import numpy as np
from pydantic import JsonValue

from .._json import JsonObject
from .._voice import DoubleVoice
from . import _auth
from ._codec import Codec
from ._conversation import Conversation
from ._keys import KeyReader
from ._links import Link
from ._media import FRAME_SECONDS
from ._own_requests import OwnRequests
from ._sdp import Direction, SdpError, SdpOffer, answer, parse_offer
from ._settings import SipDoubleSettings
from ._sip import SipMessage, new_token
from ._sip import response as build_response
from ._timers import resend

logger = logging.getLogger(__name__)
ALLOW = "INVITE, ACK, BYE, CANCEL, INFO, OPTIONS"
#: over UDP an SDP answer cannot be bigger than a datagram: ``huge_sdp`` fills one
UDP_SDP_LIMIT = 60_000
#: the direction that answers an offered one (RFC 3264 6.1)
REPLY_DIRECTION: dict[Direction, Direction] = {
    "sendrecv": "sendrecv", "sendonly": "recvonly", "recvonly": "sendonly",
    "inactive": "inactive"}


class CallServer(Protocol):
    settings: SipDoubleSettings
    voice: DoubleVoice
    host: str

    def report(self, entry: JsonObject) -> None: ...

    def frames(self, text: str, codec: Codec) -> list[bytes]: ...

    def keep_caller_audio(self, call: int, audio: np.ndarray) -> None: ...


class SipCall:
    """One call: :meth:`request` takes the caller's requests, ``requests.answered`` its
    responses (to the double's own requests: :mod:`._own_requests`)."""

    def __init__(self, server: CallServer, index: int, link: Link, *,
                 on_answered: Callable[[SipCall], None] = lambda call: None):
        self.server, self.index, self.link = server, index, link  # the INVITE's: the dialog's
        #: what starts once the call is answered (the hostile modes: :mod:`._hostile`)
        self._on_answered = on_answered
        self.reply_link = link
        self.settings = server.settings
        self.state = "new"
        self.invite: SipMessage | None = None
        self.to_tag = new_token()
        self.final: tuple[int, bytes] | None = None  # the INVITE's final response, until ACK
        self.last_response: bytes | None = None
        self.offer: SdpOffer | None = None
        self.talk = Conversation(self.settings, host=server.host, note=self.note,
                                 violation=self.violation, hang_up=self.hang_up,
                                 frames=server.frames)
        self.media = self.talk.media
        self.nonces: set[str] = set()
        #: the double's own requests (BYE, re-INVITE, ACK) and the answers it waits for
        self.requests = OwnRequests(self)
        self.violations = 0
        self.violation_reasons: set[str] = set()
        self.tasks: set[asyncio.Task[object]] = set()  # end with the call
        self.transactions: set[asyncio.Task[object]] = set()  # outlive it (retransmissions)

    # --- reporting ------------------------------------------------------------------------

    def note(self, kind: str, **details: JsonValue) -> None:
        self.server.report({"call": self.index, "event": kind, "ns": time.perf_counter_ns(),
                            **details})

    def violation(self, reason: str) -> None:
        """Report something out of protocol: each reason once (a flood of the same fault is
        one line), at most ``max_violations_logged`` reasons; all are counted."""
        self.violations += 1
        if reason not in self.violation_reasons and \
                len(self.violation_reasons) < self.settings.max_violations_logged:
            self.violation_reasons.add(reason)
            self.note("violation", reason=reason)

    def spawn(self, work: Coroutine[None, object, object], *, outlives: bool = False) -> None:
        task = asyncio.create_task(work)
        group = self.transactions if outlives else self.tasks
        group.add(task)
        task.add_done_callback(group.discard)
        task.add_done_callback(self._failed)

    def _failed(self, task: asyncio.Task[object]) -> None:
        """A task of the call that raised: a violation line (a bug in the double), never a
        traceback on the user's terminal (it is logged at debug level)."""
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        logger.debug("call %s: a task failed", self.index, exc_info=error)
        self.violation(f"the double failed: {type(error).__name__}: {error}")

    # --- what the caller sends ------------------------------------------------------------

    async def request(self, message: SipMessage, link: Link) -> None:
        """Handle a request; its responses go back the way it came (``link``)."""
        self.reply_link = link
        handlers: dict[str, Callable[[SipMessage], Coroutine[None, None, None]]] = {
            "INVITE": self._invite, "ACK": self._ack, "BYE": self._bye,
            "CANCEL": self._cancel, "INFO": self._info, "OPTIONS": self._options}
        handler = handlers.get(message.method or "")
        if handler is None:
            self.reply(message, 405, extra=[("allow", ALLOW)])
            return
        await handler(message)

    def reply(self, request: SipMessage, status: int, *,
              extra: list[tuple[str, str]] | None = None, body: bytes = b"") -> bytes:
        data = build_response(request, status, to_tag=self.to_tag, extra=extra, body=body)
        self.reply_link.send(data)
        return data

    async def _invite(self, message: SipMessage) -> None:
        number, _ = message.cseq
        if self.invite is not None and message.cseq == self.invite.cseq and \
                message.branch == self.invite.branch:
            if self.last_response is not None:  # a retransmission: the same answer again
                self.link.send(self.last_response)
            return
        if self.state in ("answered", "confirmed"):
            self._reinvite(message)
            return
        if self.state != "new":
            self.reply(message, 491 if self.state == "proceeding" else 481)
            return
        self.invite = message
        self.note("invite_received", cseq=number, transport=self.link.transport,
                  request_uri=message.uri[:200], call_id=message.call_id[:200])
        self.last_response = self.reply(message, 100)
        if await self._refused(message):
            return
        self.state = "proceeding"
        self.spawn(self._ring())

    async def _refused(self, message: SipMessage) -> bool:
        """Answer with a final failure when the settings or the offer say so."""
        auth = self.settings.require_auth
        if auth is not None and not self._authorized(message):
            return True
        if self.settings.respond_with is not None:
            self._fail(self.settings.respond_with)
            return True
        try:
            self.offer = parse_offer(message.body)
        except SdpError as error:
            self.violation(f"INVITE offer: {error}")
            self._fail(488)
            return True
        chosen = self.offer.codec()
        if chosen is None:
            self._fail(488)
            return True
        self.talk.use_codec(*chosen, self.offer)
        self.media.remote = (self.offer.address, self.offer.port)
        await self.media.open(foreign=self.settings.foreign_rtp,
                              rtcp=self.settings.rtcp_interval_seconds > 0)
        self.media.rtcp_remote = self.offer.rtcp
        if self.settings.rtcp_interval_seconds:
            self.media.rtcp_every_ticks = max(1, round(self.settings.rtcp_interval_seconds
                                                       / FRAME_SECONDS))
        return False

    def _authorized(self, message: SipMessage) -> bool:
        auth = self.settings.require_auth
        assert auth is not None
        given = message.header("authorization")
        if given is None:
            nonce = _auth.new_nonce()
            self.nonces.add(nonce)
            self._final_response(401, extra=[("www-authenticate", _auth.challenge(
                realm=auth.realm, nonce=nonce, algorithm=auth.algorithm))])
            self.note("auth_challenged", algorithm=auth.algorithm)
            return False
        reason = _auth.verify(given, method="INVITE", username=auth.username,
                              password=auth.password, realm=auth.realm, nonces=self.nonces,
                              algorithm=auth.algorithm)
        if reason is not None:
            self.note("auth_refused", reason=reason)
            self._fail(403)
            return False
        self.note("auth_accepted")
        return True

    def _fail(self, status: int) -> None:
        self._final_response(status)
        self.note("rejected", status=status)
        self.end(f"rejected_{status}")

    def _final_response(self, status: int, *, extra: list[tuple[str, str]] | None = None,
                        body: bytes = b"") -> int:
        """Send the INVITE's final response (again until the ACK, over UDP); its stamp."""
        assert self.invite is not None
        data = build_response(self.invite, status, to_tag=self.to_tag, extra=extra, body=body)
        self.final = (self.invite.cseq[0], data)
        self.last_response = data
        sent_ns = time.perf_counter_ns()
        self.link.send(data)
        if self.link.transport == "UDP":
            self.spawn(self._until_acked(data), outlives=True)
        return sent_ns

    async def _until_acked(self, data: bytes) -> None:
        def waiting() -> bool:
            return self.final is not None and self.final[1] is data

        if await resend(self.link.send, data, waiting=waiting):
            self.final = None
            self.violation("no ACK for the final response to INVITE")
            if self.state == "answered":
                self.hang_up("no_ack")

    async def _ring(self) -> None:
        assert self.invite is not None
        if self.settings.early_media:
            self.last_response = self.reply(self.invite, 183, extra=self.contact(),
                                            body=self.sdp())
            self.note("early_media")
            self.talk.start()
        else:
            self.last_response = self.reply(self.invite, 180, extra=self.contact())
        if self.settings.never_answer:
            return
        await asyncio.sleep(self.settings.ring_ms / 1000)
        if self.state == "proceeding":
            self._answer()

    def _answer(self) -> None:
        self.state = "answered"
        answered_ns = self._final_response(200, extra=self.contact(), body=self.sdp())
        self.note("answered", answered_ns=answered_ns, codec=self.media.codec,
                  rtp_port=self.media.port, remote_rtp=f"{self.media.remote[0]}:"
                                                       f"{self.media.remote[1]}")
        self.talk.start()
        self._on_answered(self)

    def contact(self) -> list[tuple[str, str]]:
        host, port = self.link.local
        tcp = ";transport=tcp" if self.link.transport == "TCP" else ""
        return [("contact", f"<sip:agent@{host}:{port}{tcp}>")]

    def _reinvite(self, message: SipMessage) -> None:
        """The caller's re-INVITE (hold, resume, another address or codec), answered from its
        offer (RFC 3264 8.4: a held caller is not sent media), or 488."""
        try:
            offer = parse_offer(message.body) if message.body else self.offer
        except SdpError as error:
            self.violation(f"re-INVITE offer: {error}")
            offer = None
        chosen = offer.codec() if offer is not None else None
        if offer is None or chosen is None:
            self.reply(message, 488)
            return
        self.offer = offer
        self.talk.use_codec(*chosen, offer)
        self.media.remote, self.media.rtcp_remote = (offer.address, offer.port), offer.rtcp
        held = "inactive" if offer.address == "0.0.0.0" else offer.direction  # RFC 2543 hold
        direction = REPLY_DIRECTION[held]
        self.media.paused = direction in ("recvonly", "inactive")
        self.note("reinvite_received", cseq=message.cseq[0], direction=held,
                  answer_direction=direction, codec=chosen[1])
        self.reply(message, 200, extra=self.contact(), body=self.sdp(direction))

    def sdp(self, direction: Direction = "sendrecv") -> bytes:
        assert self.offer is not None
        padding = 0
        if self.settings.huge_sdp:
            padding = self.settings.huge_sdp_bytes if self.link.transport == "TCP" \
                else UDP_SDP_LIMIT
        return answer(self.offer, address=self.server.host, port=self.media.port,
                      payload_type=self.media.payload_type, codec=self.media.codec,
                      direction=direction, padding_bytes=padding,
                      rtcp_port=self.media.rtcp_port)

    async def _ack(self, message: SipMessage) -> None:
        if self.final is None or message.cseq[0] != self.final[0]:
            return  # a late ACK retransmission
        status = int(self.final[1].split(b" ", 2)[1])
        self.final = None
        if status == 200 and self.state == "answered":
            self.state = "confirmed"
            self.note("ack_received")

    async def _bye(self, message: SipMessage) -> None:
        if self.state not in ("answered", "confirmed", "ended"):
            self.reply(message, 481)
            return
        self.reply(message, 200)
        if self.state != "ended":
            self.note("bye_received")
            self.end("bye_received")

    async def _cancel(self, message: SipMessage) -> None:
        self.reply(message, 200)
        if self.state == "proceeding":
            self.note("cancel_received")
            self._final_response(487)
            self.end("cancelled")

    async def _options(self, message: SipMessage) -> None:
        self.reply(message, 200, extra=[("allow", ALLOW)])

    async def _info(self, message: SipMessage) -> None:
        if self.state not in ("answered", "confirmed"):
            self.reply(message, 481)
            return
        kind = (message.header("content-type") or "").split(";")[0].strip().lower()
        try:
            key = KeyReader.info_key(kind, message.body)
        except ValueError as error:
            self.violation(f"INFO: {error}")
            self.reply(message, 415 if "content type" in str(error) else 400)
            return
        self.reply(message, 200)
        self.talk.key(key, "info", time.perf_counter_ns())

    def hang_up(self, why: str) -> None:
        """End the call from this side: BYE (once answered)."""
        if self.state not in ("answered", "confirmed"):
            return
        self.media.stop("hang_up")
        self.requests.send("BYE")
        self.note("bye_sent", why=why)
        self.end("hung_up")

    def end(self, why: str) -> None:
        if self.state == "ended":
            return
        self.state = "ended"
        self.talk.end()
        if self.settings.record_caller_seconds:
            self.server.keep_caller_audio(self.index, self.talk.caller_audio())
        for task in list(self.tasks):
            if task is not asyncio.current_task():
                task.cancel()
        self.spawn(self.media.close(), outlives=True)
        self.note("call_ended", why=why, rtp_sent=self.media.packets_sent,
                  rtp_received=self.media.received, rtp_foreign=self.media.foreign,
                  rtp_over_rate=self.media.rate.dropped, rtcp_sent=self.media.reports_sent,
                  rtcp_received=self.media.rtcp_received, violations=self.violations)

    async def close(self) -> None:
        """Stop everything (the server is stopping)."""
        self.end("double_stopped")
        tasks = [*self.tasks, *self.transactions]
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.media.close()
