"""One call's dialog (RFC 3261 section 12) and its client transactions (section 17.1).

:class:`Dialog` builds every request and response of the call with the right Call-ID, tags,
CSeq, Via branch (``z9hG4bK`` magic cookie, a new one per transaction), route set and Contact.
:class:`ClientTransaction` sends one request and, over UDP, retransmits it (Timer A for an
INVITE until any response; Timer E for others, capped at T2) until its final response or its
timeout (64*T1, Timers B/F).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ._message import SipMessage, via_params
from ._uri import UriError, parse_name_addr, parse_uri

T1_SECONDS = 0.5
T2_SECONDS = 4.0
TRANSACTION_TIMEOUT_SECONDS = 64 * T1_SECONDS
ALLOW = "INVITE, ACK, BYE, CANCEL, OPTIONS, INFO"


def new_branch() -> str:
    return "z9hG4bK" + secrets.token_hex(8)


def new_tag() -> str:
    return secrets.token_hex(6)


@dataclass
class Dialog:
    """What the call's messages share; ``remote_tag``/``remote_target``/``route_set`` are
    learnt from the far end's answer."""

    call_id: str
    local_uri: str
    remote_uri: str
    local_host: str
    local_port: int
    transport: str  # "UDP" | "TCP"
    user_agent: str
    local_tag: str = field(default_factory=new_tag)
    remote_tag: str | None = None
    remote_target: str | None = None
    route_set: list[str] = field(default_factory=list)
    cseq: int = 0

    @property
    def _hostport(self) -> str:
        host = f"[{self.local_host}]" if ":" in self.local_host else self.local_host
        return f"{host}:{self.local_port}"

    @property
    def contact(self) -> str:
        suffix = ";transport=tcp" if self.transport == "TCP" else ""
        return f"<sip:voicelab@{self._hostport}{suffix}>"

    def via(self, branch: str) -> str:
        return f"SIP/2.0/{self.transport} {self._hostport};branch={branch};rport"

    def request(self, method: str, *, body: bytes = b"", content_type: str | None = None,
                extra: Sequence[tuple[str, str]] = (), in_dialog: bool = True,
                cseq: int | None = None) -> SipMessage:
        """A new request of the dialog (a new branch; the next CSeq unless given)."""
        if cseq is None:
            self.cseq += 1
            cseq = self.cseq
        to = f"<{self.remote_uri}>"
        if in_dialog and self.remote_tag is not None:
            to += f";tag={self.remote_tag}"
        target = self.remote_target if in_dialog and self.remote_target else self.remote_uri
        headers = [("Via", self.via(new_branch())), ("Max-Forwards", "70"),
                   ("From", f"<{self.local_uri}>;tag={self.local_tag}"), ("To", to),
                   ("Call-ID", self.call_id), ("CSeq", f"{cseq} {method}")]
        if in_dialog:
            headers += [("Route", route) for route in self.route_set]
        if method in ("INVITE", "OPTIONS"):
            headers += [("Contact", self.contact), ("Allow", ALLOW)]
        headers.append(("User-Agent", self.user_agent))
        headers += list(extra)
        if content_type is not None:
            headers.append(("Content-Type", content_type))
        return SipMessage(method=method, request_uri=target, headers=headers, body=body)

    def ack_for_failure(self, invite: SipMessage, response: SipMessage) -> SipMessage:
        """The ACK of a non-2xx final response: part of the INVITE's transaction (17.1.1.3)."""
        headers = [("Via", invite.header("Via") or ""), ("Max-Forwards", "70"),
                   ("From", invite.header("From") or ""),
                   ("To", response.header("To") or invite.header("To") or ""),
                   ("Call-ID", self.call_id), ("CSeq", f"{invite.cseq()[0]} ACK")]
        headers += [("Route", route) for route in invite.headers_named("Route")]
        return SipMessage(method="ACK", request_uri=invite.request_uri, headers=headers)

    def cancel_for(self, invite: SipMessage) -> SipMessage:
        """The CANCEL of a pending INVITE: its Request-URI, Via and CSeq number (9.1)."""
        headers = [("Via", invite.header("Via") or ""), ("Max-Forwards", "70"),
                   ("From", invite.header("From") or ""), ("To", invite.header("To") or ""),
                   ("Call-ID", self.call_id), ("CSeq", f"{invite.cseq()[0]} CANCEL"),
                   ("User-Agent", self.user_agent)]
        headers += [("Route", route) for route in invite.headers_named("Route")]
        return SipMessage(method="CANCEL", request_uri=invite.request_uri, headers=headers)

    def learn(self, response: SipMessage) -> None:
        """The far end's tag, target and route set from a dialog-creating response (12.1.2);
        a value that does not parse is ignored (the dialog keeps what it had)."""
        try:
            to = parse_name_addr(response.header("To") or "")
            self.remote_tag = to.tag or self.remote_tag
            contact = response.header("Contact")
            if contact is not None:
                target = parse_name_addr(contact).uri
                parse_uri(target)
                self.remote_target = target
        except UriError:
            pass
        routes = response.headers_named("Record-Route")
        if routes:
            self.route_set = list(reversed(routes[:16]))

    def response(self, request: SipMessage, status: int, reason: str, *, body: bytes = b"",
                 content_type: str | None = None,
                 extra: Sequence[tuple[str, str]] = ()) -> SipMessage:
        """A response to the far end's request: its Via, From, To, Call-ID, CSeq copied (8.2.6)."""
        headers = [("Via", via) for via in request.headers_named("Via")]
        to = request.header("To") or ""
        if "tag=" not in to:
            to += f";tag={self.local_tag}"
        headers += [("From", request.header("From") or ""), ("To", to),
                    ("Call-ID", request.header("Call-ID") or ""),
                    ("CSeq", request.header("CSeq") or ""), ("Server", self.user_agent)]
        if request.method == "INVITE" and status < 300:
            headers += [("Contact", self.contact), ("Allow", ALLOW)]
        headers += list(extra)
        if content_type is not None:
            headers.append(("Content-Type", content_type))
        return SipMessage(status=status, reason=reason, headers=headers, body=body)


def branch_of(message: SipMessage) -> str | None:
    via = message.header("Via")
    if via is None:
        return None
    branch = via_params(via).get("branch")
    return branch if branch else None


class ClientTransaction:
    """One request until its final response: ``final`` resolves with it, or with None on
    timeout; :meth:`fail` ends it with an error (the transport is gone)."""

    def __init__(self, request: SipMessage, send: Callable[[SipMessage], bool], *,
                 reliable: bool, on_provisional: Callable[[int, SipMessage], None],
                 ) -> None:
        self.request = request
        self.method = request.method or ""
        self.branch = branch_of(request) or ""
        self._send = send
        self._reliable = reliable
        self._on_provisional = on_provisional
        loop = asyncio.get_running_loop()
        self.final: asyncio.Future[tuple[int, SipMessage] | None] = loop.create_future()
        self._timer: asyncio.TimerHandle | None = None
        self._timeout = loop.call_later(TRANSACTION_TIMEOUT_SECONDS, self._expire)
        self._interval = T1_SECONDS
        self.provisional = False

    def start(self) -> None:
        self._send(self.request)
        if not self._reliable:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._again)

    def _again(self) -> None:
        if self.final.done() or (self.method == "INVITE" and self.provisional):
            return
        self._send(self.request)
        self._interval = self._interval * 2 if self.method == "INVITE" \
            else min(self._interval * 2, T2_SECONDS)
        self._timer = asyncio.get_running_loop().call_later(self._interval, self._again)

    def response(self, received_ns: int, response: SipMessage) -> None:
        status = response.status or 0
        if status < 200:
            self.provisional = True
            if self.method == "INVITE":  # Timer B ends with the Calling state (17.1.1.2)
                self._timeout.cancel()
            if not self.final.done():
                self._on_provisional(received_ns, response)
            return
        if not self.final.done():
            self.final.set_result((received_ns, response))
        self.stop()

    def _expire(self) -> None:
        if not self.final.done():
            self.final.set_result(None)
        self.stop()

    def fail(self, error: Exception) -> None:
        if not self.final.done():
            self.final.set_exception(error)
            self.final.exception()  # retrieved: nobody may be waiting any more
        self.stop()

    def stop(self) -> None:
        for timer in (self._timer, self._timeout):
            if timer is not None:
                timer.cancel()
