"""pipecat's protobuf frames on the wire: frames in and out, normalized events, resampling state.

Pure (no sockets, no timers): bytes in, :class:`EndpointEvent` objects out, so the codec is unit
tested on its own and the transport (:mod:`._endpoint`) stays a thin shell. The schema is
``frames.proto`` (classes in :mod:`._proto`); ``docs/adapters/pipecat.md`` has
the mapping:

* ``audio`` -> ``audio_delta`` (canonical 24 kHz PCM, resampled from the frame's own rate);
* ``transcription`` -> ``input_transcript`` (what the bot heard the user say);
* ``text`` -> ``transcript_final`` (the bot's words);
* ``interruption`` -> ``interruption`` with ``flush: true`` (the bot stopped and its queued audio
  is dropped, as pipecat's own clients do);
* ``message`` -> ``raw`` (its JSON parsed when it is JSON); anything else -> ``raw`` plus a debug
  log; bytes that are no ``Frame`` -> ``error{malformed_frame}``. Never an exception.

Resampling keeps its state across frames (:class:`voicelab.audio.StreamingResampler`). soxr
releases output in blocks, so part of a frame's audio can come out with a later frame; every
``audio_delta`` carries the arrival stamp of the frame that held its first sample (blocks are cut
at frame boundaries), so the listener hears the bot's speech when it arrived, not when the
filter let it out. What the filter still holds when the bot's audio pauses comes out with
:meth:`PipecatDecoder.flush_audio` (the transport calls it after a quiet spell).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from ...audio import (
    BYTES_PER_SAMPLE,
    CANONICAL_SAMPLE_RATE_HZ,
    PCM16_MAX,
    PCM16_MIN,
    PcmAudio,
    StreamingResampler,
)
from ...config import SecretScrubber
from .._limits import MAX_WIRE_SAMPLE_RATE_HZ, MIN_WIRE_SAMPLE_RATE_HZ
from .._protocol import EndpointEvent
from . import _proto as proto

logger = logging.getLogger(__name__)

FRAME_KINDS: tuple[str, ...] = tuple(proto.FRAME_KINDS)
#: the bot's audio is a new stream once it has been quiet for this many of its last frame's
#: durations (the resampler's held-back tail is delivered then)
QUIET_FRAMES = 2.0
MIN_QUIET_NS = 20_000_000
RAW_TEXT_LIMIT = 2000  # characters of a text WebSocket message kept as its raw record


#: what a set field of these messages holds (their fields are uint32/uint64, string and bytes)
FieldValue = int | str | bytes


class FrameError(ValueError):
    """Bytes that are not a pipecat ``Frame``."""


@dataclass(frozen=True)
class DecodedFrame:
    """One ``Frame`` as received: its kind (a ``oneof`` name, or ``unknown``) and the fields that
    were set on the wire (proto3 leaves zero values out). An unknown kind lists the field numbers
    it came in."""

    kind: str
    fields: dict[str, FieldValue] = field(default_factory=dict)
    unknown_field_numbers: tuple[int, ...] = ()

    def number(self, name: str, default: int) -> int:
        """A uint field (``default`` when unset: proto3 leaves a zero out)."""
        value = self.fields.get(name)
        return value if isinstance(value, int) else default

    def payload(self, name: str) -> bytes:
        """A bytes field (empty when unset)."""
        value = self.fields.get(name)
        return value if isinstance(value, bytes) else b""

    def text(self, name: str) -> str:
        """A string field (empty when unset)."""
        value = self.fields.get(name)
        return value if isinstance(value, str) else ""


def decode_frame(data: bytes) -> DecodedFrame:
    """Parse one binary WebSocket message; raises :class:`FrameError` when it is no ``Frame``."""
    try:
        envelope = proto.Frame.FromString(bytes(data))
    except DecodeError as error:
        raise FrameError(f"not a pipecat Frame ({error})") from None
    kind = envelope.WhichOneof(proto.ONEOF)
    if kind is None:
        numbers = tuple(sorted({f.field_number for f in UnknownFieldSet(envelope)}))
        return DecodedFrame("unknown", unknown_field_numbers=numbers)
    # the oneof's one set field is the envelope's only field
    fields = {descriptor.name: value for descriptor, value in envelope.ListFields()}
    message = fields.get(kind)
    if not isinstance(message, proto.Message):
        raise FrameError(f"pipecat Frame of kind {kind!r} without its message")
    return DecodedFrame(kind, {descriptor.name: value
                               for descriptor, value in message.ListFields()
                               if isinstance(value, int | str | bytes)})


def encode_frame(kind: str, **fields: object) -> bytes:
    """One ``Frame`` of ``kind`` with ``fields`` set (zero values are left out, as proto3 does)."""
    message_class = proto.KIND_CLASSES.get(kind)
    if message_class is None:
        raise ValueError(f"unknown frame kind {kind!r}; one of {', '.join(FRAME_KINDS)}")
    return bytes(proto.Frame(**{kind: message_class(**fields)}).SerializeToString())


def audio_frame(audio: PcmAudio, **fields: object) -> bytes:
    """An ``audio`` frame carrying ``audio`` (mono, at its own rate) with its units attached."""
    return encode_frame("audio", audio=audio.to_bytes(), sample_rate=audio.sample_rate_hz,
                        num_channels=1, **fields)


def message_frame(data: object) -> bytes:
    """A ``message`` frame: ``data`` as JSON text (a ``str`` is sent as it is)."""
    return encode_frame("message", data=data if isinstance(data, str) else json.dumps(data))


def parse_message_data(data: str) -> tuple[object, bool]:
    """A message frame's ``data``: its parsed JSON and True, or the text itself and False."""
    try:
        return json.loads(data), True
    except ValueError:
        return data, False


class SampleRateOutOfRange(ValueError):
    """An audio frame declaring a rate outside the wire's range (see :mod:`.._limits`)."""


def pcm_of(frame: DecodedFrame, *, default_rate_hz: int) -> PcmAudio:
    """The mono PCM of an ``audio`` frame at its own rate (several channels are averaged; an unset
    rate is ``default_rate_hz``). Raises ``ValueError`` for a payload of partial samples and
    :class:`SampleRateOutOfRange` for a rate a frame may not declare, before any resampling."""
    rate = frame.number("sample_rate", 0) or default_rate_hz
    if not MIN_WIRE_SAMPLE_RATE_HZ <= rate <= MAX_WIRE_SAMPLE_RATE_HZ:
        raise SampleRateOutOfRange(f"a declared sample rate of {rate:,} Hz (audio frames may "
                                   f"declare {MIN_WIRE_SAMPLE_RATE_HZ:,} to "
                                   f"{MAX_WIRE_SAMPLE_RATE_HZ:,} Hz)")
    payload = frame.payload("audio")
    channels = max(1, frame.number("num_channels", 1))
    if len(payload) % (BYTES_PER_SAMPLE * channels):
        raise ValueError(f"{len(payload)} bytes is not a whole number of {channels}-channel "
                         f"pcm_s16le samples")
    samples = np.frombuffer(payload, dtype="<i2").astype(np.int16)
    if channels > 1:
        mixed = np.rint(samples.reshape(-1, channels).mean(axis=1, dtype=np.float64))
        samples = np.clip(mixed, PCM16_MIN, PCM16_MAX).astype(np.int16)
    return PcmAudio(samples, rate)


class OutboundAudio:
    """The user's canonical PCM -> ``audio`` frames at the product's rate (one resampler, its
    state carried from one chunk to the next for the whole call)."""

    def __init__(self, *, sample_rate_hz: int, quality: str = "HQ"):
        self.sample_rate_hz = sample_rate_hz
        self._resampler = StreamingResampler(CANONICAL_SAMPLE_RATE_HZ, sample_rate_hz,
                                             quality=quality)

    def frames(self, audio: PcmAudio) -> list[bytes]:
        """The frame(s) for the next chunk of canonical audio: none while the filter fills."""
        resampled = self._resampler.process(audio)
        return [audio_frame(resampled)] if resampled.num_samples else []

    def flush(self) -> list[bytes]:
        """End the user's stream: a frame of what the filter still held (if anything)."""
        tail = self._resampler.flush()
        return [audio_frame(tail)] if tail.num_samples else []


class InboundAudio:
    """The product's PCM, at its own rate, -> canonical PCM pieces stamped with the arrival of the
    frame that held each piece's first sample (pieces are cut at frame boundaries, so a frame that
    arrived late still shows as late)."""

    def __init__(self, *, quality: str = "HQ"):
        self.quality = quality
        self._resampler: StreamingResampler | None = None
        self._starts: deque[tuple[int, int, object]] = deque()  # (input sample, arrival ns, raw)
        self._in = 0   # input samples of the current stream
        self._out = 0  # canonical samples released from it

    @property
    def holds_audio(self) -> bool:
        """A stream is open (the filter may hold samples that only a flush releases)."""
        return self._in > 0

    def push(self, audio: PcmAudio, arrival_ns: int, raw: object) -> list[tuple[int, bytes, object]]:
        """Resample the next frame; returns ``(arrival ns, canonical PCM, raw)`` pieces."""
        pieces: list[tuple[int, bytes, object]] = []
        if self._resampler is not None and self._resampler.from_hz != audio.sample_rate_hz:
            pieces += self.flush()  # the bot changed its rate: a new stream
            self._resampler = None
        if self._resampler is None:
            self._resampler = StreamingResampler(audio.sample_rate_hz, CANONICAL_SAMPLE_RATE_HZ,
                                                 quality=self.quality)
        self._starts.append((self._in, arrival_ns, raw))
        self._in += audio.num_samples
        return pieces + self._cut(self._resampler.process(audio).samples)

    def flush(self) -> list[tuple[int, bytes, object]]:
        """End the current stream: the pieces the filter still held."""
        if self._resampler is None or not self._in:
            return []
        pieces = self._cut(self._resampler.flush().samples)
        self._starts.clear()
        self._in = self._out = 0
        return pieces

    def _boundary(self, input_sample: int) -> int:
        """The first canonical sample at or after ``input_sample`` (soxr output is aligned with
        its input: the filter's delay is compensated)."""
        assert self._resampler is not None
        return -(-input_sample * CANONICAL_SAMPLE_RATE_HZ // self._resampler.from_hz)

    def _cut(self, samples: np.ndarray) -> list[tuple[int, bytes, object]]:
        pieces = []
        start, end = self._out, self._out + samples.shape[0]
        position = start
        while position < end:
            while len(self._starts) > 1 and self._boundary(self._starts[1][0]) <= position:
                self._starts.popleft()
            _, arrival_ns, raw = self._starts[0]
            stop = end if len(self._starts) < 2 else min(end, self._boundary(self._starts[1][0]))
            piece = samples[position - start:stop - start]
            pieces.append((arrival_ns, piece.astype("<i2", copy=False).tobytes(), raw))
            position = stop
        self._out = end
        return pieces


def _error(received_ns: int, code: str, message: str, raw: object) -> EndpointEvent:
    return EndpointEvent("error", received_ns, text=message,
                         data={"code": code, "message": message, "origin": "adapter"}, raw=raw)


class PipecatDecoder:
    """Turns product messages into normalized events (see the module docstring).

    ``raw`` is the frame as received, scrubbed of every configured secret, its PCM replaced by
    ``{"omitted": "pcm", "byte_count": n}``; events from one frame share its raw record. Stamps
    never go backwards: a piece of audio stamped with an earlier frame's arrival than the last
    event gets that event's stamp.
    """

    def __init__(self, scrubber: SecretScrubber, *, sample_rate_hz: int, quality: str = "HQ"):
        self._scrubber = scrubber
        self.sample_rate_hz = sample_rate_hz
        self._inbound = InboundAudio(quality=quality)
        self._last_ns = 0
        #: when the bot's latest audio frame arrived
        self.last_audio_ns = 0
        #: how long the bot's audio may pause before the resampler's tail is delivered
        self.quiet_ns = MIN_QUIET_NS

    @property
    def holds_audio(self) -> bool:
        return self._inbound.holds_audio

    def decode(self, received_ns: int, message: str | bytes) -> list[EndpointEvent]:
        if isinstance(message, str):
            text: dict[str, object] = {
                "type": "text_message", "text": self._scrubber.scrub_text(message[:RAW_TEXT_LIMIT])}
            logger.debug("a text WebSocket message (pipecat frames are binary) kept as raw")
            return self._stamped([EndpointEvent("raw", received_ns, raw=text)])
        try:
            frame = decode_frame(message)
        except FrameError as error:
            return self._stamped([_error(received_ns, "malformed_frame",
                                         f"product sent {len(message)} bytes that are {error}",
                                         {"type": "malformed", "byte_count": len(message)})])
        if frame.kind == "audio":
            return self._audio(received_ns, frame)
        raw = self._raw(frame, len(message))
        if frame.kind == "text":
            events = [EndpointEvent("transcript_final", received_ns,
                                    text=str(raw.get("text", "")), raw=raw)]
        elif frame.kind == "transcription":
            events = [EndpointEvent("input_transcript", received_ns,
                                    text=str(raw.get("text", "")), raw=raw)]
        elif frame.kind == "interruption":
            # its audio sent before the interruption first, then the interruption drops what
            # the listener has not played yet
            events = self._pieces(self._inbound.flush())
            events.append(EndpointEvent("interruption", received_ns,
                                        data={"status": "cancelled", "flush": True}, raw=raw))
        else:
            if frame.kind == "unknown":
                logger.debug("a pipecat frame of unknown kind (fields %s) kept as raw",
                             list(frame.unknown_field_numbers))
            events = [EndpointEvent("raw", received_ns, raw=raw)]
        return self._stamped(events)

    def flush_audio(self) -> list[EndpointEvent]:
        """The bot's audio went quiet (or the call ended): what the resampler still held."""
        return self._stamped(self._pieces(self._inbound.flush()))

    def _audio(self, received_ns: int, frame: DecodedFrame) -> list[EndpointEvent]:
        self.last_audio_ns = received_ns
        raw = self._raw(frame, None)
        try:
            audio = pcm_of(frame, default_rate_hz=self.sample_rate_hz)
        except SampleRateOutOfRange as error:
            return self._stamped([_error(received_ns, "resource_limit",
                                         f"product sent an audio frame with {error}; dropped",
                                         raw)])
        except ValueError as error:
            return self._stamped([_error(received_ns, "invalid_audio",
                                         f"product sent an audio frame of {error}; dropped", raw)])
        if not audio.num_samples:
            return self._stamped([EndpointEvent("raw", received_ns, raw=raw)])
        self.quiet_ns = max(MIN_QUIET_NS, int(QUIET_FRAMES * audio.duration_seconds * 1e9))
        return self._stamped(self._pieces(self._inbound.push(audio, received_ns, raw)))

    def _pieces(self, pieces: list[tuple[int, bytes, object]]) -> list[EndpointEvent]:
        return [EndpointEvent("audio_delta", arrival_ns, audio=pcm, raw=raw)
                for arrival_ns, pcm, raw in pieces if pcm]

    def _stamped(self, events: list[EndpointEvent]) -> list[EndpointEvent]:
        for event in events:
            event.received_ns = self._last_ns = max(event.received_ns, self._last_ns)
        return events

    def _raw(self, frame: DecodedFrame, byte_count: int | None) -> dict[str, object]:
        raw: dict[str, object] = {"type": frame.kind}
        for name, value in frame.fields.items():
            if name == "audio":
                raw[name] = {"omitted": "pcm", "byte_count": len(frame.payload(name))}
            elif name == "data" and frame.kind == "message":
                raw[name], raw["json"] = parse_message_data(frame.text(name))
            else:
                raw[name] = value
        if frame.kind == "unknown":
            raw["field_numbers"] = list(frame.unknown_field_numbers)
            raw["byte_count"] = byte_count
        return self._scrubber.scrub(raw)
