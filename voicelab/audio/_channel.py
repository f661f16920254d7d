"""A seeded telephony channel: audio cut into packets, coded, lost, delayed and concealed.

One direction of a call is a :class:`ChannelStream` (packets one at a time, for a live line) or
a :class:`Channel` (a whole turn at a time). Both keep their state between calls, so codec state
and Gilbert-Elliott loss bursts run on across turn boundaries, and both record one
:class:`PacketRecord` per packet; per-turn statistics are computed from those records.

Packets are cut on the codec's clock: packet ``i`` holds ``packet_ms`` of audio and is sent at
``i * packet_ms`` on the line's clock. The delivered audio is delayed by the codec's fixed
latency (:attr:`ChannelStream.latency_ms`: 0 for ``pcm``, about 7 ms for G.711, 6.5 ms for Opus
at 24 kHz); :meth:`Channel.process` removes that delay so a turn comes back aligned with its
input and with the same length. Network jitter never changes the audio, only the per-packet
``delay_ms`` a live sender waits before delivering a packet (see ``JitterConfig``).

Every random draw comes from ``(seed, direction, process)``: loss and jitter have separate
generators, so enabling jitter does not change which packets are lost, and the two directions
of a call are independent. Same seed and inputs, same output and records, byte for byte.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from ..config import LineConfig
from ._format import CANONICAL_SAMPLE_RATE_HZ, PcmAudio
from ._impairments import Concealer, JitterProcess, loss_process
from ._line_codecs import build_codec, to_int16

Direction = Literal["to_product", "to_user"]
TurnId = Hashable | None

_DIRECTION_TAGS = {"to_product": 1, "to_user": 2}
_LOSS_TAG, _JITTER_TAG = 1, 2


@dataclass(frozen=True, slots=True)
class PacketRecord:
    """What happened to one packet. ``delay_ms`` is None for a lost packet; ``late`` is true when
    it arrived after the receiver's playout deadline (see ``playout_delay_ms``) and was played
    as if lost; ``concealed`` is true when a lost or late packet's slot holds repeated audio (one
    played as silence is not)."""

    index: int
    turn_id: TurnId
    lost: bool
    concealed: bool
    delay_ms: float | None
    late: bool = False


@dataclass(frozen=True, slots=True)
class DeliveredPacket:
    """One packet as the receiver plays it: ``packet_ms`` of 24 kHz audio (decoded, concealed
    or silent), to be delivered ``record.delay_ms`` after it was sent."""

    record: PacketRecord
    audio: PcmAudio


@dataclass(frozen=True, slots=True)
class ChannelStats:
    """Per-turn (or whole-stream) packet counts; rates are None when nothing was sent.

    ``effective_loss_rate`` is the share of packets the receiver did not play as sent: dropped
    by the network, or late for their playout deadline."""

    turn_id: TurnId
    packets_sent: int
    packets_dropped: int
    packets_concealed: int
    effective_loss_rate: float | None
    mean_delay_ms: float | None
    max_delay_ms: float | None
    packets_late: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, records: list[PacketRecord], *, turn_id: TurnId) -> ChannelStats:
        sent = len(records)
        dropped = sum(record.lost for record in records)
        late = sum(record.late for record in records)
        delays = [record.delay_ms for record in records if record.delay_ms is not None]
        return cls(turn_id=turn_id, packets_sent=sent, packets_dropped=dropped,
                   packets_concealed=sum(record.concealed for record in records),
                   effective_loss_rate=(dropped + late) / sent if sent else None,
                   mean_delay_ms=float(np.mean(delays)) if delays else None,
                   max_delay_ms=float(np.max(delays)) if delays else None,
                   packets_late=late)


@dataclass(frozen=True)
class ChannelResult:
    """One turn through the channel: the delivered audio (aligned with and as long as the input),
    its packets and their statistics."""

    audio: PcmAudio
    packets: tuple[PacketRecord, ...]
    stats: ChannelStats


def _rng(seed: int, direction: Direction, process: int) -> np.random.Generator:
    return np.random.default_rng([seed % (1 << 63), _DIRECTION_TAGS[direction], process])


class ChannelStream:
    """One direction of a live line: push audio as it is produced, get packets as they complete.

    ``config`` None is a clean line. ``direction`` only selects the random streams (so a call's
    two directions, built with the same seed, lose different packets). ``playout_delay_ms``
    models a receiver that plays each packet that long after it was sent (a jitter buffer): a
    packet delayed more is *late*, and concealed like a lost one; None plays every packet
    whenever it arrives.
    """

    def __init__(self, config: LineConfig | None = None, *, seed: int,
                 direction: Direction = "to_product", playout_delay_ms: float | None = None):
        if direction not in _DIRECTION_TAGS:
            raise ValueError(f"direction must be 'to_product' or 'to_user', got {direction!r}")
        self.config = config or LineConfig()
        self.direction = direction
        self.playout_delay_ms = playout_delay_ms
        self._codec = build_codec(self.config)
        self._codec_packet_samples = self._codec.sample_rate_hz * self.config.packet_ms // 1000
        self._packet_samples = CANONICAL_SAMPLE_RATE_HZ * self.config.packet_ms // 1000
        self._loss = loss_process(self.config, _rng(seed, direction, _LOSS_TAG))
        self._jitter = JitterProcess(self.config.jitter, _rng(seed, direction, _JITTER_TAG),
                                      packet_ms=self.config.packet_ms)
        self._concealer = Concealer(self.config, packet_samples=self._codec_packet_samples)
        self._pending = np.zeros(0)  # codec-rate samples short of a whole packet
        self._samples_in = 0  # 24 kHz samples pushed, padding included
        self._audio_end = 0  # input position just after the last sample of real audio
        self._records: list[PacketRecord] = []

    @property
    def packet_ms(self) -> int:
        return self.config.packet_ms

    @property
    def latency_samples(self) -> int:
        """The codec's fixed delay, in 24 kHz samples."""
        return self._codec.latency_samples

    @property
    def latency_ms(self) -> float:
        return self._codec.latency_samples * 1000.0 / CANONICAL_SAMPLE_RATE_HZ

    @property
    def records(self) -> tuple[PacketRecord, ...]:
        return tuple(self._records)

    def push(self, audio: PcmAudio, *, turn_id: TurnId = None) -> list[DeliveredPacket]:
        """Send ``audio`` (24 kHz) down the line; returns the packets completed by it (none when
        it does not complete one). A packet belongs to the ``turn_id`` of the push that completed
        it."""
        samples = _canonical_samples(audio)
        if samples.shape[0]:
            self._audio_end = self._samples_in + samples.shape[0]
        records, played = self._run(samples, turn_id=turn_id)
        return [DeliveredPacket(record, PcmAudio(row, CANONICAL_SAMPLE_RATE_HZ))
                for record, row in zip(records, played, strict=True)]

    def flush(self, *, turn_id: TurnId = None) -> list[DeliveredPacket]:
        """Send silence until every sample pushed so far has been delivered (the last partial
        packet is completed and the codec's latency drained)."""
        records, played = self._drain(turn_id=turn_id)
        return [DeliveredPacket(record, PcmAudio(row, CANONICAL_SAMPLE_RATE_HZ))
                for record, row in zip(records, played, strict=True)]

    def stats(self) -> list[ChannelStats]:
        """Statistics per turn id, in the order the turns first sent a packet."""
        by_turn: dict[TurnId, list[PacketRecord]] = {}
        for record in self._records:
            by_turn.setdefault(record.turn_id, []).append(record)
        return [ChannelStats.of(records, turn_id=turn) for turn, records in by_turn.items()]

    def total_stats(self) -> ChannelStats:
        return ChannelStats.of(self._records, turn_id=None)

    def _drain(self, *, turn_id: TurnId) -> tuple[list[PacketRecord], np.ndarray]:
        needed = self._audio_end + self._codec.latency_samples
        packets = -(-needed // self._packet_samples)
        padding = max(0, packets * self._packet_samples - self._samples_in)
        return self._run(np.zeros(padding, dtype=np.int16), turn_id=turn_id)

    def _run(self, samples: np.ndarray, *,
             turn_id: TurnId) -> tuple[list[PacketRecord], np.ndarray]:
        """The whole line over a chunk: (records of the completed packets, their 24 kHz audio
        as an int16 array of shape (packets, samples per packet))."""
        self._samples_in += samples.shape[0]
        line = self._codec.to_line(samples.astype(np.float64))
        if self._pending.size:
            line = np.concatenate([self._pending, line])
        size = self._codec_packet_samples
        count = line.shape[0] // size
        self._pending = line[count * size:]
        packets = to_int16(line[:count * size]).reshape(count, size)

        first_index = len(self._records)
        lost = self._loss.draw(count)
        delays = self._jitter.draw(first_index, lost)
        late = np.zeros(count, dtype=bool)
        if self.playout_delay_ms is not None:
            late = ~lost & (delays > self.playout_delay_ms)
        missing = lost | late
        decoded = self._codec.round_trip(packets, missing)
        played, concealed = self._concealer.apply(decoded, missing)
        delivered = to_int16(self._codec.from_line(played.reshape(-1)))
        delivered = delivered.reshape(count, self._packet_samples)
        delivered.flags.writeable = False

        records = [PacketRecord(index, turn_id, is_lost, is_concealed,
                                None if is_lost else delay, is_late)
                   for index, is_lost, is_concealed, delay, is_late in zip(
                       range(first_index, first_index + count), lost.tolist(),
                       concealed.tolist(), delays.tolist(), late.tolist(), strict=True)]
        self._records.extend(records)
        return records, delivered


class Channel:
    """One direction of a call, a turn at a time: ``process`` returns the turn as delivered.

    The state (codec, loss bursts, jitter queue, concealment) carries from one turn to the next;
    each turn is followed by the silence that drains it (the packets of that tail count in the
    turn's statistics).
    """

    def __init__(self, config: LineConfig | None = None, *, seed: int,
                 direction: Direction = "to_product"):
        self._stream = ChannelStream(config, seed=seed, direction=direction)

    @property
    def config(self) -> LineConfig:
        return self._stream.config

    @property
    def latency_ms(self) -> float:
        return self._stream.latency_ms

    @property
    def records(self) -> tuple[PacketRecord, ...]:
        return self._stream.records

    def process(self, audio: PcmAudio, *, turn_id: TurnId = None) -> ChannelResult:
        samples = _canonical_samples(audio)
        if samples.shape[0] == 0:
            return ChannelResult(audio, (), ChannelStats.of([], turn_id=turn_id))
        stream = self._stream
        start = stream._samples_in  # a drained stream: output position == input position
        stream._audio_end = start + samples.shape[0]
        records, played = stream._run(samples, turn_id=turn_id)
        tail_records, tail = stream._drain(turn_id=turn_id)
        delivered = np.concatenate([played.reshape(-1), tail.reshape(-1)])
        latency = stream.latency_samples
        aligned = delivered[latency:latency + samples.shape[0]].copy()
        packets = tuple(records + tail_records)
        return ChannelResult(PcmAudio(aligned, CANONICAL_SAMPLE_RATE_HZ), packets,
                             ChannelStats.of(list(packets), turn_id=turn_id))

    def stats(self) -> list[ChannelStats]:
        return self._stream.stats()

    def total_stats(self) -> ChannelStats:
        return self._stream.total_stats()


def _canonical_samples(audio: PcmAudio) -> np.ndarray:
    if not isinstance(audio, PcmAudio):
        raise ValueError(f"the channel takes PcmAudio, got {type(audio).__name__}")
    if audio.sample_rate_hz != CANONICAL_SAMPLE_RATE_HZ:
        raise ValueError(f"the channel takes {CANONICAL_SAMPLE_RATE_HZ} Hz audio, got "
                         f"{audio.sample_rate_hz} Hz")
    return audio.samples
