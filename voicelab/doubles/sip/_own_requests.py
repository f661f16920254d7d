"""The double's own requests in a call's dialog (RFC 3261 12.2.1.1): a BYE, a re-INVITE, the
ACK of a 2xx. Each gets the next local CSeq; over UDP a request is sent again until its answer
comes (Timer E: ``_timers.resend``), and a 2xx to a re-INVITE is acknowledged, again whenever
it is sent again. Only the first answer to a request the double waits for is reported: a
retransmitted answer, or the answer to a storm's request, is not.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Protocol

from pydantic import JsonValue

from ._links import Link
from ._sip import SipError, SipMessage, dialog_request
from ._timers import resend


class Dialog(Protocol):
    """What the double's own requests need of their call (``_call.SipCall``)."""

    invite: SipMessage | None
    to_tag: str
    link: Link

    def contact(self) -> list[tuple[str, str]]: ...

    def spawn(self, work: Coroutine[None, object, object], *, outlives: bool = False
              ) -> None: ...

    def note(self, kind: str, **details: JsonValue) -> None: ...

    def violation(self, reason: str) -> None: ...


class OwnRequests:
    """A call's requests to the caller and the answers it waits for."""

    def __init__(self, dialog: Dialog) -> None:
        self.dialog = dialog
        self.local_cseq = 0
        self.waiting: set[tuple[int, str]] = set()  # (CSeq number, method) not yet answered

    def send(self, method: str, *, body: bytes = b"", extra: list[tuple[str, str]] | None = None,
             cseq: int | None = None, retransmit: bool = True) -> bytes:
        """A request in the dialog, waiting for its answer (not an ACK, nor a storm's:
        ``retransmit=False``); over UDP sent again until answered."""
        dialog = self.dialog
        assert dialog.invite is not None
        if cseq is None:
            self.local_cseq += 1
            cseq = self.local_cseq
        link = dialog.link
        data = dialog_request(dialog.invite, method=method, cseq=cseq, to_tag=dialog.to_tag,
                              transport=link.transport, local=link.local,
                              extra=[*dialog.contact(), *(extra or [])], body=body)
        link.send(data)
        if retransmit and method != "ACK":
            self.waiting.add((cseq, method))
            if link.transport == "UDP":
                dialog.spawn(resend(link.send, data,
                                    waiting=lambda: (cseq, method) in self.waiting),
                             outlives=True)
        return data

    def answered(self, message: SipMessage) -> None:
        """A response from the caller: the answer to one of these requests, or not."""
        try:
            number, method = message.cseq
        except SipError:
            self.dialog.violation("a response without a CSeq")
            return
        status = message.status or 0
        if status < 200:
            return
        if (number, method) not in self.waiting:
            if method == "INVITE" and 200 <= status < 300:
                self.send("ACK", cseq=number)  # a 2xx sent again: ACK it again
            return  # a retransmission, or the answer to a storm's request: not reported
        self.waiting.discard((number, method))
        if method == "INVITE":
            if 200 <= status < 300:
                self.send("ACK", cseq=number)
            self.dialog.note("reinvite_answered", status=status)
        elif method == "BYE":
            self.dialog.note("bye_answered", status=status)
