"""What a call keeps for its facts, within bounds: the SIP messages (credentials removed),
the far end's keys and RTCP reports, problems and hostile behaviour, each reported once.

Every list here is capped, so a far end that floods us costs counters, not memory.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import JsonValue

from ._message import SipMessage
from ._types import CallEvent

MAX_MESSAGES = 200
MAX_HEADER_CHARS = 512
MAX_KEYS = 1000
MAX_RTCP_RECORDS = 100
MAX_KEYS_PER_SECOND = 100
MALFORMED_LIMIT = 20
CREDENTIAL_HEADERS = frozenset({"Authorization", "Proxy-Authorization"})
REMOVED = "(credentials removed)"


class CallRecord:
    """The bounded record of one call, and the one way its events reach the adapter."""

    def __init__(self, on_event: Callable[[CallEvent], None],
                 clock_ns: Callable[[], int]) -> None:
        self._on_event = on_event
        self._clock_ns = clock_ns
        self.messages: list[dict[str, JsonValue]] = []
        self.messages_dropped = 0
        self.problems: dict[str, int] = {}
        self.hostile_counts: dict[str, int] = {}
        self.keys_received: list[dict[str, JsonValue]] = []
        self.rtcp_reports: list[JsonValue] = []
        self.rtcp_dropped = 0
        self._key_window_start = 0
        self._key_window_count = 0

    def event(self, kind: str, received_ns: int, data: dict[str, JsonValue]) -> None:
        self._on_event(CallEvent(kind=kind, received_ns=received_ns, data=data))

    def hostile(self, what: str, received_ns: int, detail: str) -> None:
        """Count hostile behaviour; the first of each kind becomes a ``hostile`` event."""
        count = self.hostile_counts.get(what, 0) + 1
        self.hostile_counts[what] = count
        if count == 1:
            self.event("hostile", received_ns, {"what": what, "detail": detail[:200]})

    def problem(self, kind: str, detail: str) -> None:
        """A SIP message that could not be taken (the transport's ``on_problem``)."""
        count = self.problems.get(kind, 0) + 1
        self.problems[kind] = count
        if kind != "malformed":
            self.hostile(kind, self._clock_ns(), detail)
        elif count == MALFORMED_LIMIT:
            self.hostile("malformed_messages", self._clock_ns(),
                         f"{count} messages that do not parse")

    def message(self, direction: str, ns: int, message: SipMessage) -> None:
        if len(self.messages) >= MAX_MESSAGES:
            self.messages_dropped += 1
            return
        headers: list[JsonValue] = [
            [name, REMOVED if name in CREDENTIAL_HEADERS else value[:MAX_HEADER_CHARS]]
            for name, value in message.headers]
        self.messages.append({"direction": direction, "ns": ns,
                              "start_line": message.start_line[:MAX_HEADER_CHARS],
                              "headers": headers, "body_bytes": len(message.body)})

    def rtcp(self, received_ns: int, reports: list[dict[str, JsonValue]]) -> None:
        if len(self.rtcp_reports) >= MAX_RTCP_RECORDS:
            self.rtcp_dropped += 1
            return
        self.rtcp_reports.append({"ns": received_ns, "reports": list(reports)})
        self.event("rtcp", received_ns, {"reports": list(reports)})

    def key(self, digit: str, method: str, duration_ms: float | None, received_ns: int) -> None:
        """A key the far end pressed; over :data:`MAX_KEYS_PER_SECOND` is a ``dtmf_storm``."""
        if received_ns - self._key_window_start >= 1_000_000_000:
            self._key_window_start, self._key_window_count = received_ns, 0
        self._key_window_count += 1
        if self._key_window_count > MAX_KEYS_PER_SECOND:
            self.hostile("dtmf_storm", received_ns,
                         f"over {MAX_KEYS_PER_SECOND} key events in a second")
            return
        data: dict[str, JsonValue] = {"digit": digit, "method": method,
                                      "duration_ms": duration_ms}
        if len(self.keys_received) < MAX_KEYS:
            self.keys_received.append({**data, "ns": received_ns})
        self.event("dtmf", received_ns, data)

    def sip_facts(self) -> dict[str, JsonValue]:
        return {"messages": list(self.messages), "messages_dropped": self.messages_dropped,
                "problems": dict(self.problems), "hostile": dict(self.hostile_counts)}
