"""Requests the far end sends within the call, answered as RFC 3261 asks of a user agent.

BYE: 200, reported once as ``bye`` (over :data:`MAX_BYES` is a ``bye_storm``). A re-INVITE:
200 with our SDP and the direction reflected (hold is the far end's ``sendonly``/``inactive``),
or 488 when its SDP has no codec we offered; our 200 is retransmitted over UDP until its ACK
(Timer G). INFO with ``application/dtmf-relay`` or ``application/dtmf``: a key. OPTIONS: 200.
Anything else in the dialog: 501. A retransmitted request gets the response it got before.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from pydantic import JsonValue

from ._dialog import T1_SECONDS, T2_SECONDS, TRANSACTION_TIMEOUT_SECONDS, Dialog, branch_of
from ._message import MessageError, SipMessage
from ._record import CallRecord
from ._sdp import SdpError, parse_sdp, reflect_direction
from ._session import MediaSession
from ._types import Negotiated

Reply = Callable[[SipMessage], bool]


class CallSide(Protocol):
    """What the far end's requests need of the call (:class:`~._call.SipCall` is one)."""

    state: str
    media: MediaSession

    @property
    def reliable(self) -> bool:
        """The transport is TCP: nothing is retransmitted."""

    @property
    def negotiated(self) -> Negotiated | None: ...

    def ended_by_far_end(self) -> None:
        """The far end hung up."""

    def send_reply(self, reply: Reply, message: SipMessage) -> None:
        """Send ``message`` (a response) through ``reply``."""
MAX_BYES = 20
#: our 200s to re-INVITEs retransmitted at once while waiting for their ACKs
MAX_PENDING_ACKS = 8
MAX_REINVITE_RECORDS = 50
_REMEMBERED = 32
_KEYS = "0123456789*#ABCD"
_NUMBERED_KEYS = {"10": "*", "11": "#", "12": "A", "13": "B", "14": "C", "15": "D"}


def info_key(message: SipMessage) -> tuple[str, float | None] | None:
    """The key an INFO carries (``Signal=5`` / ``Duration=160``, or a bare key), if any."""
    content_type = (message.header("Content-Type") or "").split(";")[0].strip().lower()
    text = message.body[:1024].decode("ascii", errors="replace")
    duration: float | None = None
    if content_type == "application/dtmf-relay":
        fields = {}
        for line in text.splitlines()[:16]:
            name, equals, value = line.partition("=")
            if equals:
                fields[name.strip().lower()] = value.strip()
        signal = fields.get("signal", "")
        duration_text = fields.get("duration", "")
        duration = float(duration_text) if duration_text.isdigit() else None
    elif content_type == "application/dtmf":
        signal = text.strip()
    else:
        return None
    key = _NUMBERED_KEYS.get(signal, signal.upper())
    return (key, duration) if len(key) == 1 and key in _KEYS else None


class FarEnd:
    """Answers the far end's requests for one call."""

    def __init__(self, call: CallSide, dialog: Dialog, record: CallRecord) -> None:
        self._call = call
        self._dialog = dialog
        self._record = record
        self._answered: OrderedDict[tuple[str, str], SipMessage] = OrderedDict()
        self._retransmits: dict[int, asyncio.TimerHandle] = {}
        self._sdp_version = 1
        self.byes = 0
        self.reinvites: list[dict[str, JsonValue]] = []

    def stop(self) -> None:
        for timer in self._retransmits.values():
            timer.cancel()
        self._retransmits.clear()

    def request(self, received_ns: int, request: SipMessage, reply: Reply) -> None:
        """Answer one request; raises :class:`MessageError` for one we cannot answer."""
        method = request.method or ""
        if method == "ACK":
            self._acked(request)
            return
        number, cseq_method = request.cseq()
        if cseq_method != method or not request.headers_named("Via") or number > 2**31:
            raise MessageError("malformed", f"a {method[:20]} without a matching CSeq or Via")
        key = (branch_of(request) or "", method)
        if key[0] and key in self._answered:
            self._call.send_reply(reply, self._answered[key])  # a retransmission
            return
        if request.header("Call-ID") != self._dialog.call_id and method != "OPTIONS":
            # (an OPTIONS outside the dialog is a keep-alive ping: it gets its 200 too)
            response = self._dialog.response(request, 481, "Call/Transaction Does Not Exist")
        else:
            response = self._answer(received_ns, request)
        self._answered[key] = response
        while len(self._answered) > _REMEMBERED:
            self._answered.popitem(last=False)
        self._call.send_reply(reply, response)
        if method == "INVITE" and (response.status or 0) < 300:
            self._retransmit(request, response, reply, T1_SECONDS, 0.0)

    def _answer(self, received_ns: int, request: SipMessage) -> SipMessage:
        method = request.method
        if method == "BYE":
            return self._bye(received_ns, request)
        if method == "INVITE":
            return self._reinvite(received_ns, request)
        if method == "INFO":
            key = info_key(request)
            if key is not None:
                self._record.key(key[0], "info", key[1], received_ns)
            return self._dialog.response(request, 200, "OK")
        if method == "OPTIONS":
            return self._dialog.response(request, 200, "OK", extra=[("Accept", "application/sdp")])
        if method == "CANCEL":
            return self._dialog.response(request, 481, "Call/Transaction Does Not Exist")
        return self._dialog.response(request, 501, "Not Implemented")

    def _bye(self, received_ns: int, request: SipMessage) -> SipMessage:
        self.byes += 1
        if self.byes == 1:
            self._call.ended_by_far_end()
            self._record.event("bye", received_ns, {"reason": request.header("Reason")})
        elif self.byes > MAX_BYES:
            self._record.hostile("bye_storm", received_ns, f"over {MAX_BYES} BYE requests")
        return self._dialog.response(request, 200, "OK")

    def _reinvite(self, received_ns: int, request: SipMessage) -> SipMessage:
        if self._call.state != "answered":
            return self._dialog.response(request, 491, "Request Pending")
        direction = "sendrecv"
        negotiated = self._call.negotiated
        try:
            if request.body:
                audio = parse_sdp(request.body).audio()
                direction = audio.direction if audio is not None else direction
                negotiated = self._call.media.use_sdp(request.body)
        except SdpError as error:
            if error.hostile:
                self._record.hostile("oversized_sdp", received_ns, str(error))
            self._note_reinvite(received_ns, {"accepted": False, "reason": str(error)[:200]})
            return self._dialog.response(request, 488, "Not Acceptable Here")
        assert negotiated is not None
        self._sdp_version += 1
        answered = reflect_direction(direction)
        self._note_reinvite(received_ns, {"accepted": True, "direction": direction,
                                          "answered_direction": answered,
                                          "codec": negotiated.codec,
                                          "remote_rtp": list(negotiated.remote_rtp)})
        return self._dialog.response(
            request, 200, "OK", body=self._call.media.answer(answered, self._sdp_version),
            content_type="application/sdp")

    def _note_reinvite(self, received_ns: int, data: dict[str, JsonValue]) -> None:
        if len(self.reinvites) < MAX_REINVITE_RECORDS:
            self.reinvites.append({**data, "ns": received_ns})
        self._record.event("reinvite", received_ns, data)

    def _retransmit(self, request: SipMessage, response: SipMessage, reply: Reply,
                    interval: float, elapsed: float) -> None:
        """Timer G: our 2xx again until its ACK, at most 64*T1 (RFC 3261 13.3.1.4)."""
        if self._call.reliable or elapsed >= TRANSACTION_TIMEOUT_SECONDS:
            return
        number = request.cseq()[0]
        if number not in self._retransmits and len(self._retransmits) >= MAX_PENDING_ACKS:
            return  # a storm of re-INVITEs: the newest are answered once, not retransmitted

        def again() -> None:
            if number in self._retransmits:
                self._call.send_reply(reply, response)
                self._retransmit(request, response, reply, min(interval * 2, T2_SECONDS),
                                 elapsed + interval)

        self._retransmits[number] = asyncio.get_running_loop().call_later(interval, again)

    def _acked(self, ack: SipMessage) -> None:
        try:
            number = ack.cseq()[0]
        except ValueError:
            return
        timer = self._retransmits.pop(number, None)
        if timer is not None:
            timer.cancel()
