"""One outgoing SIP call: INVITE with an SDP offer, provisional responses and early media,
digest authentication, the answer and its ACK, then RTP both ways until BYE from either side.

The adapter builds on :class:`SipCall`: :meth:`SipCall.start` places the call and returns what
was negotiated (or raises :class:`SipError` naming why not), :attr:`SipCall.line` paces the
user's audio and keys, ``on_packet`` gets the far end's media stamped on arrival, ``on_event``
everything else the far end does (:mod:`._far_end` answers its requests), and
:meth:`SipCall.facts` is the call's record for ``raw-endpoint-events.json``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable

from pydantic import JsonValue

from ._dialog import ClientTransaction, Dialog, branch_of
from ._digest import DigestError, authorization, best_challenge
from ._far_end import FarEnd
from ._line import RtpLine
from ._message import SipMessage
from ._record import CallRecord
from ._sdp import SdpError
from ._session import MediaSession
from ._transport import SipTransport, TransportError
from ._types import CallEvent, CallOptions, Negotiated, RtpPacket, SipError, error_for_status
from ._uri import parse_uri

logger = logging.getLogger(__name__)

HANG_UP_WAIT_SECONDS = 2.0
#: what makes the transport drop a TCP connection: a call then failing failed as hostile
FRAMING_HOSTILITIES = frozenset({"oversized_message", "too_many_headers"})


class SipCall:
    """One call to ``options.uri`` (see the module docstring); use once, then :meth:`close`."""

    def __init__(self, options: CallOptions, *, clock_ns: Callable[[], int],
                 on_packet: Callable[[RtpPacket], None],
                 on_event: Callable[[CallEvent], None]) -> None:
        self.options = options
        self._clock_ns = clock_ns
        self.record = CallRecord(on_event, clock_ns)
        self.media = MediaSession(options, clock_ns=clock_ns, on_packet=on_packet,
                                  record=self.record, on_key=self._rfc4733_key)
        self._sip: SipTransport | None = None
        self._dialog: Dialog | None = None
        self._far_end: FarEnd | None = None
        self._transactions: dict[tuple[str, str], ClientTransaction] = {}
        self._invite_tx: ClientTransaction | None = None
        self._invite_sent_ns: int | None = None
        self._ack: SipMessage | None = None
        self._cancelled = False
        self._rtp_timer: asyncio.TimerHandle | None = None
        self._hang_up: asyncio.Future[None] | None = None
        self.state = "idle"  # calling | answered | ended | failed
        self.setup_ms: float | None = None

    # --- the adapter's API --------------------------------------------------------------------

    @property
    def line(self) -> RtpLine:
        """The user's paced outbound line; there is one once :meth:`start` returned."""
        if self.media.line is None:
            raise RuntimeError("the call has no line before start() returned")
        return self.media.line

    @property
    def call_id(self) -> str | None:
        """The Call-ID of the call, once :meth:`start` has begun placing it."""
        return None if self._dialog is None else self._dialog.call_id

    @property
    def reliable(self) -> bool:
        """True over TCP: nothing is retransmitted."""
        return self._sip is not None and self._sip.reliable

    @property
    def negotiated(self) -> Negotiated | None:
        """What the answer (or a later re-INVITE) settled."""
        return self.media.negotiated

    async def start(self) -> Negotiated:
        """Place the call; raises :class:`SipError`. Cancelling it sends a CANCEL."""
        if self.state != "idle":
            raise RuntimeError("start() is called once")
        self.state = "calling"
        try:
            await self._open()
            received_ns, response = await self._invite_until_answered()
            return self._answered(received_ns, response)
        except asyncio.CancelledError:
            self._abandon()
            raise
        except SipError:
            self.state = "failed"
            raise

    async def hang_up(self) -> None:
        """BYE when answered, CANCEL while ringing; waits up to 2 s for the answer. Idempotent."""
        if self._hang_up is None:
            self._hang_up = asyncio.ensure_future(self._hang_up_once())
        await asyncio.shield(self._hang_up)

    async def close(self) -> None:
        """Release the sockets and timers; safe twice. A call still up gets one BYE, not
        waited for, so the far end is not left holding it."""
        if self.state == "answered" and self._dialog is not None and self._sip is not None:
            self.state = "ended"
            self._send(self._dialog.request("BYE"))
        if self._rtp_timer is not None:
            self._rtp_timer.cancel()
        for transaction in self._transactions.values():
            transaction.stop()
        if self._far_end is not None:
            self._far_end.stop()
        if self._sip is not None:
            self._sip.close()
        self.media.close()
        if self.state in ("calling", "answered"):
            self.state = "ended"

    def facts(self) -> dict[str, JsonValue]:
        """The call's record: SIP messages (credentials removed), RTP and key figures."""
        line = self.media.line
        return {
            "sip": {**self.record.sip_facts(), "setup_ms": self.setup_ms,
                    "call_id": self.call_id,
                    "reinvites": list(self._far_end.reinvites) if self._far_end else []},
            "rtp": self.media.facts(list(self.record.rtcp_reports)),
            "dtmf": {"sent": list(line.digits_sent) if line else [],
                     "received": list(self.record.keys_received)},
        }

    # --- placing the call ---------------------------------------------------------------------

    async def _open(self) -> None:
        local = self.options.local_address
        await self.media.open(session_id=secrets.randbits(31))
        uri = parse_uri(self.options.uri)
        try:
            self._sip = await SipTransport.open(
                self.options.effective_transport, local_address=local,
                remote=(uri.host.strip("[]"), uri.effective_port), clock_ns=self._clock_ns,
                on_message=self._on_message, on_problem=self.record.problem,
                on_closed=self._transport_closed)
        except TransportError as error:
            raise SipError("unreachable", str(error)) from None
        user = self.options.username or "voicelab"
        self._dialog = Dialog(
            call_id=f"{secrets.token_hex(12)}@voicelab", local_uri=f"sip:{user}@{uri.host}",
            remote_uri=self.options.uri, local_host=self._sip.local[0],
            local_port=self._sip.local[1], transport=self.options.effective_transport.upper(),
            user_agent=self.options.user_agent)
        self._far_end = FarEnd(self, self._dialog, self.record)

    async def _invite_until_answered(self) -> tuple[int, SipMessage]:
        assert self._dialog is not None
        invite = self._dialog.request(
            "INVITE", body=self.media.offer(), content_type="application/sdp",
            extra=list(self.options.headers.items()), in_dialog=False)
        deadline = asyncio.get_running_loop().time() + self.options.answer_timeout_seconds
        challenged = False
        while True:
            received_ns, response = await self._final_response(invite, deadline)
            status = response.status or 0
            if self._cancelled:  # hung up while it rang: the dispatcher ACKed (and BYEd) it
                raise SipError("no_answer", f"hung up before the answer ({status} "
                               f"{response.reason})", status=status)
            if status < 300:
                return received_ns, response
            if challenged and status == 403:  # the credentials were refused
                raise SipError("auth_refused", f"{status} {response.reason} after the "
                               "credentials", status=status)
            if status not in (401, 407) or challenged:
                raise error_for_status(status, response.reason)
            challenged = True
            invite = self._authorized(invite, response)

    def _authorized(self, invite: SipMessage, response: SipMessage) -> SipMessage:
        """The INVITE again (next CSeq, same Call-ID and tag) with digest credentials."""
        assert self._dialog is not None
        header, credentials = self._credentials(invite, response)
        return self._dialog.request(
            "INVITE", body=invite.body, content_type="application/sdp", in_dialog=False,
            extra=[*self.options.headers.items(), (header, credentials)])

    def _credentials(self, request: SipMessage, response: SipMessage) -> tuple[str, str]:
        """The header answering a 401/407 to ``request``; raises ``SipError(auth_refused)``."""
        status = response.status or 0
        username, password = self.options.username, self.options.password
        if username is None or password is None:
            raise SipError("auth_refused", f"{status} {response.reason}: no credentials set",
                           status=status)
        proxy = status == 407
        try:
            challenge = best_challenge(response.headers_named(
                "Proxy-Authenticate" if proxy else "WWW-Authenticate"))
        except DigestError as error:
            raise SipError("auth_refused", f"{status}: {error}", status=status) from None
        credentials = authorization(challenge, username=username, password=password,
                                    method=request.method or "", uri=request.request_uri or "")
        return "Proxy-Authorization" if proxy else "Authorization", credentials

    async def _final_response(self, invite: SipMessage, deadline: float,
                              ) -> tuple[int, SipMessage]:
        transaction = self._invite_tx = self._start_transaction(invite)
        if self._invite_sent_ns is None:
            self._invite_sent_ns = self._clock_ns()
        remaining = max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            result = await asyncio.wait_for(asyncio.shield(transaction.final), remaining)
        except TimeoutError:
            await self._cancel_invite()
            raise SipError("no_answer", "no answer within "
                           f"{self.options.answer_timeout_seconds:g} s") from None
        if result is None:
            raise SipError("no_answer", "no response to the INVITE")
        return result

    def _answered(self, received_ns: int, response: SipMessage) -> Negotiated:
        assert self._dialog is not None and self._invite_tx is not None
        invite = self._invite_tx.request
        if self._invite_sent_ns is not None:
            self.setup_ms = (received_ns - self._invite_sent_ns) / 1e6
        self._dialog.learn(response)
        credentials = [(name, value) for name, value in invite.headers
                       if name in ("Authorization", "Proxy-Authorization")]
        self._ack = self._dialog.request("ACK", cseq=invite.cseq()[0], extra=credentials)
        self._send(self._ack)
        self.state = "answered"
        try:
            negotiated = self.media.use_sdp(response.body) if response.body \
                else self.media.negotiated
        except SdpError as error:
            self._abandon()
            raise SipError("hostile" if error.hostile else "protocol_error",
                           f"the answer's SDP: {error}") from None
        if negotiated is None:
            self._abandon()
            raise SipError("protocol_error", "the answer had no SDP")
        self.media.start_line(self._send_info_key)
        self._rtp_timer = asyncio.get_running_loop().call_later(
            self.options.rtp_timeout_seconds, self._check_rtp)
        self.record.event("answered", received_ns, {"status": response.status,
                                                    "setup_ms": self.setup_ms})
        return negotiated

    # --- ending it ----------------------------------------------------------------------------

    async def _hang_up_once(self) -> None:
        if self.media.line is not None:
            self.media.line.stop()
        if self.state == "answered" and self._dialog is not None:
            self.state = "ended"
            bye = self._dialog.request("BYE")
            result = await self._wait_final(self._start_transaction(bye))
            if result is not None and result[1].status in (401, 407):  # a PBX challenges BYEs
                try:
                    header, credentials = self._credentials(bye, result[1])
                except SipError:
                    return
                again = self._dialog.request("BYE", extra=[(header, credentials)])
                await self._wait_final(self._start_transaction(again))
        elif self.state == "calling":
            await self._cancel_invite()
            self.state = "ended"

    async def _cancel_invite(self) -> None:
        """CANCEL the pending INVITE once a provisional response came (RFC 3261 9.1), and ACK
        its final response; without one, only stop retransmitting it."""
        transaction = self._invite_tx
        if transaction is None or self._cancelled or self._dialog is None:
            return
        self._cancelled = True
        if not transaction.provisional:
            transaction.stop()
            return
        self._start_transaction(self._dialog.cancel_for(transaction.request))
        await self._wait_final(transaction)  # its 487 (or a late 200) is ACKed on arrival

    async def _wait_final(self, transaction: ClientTransaction,
                          ) -> tuple[int, SipMessage] | None:
        try:
            return await asyncio.wait_for(asyncio.shield(transaction.final),
                                          HANG_UP_WAIT_SECONDS)
        except (TimeoutError, SipError):
            return None

    def _abandon(self) -> None:
        """Leave the call without waiting: BYE if answered, CANCEL if ringing."""
        if self._dialog is None:
            return
        if self.state == "answered":
            self._start_transaction(self._dialog.request("BYE"))
        elif self._invite_tx is not None and self._invite_tx.provisional \
                and not self._cancelled:
            self._cancelled = True
            self._start_transaction(self._dialog.cancel_for(self._invite_tx.request))
        self.state = "ended"

    def ended_by_far_end(self) -> None:
        self.state = "ended"
        if self.media.line is not None:
            self.media.line.stop()

    # --- messages -----------------------------------------------------------------------------

    def _start_transaction(self, request: SipMessage) -> ClientTransaction:
        assert self._sip is not None
        transaction = ClientTransaction(request, self._send, reliable=self._sip.reliable,
                                        on_provisional=self._provisional)
        self._transactions[(transaction.branch, transaction.method)] = transaction
        if len(self._transactions) > 64:  # finished ones go first
            for key in [k for k, t in self._transactions.items() if t.final.done()][:32]:
                del self._transactions[key]
        transaction.start()
        return transaction

    def _send(self, message: SipMessage) -> bool:
        if self._sip is None:
            return False
        self.record.message("sent", self._clock_ns(), message)
        return self._sip.send(message)

    def send_reply(self, reply: Callable[[SipMessage], bool], message: SipMessage) -> None:
        self.record.message("sent", self._clock_ns(), message)
        reply(message)

    def _on_message(self, received_ns: int, message: SipMessage,
                    reply: Callable[[SipMessage], bool]) -> None:
        """Every parsed message from the far end; one that lacks what it needs (a CSeq, a
        Via, a To that parses) is counted as malformed, never raised into the loop."""
        self.record.message("received", received_ns, message)
        try:
            if message.method is None:
                self._on_response(received_ns, message)
            elif self._far_end is not None:
                self._far_end.request(received_ns, message, reply)
        except ValueError as error:  # MessageError, UriError, SdpError are ValueErrors
            self.record.problem("malformed", f"{message.start_line[:60]}: {error}")

    def _on_response(self, received_ns: int, message: SipMessage) -> None:
        _, method = message.cseq()
        branch = branch_of(message) or ""
        transaction = self._transactions.get((branch, method))
        if transaction is None and method == "INVITE" and self._invite_tx is not None \
                and self._invite_tx.branch == branch:
            transaction = self._invite_tx  # pruned from the table, still ours
        if transaction is None:
            return
        if method == "INVITE" and (message.status or 0) >= 200:
            self._acknowledge(transaction.request, message)
        if not transaction.final.done():
            transaction.response(received_ns, message)

    def _acknowledge(self, invite: SipMessage, response: SipMessage) -> None:
        """ACK every final response to our INVITE as it arrives, retransmissions too: a
        failure in its own transaction (17.1.1.3); a 2xx once answered with the call's ACK
        again (13.2.2.4), or, when we had given up on the call, with an ACK and a BYE."""
        assert self._dialog is not None
        if (response.status or 0) >= 300:
            self._send(self._dialog.ack_for_failure(invite, response))
        elif self._ack is not None:
            self._send(self._ack)
        elif self._cancelled or self.state in ("ended", "failed"):
            self._dialog.learn(response)
            self._ack = self._dialog.request("ACK", cseq=invite.cseq()[0])
            self._send(self._ack)
            self._start_transaction(self._dialog.request("BYE"))

    def _provisional(self, received_ns: int, response: SipMessage) -> None:
        early_media = False
        if response.body and (response.status or 0) > 100:
            try:
                self.media.use_sdp(response.body)
                early_media = True
            except SdpError as error:
                if error.hostile:
                    self.record.hostile("oversized_sdp", received_ns, str(error))
        if (response.status or 0) > 100:
            self.record.event("provisional", received_ns, {
                "status": response.status, "reason": response.reason,
                "early_media": early_media})

    def _transport_closed(self, reason: str) -> None:
        """The connection is gone (TCP closed, or ICMP says nobody listens over UDP); when we
        ended it because the far end broke a bound, the call fails as ``hostile``."""
        broken = sorted(set(self.record.hostile_counts) & FRAMING_HOSTILITIES)
        error = SipError("hostile", f"{', '.join(broken)}; {reason}") if broken \
            else SipError("unreachable", reason)
        for transaction in self._transactions.values():
            transaction.fail(error)
        if self.state == "answered":
            self.record.event("transport_closed", self._clock_ns(), {"reason": reason})

    def _check_rtp(self) -> None:
        if self.media.receiver.first_ns is None and self.state == "answered":
            self.record.event("no_rtp", self._clock_ns(), {
                "seconds": self.options.rtp_timeout_seconds})

    def _rfc4733_key(self, digit: str, duration_ms: float, received_ns: int) -> None:
        self.record.key(digit, "rfc4733", duration_ms, received_ns)

    def _send_info_key(self, digit: str, duration_ms: int) -> None:
        if self._dialog is None or self.state != "answered":
            return
        body = f"Signal={digit}\r\nDuration={duration_ms}\r\n".encode("ascii")
        self._start_transaction(self._dialog.request(
            "INFO", body=body, content_type="application/dtmf-relay"))
