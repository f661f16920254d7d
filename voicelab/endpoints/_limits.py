"""Per-connection limits on what a product sends: a product is hostile input too.

Every WebSocket adapter (protocol v1, Twilio, pipecat) charges each message to an
:class:`InboundBudget` before decoding it (bytes per second) and each decoded event other than
audio before the runner records it (events per second and in all, and the bytes of the
messages they keep as raw records). Audio is bounded where it is recorded (the flood limit,
``limits.max_product_audio_speed``) and, before that, by the sample rates a frame may declare
(:data:`MIN_WIRE_SAMPLE_RATE_HZ`..:data:`MAX_WIRE_SAMPLE_RATE_HZ`: resampling a frame labelled
1 Hz to 24 kHz would multiply it 24,000 times). Past a limit the adapter reports
``error{resource_limit}`` naming the limit and the message type that reached it and drops the
product's further messages undecoded: the runner ends the call on the error (exit 4), with
the evidence recorded until then.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from pydantic import Field

from ._protocol import EndpointEvent
from ._settings import AdapterSettings

__all__ = ["MAX_WIRE_SAMPLE_RATE_HZ", "MIN_WIRE_SAMPLE_RATE_HZ", "InboundBudget", "InboundLimits",
           "limit_error"]

#: The sample rates a product's audio frame may declare (telephony's 8 kHz to 48 kHz).
MIN_WIRE_SAMPLE_RATE_HZ = 8_000
MAX_WIRE_SAMPLE_RATE_HZ = 48_000


class InboundLimits(AdapterSettings):
    """``endpoint.settings.limits`` of a WebSocket adapter. A rate is a token bucket: the
    product may send ``*_burst`` at once, and then ``*_per_second`` on average."""

    #: every message, audio included, as received: ~60 times real-time base64 PCM
    bytes_per_second: Annotated[float, Field(gt=0)] = 4 * 1024 * 1024
    bytes_burst: Annotated[int, Field(gt=0)] = 64 * 1024 * 1024
    #: events other than audio (transcripts, tool calls, marks, unknown messages...)
    events_per_second: Annotated[float, Field(gt=0)] = 1_000.0
    events_burst: Annotated[int, Field(gt=0)] = 10_000
    #: ... in all, and the bytes of the messages they keep as raw records
    max_events: Annotated[int, Field(gt=0)] = 100_000
    max_event_bytes: Annotated[int, Field(gt=0)] = 64 * 1024 * 1024


class _Bucket:
    def __init__(self, rate: float, burst: float):
        self.rate, self.burst = rate, burst
        self.level = burst
        self.at_ns: int | None = None

    def take(self, amount: float, now_ns: int) -> bool:
        if self.at_ns is not None:
            self.level = min(self.burst, self.level + (now_ns - self.at_ns) / 1e9 * self.rate)
        self.at_ns = now_ns
        if amount > self.level:
            return False
        self.level -= amount
        return True


class InboundBudget:
    """What one connection has received, against its :class:`InboundLimits`. Each ``charge``
    returns None within the limits, else the one-line problem (and every later charge
    returns it again: the connection is over)."""

    def __init__(self, limits: InboundLimits | None = None):
        self.limits = limits = limits or InboundLimits()
        self._bytes = _Bucket(limits.bytes_per_second, limits.bytes_burst)
        self._events = _Bucket(limits.events_per_second, limits.events_burst)
        self.events_by_type: Counter[str] = Counter()
        self.event_bytes = 0
        self.exceeded: str | None = None

    def charge_message(self, size: int, now_ns: int) -> str | None:
        """One message of ``size`` bytes (characters for text) as it arrived."""
        if self.exceeded is None and not self._bytes.take(size, now_ns):
            rate = self.limits.bytes_per_second / 2 ** 20
            self.exceeded = (f"the product sent more than {rate:g} MiB/s (after a burst of "
                             f"{self.limits.bytes_burst / 2 ** 20:g} MiB)")
        return self.exceeded

    def charge_event(self, kind: str, size: int, now_ns: int) -> str | None:
        """One decoded event other than audio, of ``kind`` (its message type), kept with a raw
        record of ``size`` bytes."""
        if self.exceeded is not None:
            return self.exceeded
        self.events_by_type[kind] += 1
        self.event_bytes += size
        limits = self.limits
        total = sum(self.events_by_type.values())
        if total > limits.max_events:
            self.exceeded = f"the product sent more than {limits.max_events:,} events"
        elif self.event_bytes > limits.max_event_bytes:
            self.exceeded = (f"the product's events other than audio exceeded "
                             f"{limits.max_event_bytes / 2 ** 20:g} MiB")
        elif not self._events.take(1, now_ns):
            self.exceeded = (f"the product sent more than {limits.events_per_second:g} events "
                             f"a second (after a burst of {limits.events_burst:,})")
        if self.exceeded is not None:
            top, count = self.events_by_type.most_common(1)[0]
            self.exceeded += f", {count:,} of them {top}"
        return self.exceeded

    def charge(self, event: EndpointEvent, size: int, now_ns: int) -> str | None:
        """:meth:`charge_event` for a decoded event (audio is bounded where it is recorded)."""
        if event.type == "audio_delta":
            return self.exceeded
        raw = event.raw if isinstance(event.raw, dict) else {}
        name = raw.get("type") or raw.get("event")
        kind = str(name)[:64] if isinstance(name, str) and name else event.type
        return self.charge_event(kind, size, now_ns)


def limit_error(problem: str, now_ns: int) -> EndpointEvent:
    """The ``resource_limit`` error that ends the call."""
    message = f"{problem}; its further messages are dropped (endpoint.settings.limits)"
    return EndpointEvent("error", now_ns, text=message, data={
        "code": "resource_limit", "message": message, "origin": "adapter"})
