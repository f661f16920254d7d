"""Dead air the bot double puts into its replies on purpose, and its own account of it: the
truth voicelab's ``dead_air_ms`` is checked against, computed here from the samples the bot
sends (independently of voicelab's metric code): silent stretches of at least 300 ms, in
10 ms frames no louder than the silence threshold, between the first and the last audible
sample."""

from __future__ import annotations

import numpy as np

from ...audio import SILENCE_THRESHOLD

RATE_HZ = 48_000
FRAME = RATE_HZ // 100  # 10 ms
MIN_RUN_FRAMES = 30  # 300 ms


def _quiet_frames(samples: np.ndarray) -> np.ndarray:
    whole = samples[:samples.size - samples.size % FRAME].astype(np.int32)
    return np.abs(whole.reshape(-1, FRAME)).max(axis=1) <= SILENCE_THRESHOLD


def dead_air_ms(samples: np.ndarray) -> float:
    """The 300 ms-or-longer silences inside ``samples`` (48 kHz), in ms."""
    quiet = _quiet_frames(samples)
    loud = np.flatnonzero(~quiet)
    if loud.size == 0:
        return 0.0
    inside = quiet[loud[0]:loud[-1] + 1]
    edges = np.diff(np.concatenate([[0], inside.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    runs = ends - starts
    return float(runs[runs >= MIN_RUN_FRAMES].sum() * 10)


def with_pause(samples: np.ndarray, *, pause_ms: float) -> np.ndarray:
    """``samples`` with ``pause_ms`` of silence put into the quiet frame nearest the middle of
    what is audible (a gap between words), frame-aligned; unchanged for 0."""
    if pause_ms <= 0:
        return samples
    quiet = _quiet_frames(samples)
    loud = np.flatnonzero(~quiet)
    candidates = np.flatnonzero(quiet)
    if loud.size == 0 or candidates.size == 0:
        return samples
    middle = (loud[0] + loud[-1]) // 2
    at = int(candidates[np.argmin(np.abs(candidates - middle))]) * FRAME
    pause = np.zeros(int(pause_ms * RATE_HZ / 1000), dtype=samples.dtype)
    return np.concatenate([samples[:at], pause, samples[at:]])
