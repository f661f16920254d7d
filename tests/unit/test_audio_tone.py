"""Deterministic tone speech: a function of (text, seed) only, word-like and well below clipping."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from voicelab.audio import SILENCE_THRESHOLD, analyze_signal, tone_speech

PROMPT = "Please record the plan and save the reminder."


def zero_runs(samples: np.ndarray, *, min_length: int) -> list[tuple[int, int]]:
    """(start, length) of every run of exact zeros at least ``min_length`` samples long."""
    padded = np.concatenate([[False], samples == 0, [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    starts, ends = edges[::2], edges[1::2]
    return [(int(s), int(e - s)) for s, e in zip(starts, ends, strict=True)
            if e - s >= min_length]


def test_same_text_and_seed_give_identical_bytes() -> None:
    first = tone_speech(PROMPT, seed=42)
    np.random.seed(123)  # global numpy state must not matter
    assert tone_speech(PROMPT, seed=42).to_bytes() == first.to_bytes()


def test_the_output_does_not_depend_on_the_process() -> None:
    code = ("import hashlib, sys; from voicelab.audio import tone_speech; "
            f"print(hashlib.sha256(tone_speech({PROMPT!r}, seed=42).to_bytes()).hexdigest())")
    environment = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=environment, check=True).stdout.strip()
    assert other == hashlib.sha256(tone_speech(PROMPT, seed=42).to_bytes()).hexdigest()


def test_a_different_seed_or_text_gives_different_audio() -> None:
    reference = tone_speech(PROMPT, seed=42).to_bytes()
    assert tone_speech(PROMPT, seed=43).to_bytes() != reference
    assert tone_speech(PROMPT.replace("plan", "menu"), seed=42).to_bytes() != reference


def test_canonical_format() -> None:
    audio = tone_speech("hello", seed=1)
    assert audio.sample_rate_hz == 24_000 and audio.samples.dtype == np.int16


def test_duration_grows_with_the_text() -> None:
    texts = ["Yes.", "Yes, please.", "Yes, please record it.", PROMPT, PROMPT + " " + PROMPT]
    durations = [tone_speech(text, seed=7).duration_seconds for text in texts]
    assert durations == sorted(durations) and len(set(durations)) == len(durations)
    assert tone_speech("a bb", seed=7).duration_seconds < tone_speech("a bbbbbbbb", seed=7) \
        .duration_seconds  # longer words take longer too


@pytest.mark.parametrize("seed", range(8))
def test_peak_is_well_below_clipping(seed: int) -> None:
    analysis = analyze_signal(tone_speech(PROMPT + " Thank you!", seed=seed))
    assert analysis.peak_amplitude < 0.5 * 32768
    assert analysis.peak_amplitude > 0.25 * 32768  # but clearly audible
    assert analysis.clipped_sample_ratio == 0.0


def test_words_are_bursts_separated_by_silent_gaps() -> None:
    words = PROMPT.rstrip(".").split()
    samples = tone_speech(PROMPT, seed=3).samples
    gaps = zero_runs(samples, min_length=int(0.05 * 24_000))  # at least 50 ms of silence
    # one gap after each word (the last one merged with the sentence's closing pause)
    assert len(gaps) == len(words)
    bursts = [(start + length, next_start) for (start, length), (next_start, _)
              in zip(gaps, gaps[1:], strict=False)]
    assert all(end - start >= int(0.1 * 24_000) for start, end in bursts)  # word-length sounds


def test_bursts_have_soft_edges() -> None:
    samples = tone_speech("record", seed=5).samples.astype(np.int32)
    active = np.flatnonzero(np.abs(samples) > 0)
    first, last = active[0], active[-1]
    peak = np.abs(samples).max()
    # the first and last millisecond ramp from silence instead of starting at full level
    assert np.abs(samples[first:first + 24]).max() < 0.15 * peak
    assert np.abs(samples[last - 23:last + 1]).max() < 0.15 * peak
    # so the speech does not look truncated: its final 10 ms are silent
    assert not analyze_signal(tone_speech("record", seed=5)).possible_truncation


def test_empty_text_is_short_silence() -> None:
    audio = tone_speech("", seed=1)
    assert 0 < audio.duration_seconds < 0.5
    assert np.abs(audio.samples).max() <= SILENCE_THRESHOLD
