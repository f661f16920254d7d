"""Twilio Media Streams on the wire, with voicelab as Twilio: what it sends, and the decoder for
what the product (the WebSocket server behind ``<Connect><Stream>``) sends back.

Pure (no sockets): JSON text in, typed messages and normalized events out. Every message is a
JSON text frame with an ``event`` field, as Twilio's "Media Streams - WebSocket Messages"
reference defines them:

* voicelab -> product: ``connected`` (``protocol`` "Call", ``version``), ``start`` (stream
  metadata, ``customParameters``, ``mediaFormat``), ``media`` (20 ms of base64 mu-law, with
  ``chunk`` and ``timestamp``), ``dtmf``, ``mark`` (echoing the product's own) and ``stop``.
  Every message after ``connected`` carries ``sequenceNumber``, a string counting from "1",
  and the ``streamSid``.
* product -> voicelab: ``media`` (base64 mu-law to play), ``mark`` (a name to echo once the
  audio sent before it has played) and ``clear`` (drop the audio not yet played).

Twilio's parameters are strings; run data that is not a string is JSON-encoded
(:func:`custom_parameters`).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from ...config import SecretScrubber
from .._protocol import EndpointEvent

logger = logging.getLogger(__name__)

PROTOCOL = "Call"
PROTOCOL_VERSION = "1.0.0"
MEDIA_FORMAT = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
#: the user's track in ``start.tracks`` and ``media.track`` (``dtmf.track`` says inbound_track)
INBOUND_TRACK = "inbound"
DTMF_TRACK = "inbound_track"
DTMF_DIGITS = frozenset("0123456789*#")
#: A SID is its kind's two letters and 32 hex digits.
SID_PREFIXES = {"account_sid": "AC", "call_sid": "CA", "stream_sid": "MZ"}
SID_PATTERNS = {name: rf"^{prefix}[0-9a-fA-F]{{32}}$" for name, prefix in SID_PREFIXES.items()}

# Events
CONNECTED, START, MEDIA, DTMF, MARK, STOP, CLEAR = (
    "connected", "start", "media", "dtmf", "mark", "stop", "clear")

RAW_TEXT_LIMIT = 2000  # characters of an unparseable message kept as its raw record
_SID_NAMESPACE = uuid.UUID("8f0c3a56-5a1e-4d36-9a8b-6f2d3c1e7b40")


def generated_sid(prefix: str, *parts: object) -> str:
    """A SID of Twilio's form (``prefix`` + 32 hex digits), the same for the same ``parts``."""
    return prefix + uuid.uuid5(_SID_NAMESPACE, "/".join(map(str, parts))).hex


@dataclass(frozen=True, slots=True)
class StreamIdentity:
    """Who the call is: the account, the call and its media stream."""

    account_sid: str
    call_sid: str
    stream_sid: str


def trace_parameters(traceparent: str, headers: Mapping[str, str]) -> dict[str, str]:
    r"""The W3C trace context a media stream carries in ``start.customParameters`` (a Twilio
    bot reads ``<Parameter>``\ s there, not the handshake's headers, which Twilio's own
    WebSocket request does not forward): ``traceparent`` (the trial's span: the bot's spans
    become its children), and ``tracestate`` when the configured headers carry one."""
    parameters = {"traceparent": traceparent}
    state = next((value for key, value in headers.items() if key.lower() == "tracestate"), None)
    if state:
        parameters["tracestate"] = state
    return parameters


def custom_parameters(data: Mapping[str, object], extra: Mapping[str, object]) -> dict[str, str]:
    """``start.customParameters``: the run data, then ``extra`` on top (``extra`` wins a clash).

    Twilio's ``<Parameter>`` values are strings: a string is passed as is, anything else
    (numbers, booleans, null, mappings, lists) as its JSON text, e.g. ``{"topic": "x"}``.
    """
    merged = {**dict(data), **dict(extra)}
    return {str(key): value if isinstance(value, str) else
            json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))
            for key, value in merged.items()}


class CallerStream:
    """The messages voicelab sends as Twilio, numbered in the order they are built.

    ``sequenceNumber`` counts every message from ``start`` on; ``chunk`` counts ``media``
    messages from 1 and ``timestamp`` is the position of a chunk's first sample on the line, in
    milliseconds from the start of the stream (each chunk is 20 ms). Build a message right
    before sending it, so the numbers follow the order on the wire.
    """

    def __init__(self, identity: StreamIdentity, *, parameters: Mapping[str, str],
                 frame_ms: int = 20):
        self.identity = identity
        self.parameters = dict(parameters)
        self.frame_ms = frame_ms
        self.sequence = 0  # of the last message built
        self.chunks = 0  # media messages built

    def _numbered(self, event: str, **body: object) -> str:
        self.sequence += 1
        return json.dumps({"event": event, "sequenceNumber": str(self.sequence), **body,
                           "streamSid": self.identity.stream_sid})

    def connected(self) -> str:
        return json.dumps({"event": CONNECTED, "protocol": PROTOCOL, "version": PROTOCOL_VERSION})

    def start(self) -> str:
        identity = self.identity
        return self._numbered(START, start={
            "accountSid": identity.account_sid, "streamSid": identity.stream_sid,
            "callSid": identity.call_sid, "tracks": [INBOUND_TRACK],
            "customParameters": self.parameters, "mediaFormat": dict(MEDIA_FORMAT)})

    def media(self, payload: bytes) -> str:
        """One chunk of the user's audio (160 mu-law bytes)."""
        self.chunks += 1
        return self._numbered(MEDIA, media={
            "track": INBOUND_TRACK, "chunk": str(self.chunks),
            "timestamp": str((self.chunks - 1) * self.frame_ms),
            "payload": base64.b64encode(payload).decode("ascii")})

    def dtmf(self, digit: str) -> str:
        return self._numbered(DTMF, dtmf={"track": DTMF_TRACK, "digit": digit})

    def mark(self, name: str) -> str:
        """The echo of the product's mark ``name``: its audio has played (or was cleared)."""
        return self._numbered(MARK, mark={"name": name})

    def stop(self) -> str:
        identity = self.identity
        return self._numbered(STOP, stop={"accountSid": identity.account_sid,
                                          "callSid": identity.call_sid})


def check_digits(digits: str) -> str:
    """``digits`` when every one is a DTMF key (0-9, ``*``, ``#``); else ``ValueError``."""
    if not isinstance(digits, str) or not digits:
        raise ValueError("DTMF digits must be a non-empty string such as '123#'")
    wrong = sorted({d for d in digits if d not in DTMF_DIGITS})
    if wrong:
        raise ValueError(f"not DTMF keys: {''.join(wrong)!r} (use 0-9, * and #)")
    return digits


# --- product -> voicelab -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ProductMedia:
    """Audio to play: ``payload`` is mu-law at 8 kHz; ``raw`` has it elided."""

    payload: bytes
    raw: dict[str, object]


@dataclass(frozen=True, slots=True)
class ProductMark:
    """Echo ``name`` once the audio sent before it has played."""

    name: str
    raw: dict[str, object]


@dataclass(frozen=True, slots=True)
class ProductClear:
    """Drop the audio not yet played (and echo the marks still pending)."""

    raw: dict[str, object]


ProductMessage = ProductMedia | ProductMark | ProductClear | EndpointEvent


def _error(received_ns: int, code: str, message: str, raw: object) -> EndpointEvent:
    return EndpointEvent("error", received_ns, text=message,
                         data={"code": code, "message": message, "origin": "adapter"}, raw=raw)


class ProductDecoder:
    """Turns one product message into a :data:`ProductMessage`: a ``media``, ``mark`` or
    ``clear`` for the adapter to act on, or an event (``error`` for a message Twilio would not
    accept, ``raw`` for one it ignores).

    ``raw`` is the parsed message scrubbed of secrets, with base64 audio replaced by its byte
    count. ``media``, ``mark`` and ``clear`` must name this call's ``streamSid``.
    """

    def __init__(self, scrubber: SecretScrubber, *, stream_sid: str):
        self._scrubber = scrubber
        self._stream_sid = stream_sid

    def decode(self, received_ns: int, message: str | bytes) -> ProductMessage:
        if isinstance(message, bytes | bytearray | memoryview):
            return _error(received_ns, "malformed_message", f"product sent a binary frame "
                          f"({len(message)} bytes); Twilio media streams carry JSON text",
                          {"binary": True, "byte_count": len(message)})
        try:
            parsed = json.loads(message)
        except ValueError as error:
            raw = {"malformed_text": self._scrubber.scrub_text(message[:RAW_TEXT_LIMIT])}
            return _error(received_ns, "malformed_json", f"product sent malformed JSON: {error}",
                          raw)
        if not isinstance(parsed, dict):
            return _error(received_ns, "malformed_message", f"product sent a JSON "
                          f"{type(parsed).__name__}, not an object", self._scrubber.scrub(parsed))
        return self.decode_object(received_ns, parsed)

    def decode_object(self, received_ns: int, message: dict[str, object]) -> ProductMessage:
        event = message.get("event")
        if event == MEDIA:
            return self._media(received_ns, message)
        raw = self._scrubber.scrub(message)
        if event not in (MARK, CLEAR):
            logger.debug("product message %r kept as a raw event", event)
            return EndpointEvent("raw", received_ns, raw=raw)
        wrong = self._wrong_stream(received_ns, raw)
        if wrong is not None:
            return wrong
        if event == CLEAR:
            return ProductClear(raw)
        mark = raw.get("mark")
        name = mark.get("name") if isinstance(mark, dict) else None
        if not isinstance(name, str):
            return _error(received_ns, "malformed_message",
                          "product sent a mark without a mark.name string", raw)
        return ProductMark(name, raw)

    def _wrong_stream(self, received_ns: int, raw: dict[str, object]) -> EndpointEvent | None:
        sid = raw.get("streamSid")
        if sid == self._stream_sid:
            return None
        said = "no streamSid" if sid is None else f"streamSid {str(sid)[:64]!r}"
        return _error(received_ns, "wrong_stream_sid", f"product sent a {raw.get('event')} "
                      f"message with {said}, not this call's {self._stream_sid}", raw)

    def _media(self, received_ns: int, message: dict[str, object]) -> ProductMessage:
        media = message.get("media")
        encoded = media.get("payload") if isinstance(media, dict) else None
        rest = self._scrubber.scrub({k: v for k, v in message.items() if k != "media"})
        others = {k: v for k, v in media.items() if k != "payload"} \
            if isinstance(media, dict) else {}
        try:
            payload = base64.b64decode(encoded or "", validate=True)
        except (binascii.Error, TypeError, ValueError):
            rest["media"] = {**self._scrubber.scrub(others),
                             "payload": {"omitted": "base64 mu-law", "invalid": True}}
            return _error(received_ns, "invalid_audio",
                          "product sent a media payload that is not valid base64; dropped", rest)
        rest["media"] = {**self._scrubber.scrub(others),
                         "payload": {"omitted": "base64 mu-law", "byte_count": len(payload)}}
        wrong = self._wrong_stream(received_ns, rest)
        if wrong is not None:
            return wrong
        if not payload:
            logger.debug("product sent a media message without audio")
            return EndpointEvent("raw", received_ns, raw=rest)
        return ProductMedia(payload, rest)
