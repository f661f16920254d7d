"""The channel's random network and its receiver: packet loss, delivery delay, concealment.

Each process consumes its own random generator in a fixed order per packet, so the results do
not depend on how packets are grouped into calls (one turn or one packet at a time).
"""

from __future__ import annotations

import numpy as np

from ..config import GilbertElliottLoss, IndependentLoss, JitterConfig, LineConfig


class NoLoss:
    def draw(self, count: int) -> np.ndarray:
        return np.zeros(count, dtype=bool)


class IndependentLossProcess:
    def __init__(self, config: IndependentLoss, rng: np.random.Generator):
        self._rate = config.rate
        self._rng = rng

    def draw(self, count: int) -> np.ndarray:
        return self._rng.random(count) < self._rate


class GilbertElliottProcess:
    """Two uniforms a packet: one decides the loss in the current state, one the transition."""

    def __init__(self, config: GilbertElliottLoss, rng: np.random.Generator):
        self._config = config
        self._rng = rng
        self._bad = bool(rng.random() < config.bad_state_probability)  # stationary start

    def draw(self, count: int) -> np.ndarray:
        config = self._config
        p, r = config.p, config.r
        loss_in_good, loss_in_bad = config.loss_in_good, config.loss_in_bad
        bad = self._bad
        lost = []
        for decide_loss, decide_move in self._rng.random((count, 2)).tolist():
            lost.append(decide_loss < (loss_in_bad if bad else loss_in_good))
            bad = decide_move >= r if bad else decide_move < p
        self._bad = bad
        return np.array(lost, dtype=bool)


def loss_process(config: LineConfig, rng: np.random.Generator
                 ) -> NoLoss | IndependentLossProcess | GilbertElliottProcess:
    if config.loss is None:
        return NoLoss()
    if isinstance(config.loss, IndependentLoss):
        return IndependentLossProcess(config.loss, rng)
    return GilbertElliottProcess(config.loss, rng)


class JitterProcess:
    """Per-packet delays, first in first out: an arrival never precedes the one before it."""

    def __init__(self, config: JitterConfig | None, rng: np.random.Generator, *, packet_ms: int):
        self._config = config
        self._rng = rng
        self._packet_ms = packet_ms
        self._last_arrival_ms = -np.inf

    def draw(self, first_index: int, lost: np.ndarray) -> np.ndarray:
        """Delays in ms (NaN for lost packets); one draw per packet, lost or not, so the delays
        do not depend on the loss pattern."""
        config, count = self._config, lost.shape[0]
        if config is None:
            return np.where(lost, np.nan, 0.0)
        if config.distribution == "exponential":
            extra = self._rng.exponential(config.jitter_ms, count)
        else:
            extra = self._rng.uniform(0.0, 2.0 * config.jitter_ms, count)
        send_ms = (first_index + np.arange(count)) * float(self._packet_ms)
        arrival = np.where(lost, -np.inf, send_ms + config.base_delay_ms + extra)
        arrival = np.maximum.accumulate(np.concatenate([[self._last_arrival_ms], arrival]))[1:]
        if count:
            self._last_arrival_ms = float(arrival[-1])
        return np.where(lost, np.nan, arrival - send_ms)


class Concealer:
    """Fills lost packets: silence, or the last packet received repeated with a linear fade."""

    def __init__(self, config: LineConfig, *, packet_samples: int):
        self._repeat = config.concealment.policy == "repeat"
        self._max_repeats = config.concealment.max_repeats
        # gain over the k-th repeat (k counted from 0): from 1 - k/R down to 1 - (k+1)/R
        self._ramp = np.arange(1, packet_samples + 1) / packet_samples
        self._last_good: np.ndarray | None = None
        self._lost_run = 0  # lost packets since the last good one, before this call

    def apply(self, decoded: np.ndarray, lost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        played = decoded.astype(np.float64)
        played[lost] = 0.0
        concealed = np.zeros(lost.shape[0], dtype=bool)
        good_rows = np.flatnonzero(~lost)
        if self._repeat and lost.any():
            rows = np.arange(lost.shape[0])
            last_good = np.maximum.accumulate(np.where(lost, -1, rows))
            repeat_number = np.where(last_good >= 0, rows - last_good,
                                     rows + 1 + self._lost_run)  # 1 for the first lost packet
            has_source = (last_good >= 0) | (self._last_good is not None)
            concealed = lost & has_source & (repeat_number <= self._max_repeats)
            targets = np.flatnonzero(concealed)
            if targets.size:
                carried = (self._last_good if self._last_good is not None
                           else np.zeros(decoded.shape[1]))
                sources = np.concatenate([carried[None, :], played], axis=0)
                steps = (repeat_number[targets, None] - 1) + self._ramp[None, :]
                gains = 1.0 - steps / self._max_repeats
                played[targets] = sources[last_good[targets] + 1] * gains
        if good_rows.size:
            self._last_good = played[good_rows[-1]].copy()
            self._lost_run = lost.shape[0] - 1 - int(good_rows[-1])
        else:
            self._lost_run += lost.shape[0]
        return played, concealed
