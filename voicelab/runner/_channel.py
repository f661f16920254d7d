"""The telephony line of a trial (an environment's ``channel:`` block), in both directions.

``to_product`` is what the product hears: the user's mixed audio is cut into packets, coded,
lost, concealed and delayed (:class:`ToProductLine`). The audio the runner sends, and records as
``user.audio_chunk``, is what arrives: a lost packet's slot holds what the receiver's
concealment plays there, and each packet is written to the product ``delay`` after its slot's
time on the line (never before the packet ahead of it). Speech times (``user.speech_*``) stay the
user's, so timing metrics include the line's delay, as the user experiences it.

``to_user`` is what the simulated user hears (:class:`ToUserLine`): the product's audio, as placed
on the listener timeline (silence between replies included), through the line. A constant path
delay (``jitter.base_delay_ms``) is delay: the user hears everything that much later (heard
sample ``k + delay`` is listener sample ``k``), and the per-turn ``response_latency_ms``
includes it, as the user experiences it. The listener's jitter buffer
(``listener.jitter_buffer_ms``) absorbs only the variation around that delay: a packet later
than ``base_delay_ms + jitter_buffer_ms`` is late and concealed like a lost one. The codec's own
delay is taken out so the heard audio lines up with the listener timeline (plus the path
delay). Listening turn taking decides from the heard audio, a speech-to-speech persona hears
it, and the bundle keeps it as ``user-heard.wav``.

Both directions record their packets' fate per turn in one ``channel.packets`` event each, at
the end of the call: the numbers behind the per-turn ``to_product_*`` / ``to_user_*`` metrics.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..audio import (
    CANONICAL_SAMPLE_RATE_HZ,
    Channel,
    ChannelStats,
    ChannelStream,
    DeliveredPacket,
    PacketRecord,
    PcmAudio,
)
from ..config import ChannelConfig, LineConfig
from ..recording import ChannelPackets, EventType, PcmStream, Recording

_RATE = CANONICAL_SAMPLE_RATE_HZ


def line_config(channel: ChannelConfig | None, direction: str, *,
                wire_codec: str | None = None) -> tuple[LineConfig | None, str]:
    """The line of one direction to simulate (None: a clean line, nothing to do) and its codec
    as reported. With ``wire_codec`` (the codec an adapter's wire itself carries, e.g. Twilio's
    mu-law) equal to the line's, the audio is coded once, by the wire: the channel only loses,
    delays and conceals packets."""
    line = None if channel is None else \
        channel.to_product if direction == "to_product" else channel.to_user
    if line is None or line.is_clean:
        return None, "pcm"
    if wire_codec is not None and line.codec == wire_codec:
        return line.model_copy(update={"codec": "pcm"}), f"{line.codec} (the adapter's wire)"
    return line, line.codec


def _arrivals(records: list[PacketRecord], start_ns: int, packet_ns: int,
              last_arrival_ns: int) -> tuple[list[int], int]:
    """When each packet reaches the product: its slot on the line (``start_ns`` plus its index
    times the packet length) plus its delay, never before the packet ahead of it; a lost
    packet's concealment plays when its slot comes (or after the packet ahead of it)."""
    arrivals = []
    for record in records:
        slot = start_ns + record.index * packet_ns
        delay = 0 if record.delay_ms is None else int(record.delay_ms * 1_000_000)
        last_arrival_ns = max(last_arrival_ns, slot + delay)
        arrivals.append(last_arrival_ns)
    return arrivals, last_arrival_ns


class ToProductLine:
    """The user's side of the line, toward the product (see the module docstring)."""

    def __init__(self, config: LineConfig, *, seed: int, codec: str | None = None):
        self.config = config
        self.codec = codec or config.codec
        self.packet_samples = _RATE * config.packet_ms // 1000
        self.packet_ns = config.packet_ms * 1_000_000
        self._turns = Channel(config, seed=seed, direction="to_product")
        self._stream: ChannelStream | None = None  # the live line's, built on first use
        self._seed = seed
        self._last_arrival_ns = -1

    # --- a whole turn (turn taking by commit) ---------------------------------------------

    def turn(self, audio: PcmAudio, *, turn_id: str) -> list[tuple[PcmAudio, int]]:
        """The turn as it reaches the product: packets of ``packet_ms`` (the last one shorter)
        and, for each, its arrival in ns after the turn's first sample left the user."""
        result = self._turns.process(audio, turn_id=turn_id)
        samples = result.audio.samples
        frames = [PcmAudio(samples[start:start + self.packet_samples])
                  for start in range(0, samples.shape[0], self.packet_samples)]
        packets = list(result.packets[:len(frames)])
        first = packets[0].index if packets else 0
        arrivals, _ = _arrivals(packets, -first * self.packet_ns, self.packet_ns, -1)
        return list(zip(frames, arrivals, strict=True))

    # --- a live line (listening turn taking) ----------------------------------------------

    def push(self, frame: PcmAudio, *, turn_id: str | None, line_start_ns: int
             ) -> list[tuple[DeliveredPacket, int]]:
        """The next ``packet_ms`` frame of a line that began at ``line_start_ns`` (monotonic):
        the packets it completes and when each reaches the product (monotonic ns)."""
        if self._stream is None:
            self._stream = ChannelStream(self.config, seed=self._seed, direction="to_product")
        packets = self._stream.push(frame, turn_id=turn_id)
        arrivals, self._last_arrival_ns = _arrivals(
            [p.record for p in packets], line_start_ns, self.packet_ns, self._last_arrival_ns)
        return list(zip(packets, arrivals, strict=True))

    # --- what happened ----------------------------------------------------------------------

    def stats(self) -> tuple[list[ChannelStats], ChannelStats]:
        source = self._stream if self._stream is not None else self._turns
        return source.stats(), source.total_stats()


def path_delay_ms(config: LineConfig | None) -> float:
    """A line's constant one-way delay (``jitter.base_delay_ms``; 0 without jitter)."""
    return float(config.jitter.base_delay_ms) if config is not None and config.jitter else 0.0


class ToUserLine:
    """The product's audio as the simulated user hears it through the ``to_user`` line."""

    def __init__(self, config: LineConfig, *, seed: int, jitter_buffer_ms: float,
                 heard: PcmStream, codec: str | None = None):
        self.config = config
        self.codec = codec or config.codec
        #: the constant path delay, in 24 kHz samples: heard that much later
        self.delay_samples = int(round(path_delay_ms(config) * _RATE / 1000))
        self.stream = ChannelStream(config, seed=seed, direction="to_user",
                                    playout_delay_ms=path_delay_ms(config) + jitter_buffer_ms)
        self._trim = self.stream.latency_samples  # the codec's delay, taken out
        self._lead = self.delay_samples  # silence before the first sound: the path delay
        #: how far the heard audio lags what was fed: the path delay, a partial packet and the
        #: codec's delay
        self.lag_ns = (config.packet_ms * 1_000_000
                       + (self.stream.latency_samples + self.delay_samples)
                       * 1_000_000_000 // _RATE)
        self._heard = heard

    def hear(self, samples: np.ndarray, *, turn_id: str | None) -> np.ndarray:
        """Feed the next stretch of the listener timeline; returns the heard audio it completes
        (aligned with the listener timeline: heard sample ``k`` is listener sample ``k``)."""
        packets = self.stream.push(PcmAudio(samples), turn_id=turn_id)
        if not packets:
            return np.zeros(0, dtype=np.int16)
        out = np.concatenate([packet.audio.samples for packet in packets])
        if self._trim:
            cut = min(self._trim, out.shape[0])
            out, self._trim = out[cut:], self._trim - cut
        if self._lead and out.shape[0]:
            out, self._lead = np.concatenate([np.zeros(self._lead, dtype=out.dtype), out]), 0
        self._heard.append(out.astype("<i2").tobytes())
        return out

    def heard(self, start: int, end: int) -> PcmAudio:
        """What was heard of the listener samples ``start`` to ``end`` (the path delay later;
        clipped to what has been heard)."""
        start, end = start + self.delay_samples, min(end + self.delay_samples,
                                                     self._heard.num_samples)
        return PcmAudio(self._heard.samples(start, max(0, end - start)))

    def stats(self) -> tuple[list[ChannelStats], ChannelStats]:
        return self.stream.stats(), self.stream.total_stats()


def record_line_stats(recording: Recording, direction: str, config: LineConfig,
                      stats: tuple[list[ChannelStats], ChannelStats], *,
                      codec: str | None = None) -> None:
    """One ``channel.packets`` event: the line's parameters and its packets' fate per turn
    (``turn_id`` None: the line between turns)."""
    per_turn, total = stats
    loss = config.loss
    recording.record(EventType.CHANNEL_PACKETS, ChannelPackets(
        line=direction, codec=codec or config.codec, packet_ms=config.packet_ms,
        base_delay_ms=path_delay_ms(config),
        configured_loss_rate=loss.stationary_loss_rate if loss is not None else 0.0,
        turns=[_plain(s) for s in per_turn], total=_plain(total)),
        source="channel", direction="internal")


def _plain(stats: ChannelStats) -> dict[str, Any]:
    values = stats.to_dict()
    for key in ("effective_loss_rate", "mean_delay_ms", "max_delay_ms"):
        if values[key] is not None:
            values[key] = round(values[key], 6)
    return values
