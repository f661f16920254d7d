"""The telephony channel model's configuration: codec, packets, loss, jitter and concealment.

A ``channel:`` block has two directions, each optional (absent means a clean line)::

    channel:
      to_product:                 # what the product hears
        codec: mulaw              # pcm | mulaw | alaw | opus
        packet_ms: 20             # 10 | 20 | 30 | 40 | 60
        loss: {model: gilbert_elliott, p: 0.02, r: 0.25}
        jitter: {jitter_ms: 15, distribution: exponential}
        concealment: {policy: repeat, max_repeats: 3}
      to_user:                    # what the simulated user hears
        codec: opus
        opus: {bitrate_bps: 16000}
        loss: {model: independent, rate: 0.03}

Probabilities are per packet; times are milliseconds on the line's clock (packet ``i`` is sent at
``i * packet_ms``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ._base import StrictModel

Probability = Annotated[float, Field(ge=0, le=1)]


class IndependentLoss(StrictModel):
    """Every packet is lost with probability ``rate``, independently of every other packet."""

    model: Literal["independent"] = "independent"
    rate: Probability = Field(description="probability that a packet is lost (0..1)")

    @property
    def stationary_loss_rate(self) -> float:
        return self.rate


class GilbertElliottLoss(StrictModel):
    """Bursty loss: a two-state Markov chain over packets, a good state G and a bad state B.

    Per packet, the line is first in its current state, which loses the packet with probability
    ``loss_in_good`` (in G) or ``loss_in_bad`` (in B); then it moves G -> B with probability
    ``p`` or B -> G with probability ``r``. The first packet's state is drawn from the stationary
    distribution, so the expected loss rate is the stationary one from the first packet on:

        P(B) = p / (p + r)
        loss rate = (r * loss_in_good + p * loss_in_bad) / (p + r)

    The classic Gilbert model (``loss_in_good=0``, ``loss_in_bad=1``, the defaults) loses every
    packet in B and none in G: its loss rate is ``p / (p + r)`` and a loss burst lasts a geometric
    number of packets with mean ``1 / r``.

    In the literature (Gilbert 1960, Elliott 1963; Hasslinger & Hohlfeld 2008) ``k`` and ``h``
    are the probabilities of *delivery* in G and B, so ``loss_in_good = 1 - k`` and
    ``loss_in_bad = 1 - h``; Linux netem's ``loss gemodel p r 1-h 1-k`` takes the same four numbers
    as ``p r loss_in_bad loss_in_good``. The names here say which way round they are.
    """

    model: Literal["gilbert_elliott"] = "gilbert_elliott"
    p: Probability = Field(description="per-packet probability of moving good -> bad")
    r: Annotated[float, Field(gt=0, le=1)] = Field(
        description="per-packet probability of moving bad -> good (1 / mean burst length)")
    loss_in_good: Probability = Field(0.0, description="loss probability in the good state "
                                                      "(1 - k)")
    loss_in_bad: Probability = Field(1.0, description="loss probability in the bad state (1 - h)")

    @property
    def bad_state_probability(self) -> float:
        return self.p / (self.p + self.r)

    @property
    def stationary_loss_rate(self) -> float:
        return (self.r * self.loss_in_good + self.p * self.loss_in_bad) / (self.p + self.r)

    @property
    def mean_bad_run_packets(self) -> float:
        """Mean number of consecutive packets spent in the bad state: ``1 / r``."""
        return 1.0 / self.r


PacketLoss = Annotated[IndependentLoss | GilbertElliottLoss, Field(discriminator="model")]


class JitterConfig(StrictModel):
    """Per-packet network delay: ``base_delay_ms`` plus a random extra delay X >= 0 of mean
    ``jitter_ms``.

    ``distribution`` is X's shape: ``exponential`` (the default; queueing delay is right-skewed,
    and the standard deviation equals the mean) or ``uniform`` on ``[0, 2 * jitter_ms]``.

    Packets are never reordered: a packet that would arrive before its predecessor waits for it
    (first in, first out, as on one TCP or WebSocket connection, which is what every adapter
    writes to), so a packet's delay is ``max(base + X_i, previous arrival - its send time)``.
    Jitter changes *when* audio is delivered, not what: the channel reports each packet's delay
    (``delay_ms``) for a live sender to wait before writing it, and the delivered audio is
    unchanged by it.
    """

    jitter_ms: Annotated[float, Field(ge=0)] = Field(description="mean extra delay, ms")
    distribution: Literal["exponential", "uniform"] = "exponential"
    base_delay_ms: Annotated[float, Field(ge=0)] = Field(
        0.0, description="constant one-way delay added to every packet, ms")


class ConcealmentConfig(StrictModel):
    """What the receiver plays in place of a lost packet.

    ``silence``: zeros. ``repeat``: the last packet that arrived, again, fading linearly to zero
    over ``max_repeats`` packets (the k-th repeat runs from gain ``1 - (k-1)/max_repeats`` to
    ``1 - k/max_repeats``), then silence until a packet arrives.
    """

    policy: Literal["silence", "repeat"] = "silence"
    max_repeats: Annotated[int, Field(ge=1, le=50)] = 3


class OpusConfig(StrictModel):
    """The Opus encoder (libopus, ``voip`` application, constant frame size per packet)."""

    bitrate_bps: Annotated[int, Field(ge=6_000, le=510_000)] = Field(
        24_000, description="target bitrate, bits per second")
    sample_rate_hz: Literal[24_000, 48_000] = Field(
        24_000, description="the rate PCM is given to and taken from libopus; 24 kHz is the "
                            "canonical rate (no resampling), 48 kHz is Opus's full-band rate")


class LineConfig(StrictModel):
    """One direction of the line. The defaults are a clean line: PCM, no loss, no jitter."""

    codec: Literal["pcm", "mulaw", "alaw", "opus"] = Field(
        "pcm", description="pcm: 24 kHz linear, untouched; mulaw/alaw: G.711 at 8 kHz, "
                           "band-limited to 300-3400 Hz; opus: libopus at opus.bitrate_bps")
    packet_ms: Literal[10, 20, 30, 40, 60] = Field(
        20, description="audio per packet, ms (a 30 ms Opus packet carries three 10 ms frames)")
    loss: PacketLoss | None = None
    jitter: JitterConfig | None = None
    concealment: ConcealmentConfig = Field(default_factory=ConcealmentConfig)
    opus: OpusConfig | None = Field(None, description="only with codec: opus (defaults apply "
                                                      "when absent)")

    @model_validator(mode="after")
    def _opus_settings_need_opus(self) -> LineConfig:
        if self.opus is not None and self.codec != "opus":
            raise ValueError(f"'opus' settings are given but codec is '{self.codec}'")
        return self

    @property
    def is_clean(self) -> bool:
        """True when the line changes nothing: PCM, no loss, no jitter."""
        return self.codec == "pcm" and self.loss is None and self.jitter is None


class ChannelConfig(StrictModel):
    """The two directions of a call; an absent direction is a clean line."""

    to_product: LineConfig | None = None
    to_user: LineConfig | None = None
