"""The product's voice in each reply, as the listener heard it: speech rate, pitch, loudness,
pauses and overlap with the user (advisory speech metrics, ``speech_metrics: true``).

Everything is measured on the product channel placed on the listener timeline
(``product.wav``), inside the reply's heard span: from the start of its first heard chunk to the
end of its last (audio played over the user after a barge-in included, stalls included).

* **speech**: the product channel's voice-activity segments, the ones ``response_latency_ms``
  uses (10 ms frames, edges refined to the sample, gaps under 100 ms inside a segment), clipped
  to the span.
* **pause**: a gap between two consecutive speech segments of the reply lasting at least
  ``MIN_PAUSE_MS`` (200 ms); shorter gaps are the closures between words and syllables.
* **speaking time**: the reply's first speech onset to its last speech offset, minus its pauses.
* ``speech_rate_onsets_per_s``: acoustic onsets (librosa spectral-flux onset detection) inside
  the speaking time, per second of speaking time. Onsets are not syllables: on synthesized
  English sentences they come within about a third of the syllable count. None below
  ``MIN_RATE_SPEAKING_MS`` of speaking time.
* ``pitch_median_hz``, ``pitch_p5_hz``, ``pitch_p95_hz``: fundamental frequency by probabilistic
  YIN (``librosa.pyin``, ``PITCH_FMIN_HZ`` to ``PITCH_FMAX_HZ``) over the voiced frames only;
  ``pitch_range_semitones`` = 12 log2(p95 / p5). None with fewer than ``MIN_VOICED_FRAMES``.
* ``loudness_dbfs``: RMS of the samples inside speech segments, 20 log10(rms / 32768) (a
  full-scale sine is -3.01 dBFS; pauses do not lower it).
* ``overlap_with_user_ms``: the reply's speech that sounds while the user speaks. The user
  speaks, on the listener timeline, from the start to the end of the speech in each user turn
  (where voice activity found it in the turn's own audio, or a live line's speech events): the
  same bounds ``response_latency_ms`` starts from.

Analysis: the span's speech (plus up to ``ANALYSIS_MARGIN_MS`` of what precedes and follows it
inside the span) resampled to ``METRIC_SAMPLE_RATE_HZ`` (16 kHz, soxr HQ). Onsets: a 64-band
mel spectrogram in 32 ms frames (``ONSET_FFT_SAMPLES``) every 10 ms (``HOP_SAMPLES``), flux with
a 3-band maximum filter (``max_size=3``: spectral leakage at a sound's end is no onset),
librosa's default peak picking. Pitch: 64 ms frames (``PITCH_FRAME_SAMPLES``) every 10 ms.
Deterministic (no randomness anywhere). Cost (``benchmarks/bench_product_voice.py``): about
70-80 ms per second of analysed audio on one core, pyin most of it; on tone speech of known
word rate the onset rate equals it (2.62-2.63 per second).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._steps import run_steps
from ..artifacts import VoiceMetrics
from ..audio import PcmAudio
from ..recording import Recording, ns_to_samples, samples_to_ns
from ._metric_audio import METRIC_SAMPLE_RATE_HZ, float_16k
from ._placement import Placement
from ._voice import _gather, _user_speech_ns, speech_segments_ns

MIN_PAUSE_MS = 200.0
MIN_RATE_SPEAKING_MS = 500.0
MIN_VOICED_FRAMES = 5
PITCH_FMIN_HZ = 65.0
PITCH_FMAX_HZ = 400.0
HOP_SAMPLES = 160  # 10 ms at 16 kHz
PITCH_FRAME_SAMPLES = 1024  # 64 ms: four periods of the lowest pitch
ONSET_FFT_SAMPLES = 512  # 32 ms
ONSET_MEL_BANDS = 64
ANALYSIS_MARGIN_MS = 50.0

Interval = tuple[int, int]  # (start, end) ns on the listener timeline


@dataclass(frozen=True, slots=True)
class ReplyVoice:
    """The product's voice in one reply (definitions: the module docstring). Times in ms; the
    pauses are ``(start on the listener timeline, duration)``."""

    speech_ms: float | None = None
    speaking_ms: float | None = None
    onset_count: int | None = None
    speech_rate_onsets_per_s: float | None = None
    voiced_frames: int | None = None
    pitch_median_hz: float | None = None
    pitch_p5_hz: float | None = None
    pitch_p95_hz: float | None = None
    pitch_range_semitones: float | None = None
    loudness_dbfs: float | None = None
    pause_count: int | None = None
    pause_total_ms: float | None = None
    longest_pause_ms: float | None = None
    pauses: tuple[tuple[float, float], ...] = ()
    overlap_with_user_ms: float | None = None
    reason: str | None = None

    def detail(self) -> dict[str, Any]:
        """What the turn's flattened fields do not already say (``speech["product_voice"]``)."""
        return {"speech_ms": self.speech_ms, "speaking_ms": self.speaking_ms,
                "onset_count": self.onset_count, "voiced_frames": self.voiced_frames,
                "pitch_p5_hz": self.pitch_p5_hz, "pitch_p95_hz": self.pitch_p95_hz,
                "pauses": [list(pause) for pause in self.pauses], "reason": self.reason}


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def _clipped(intervals: Sequence[Interval], start: int, end: int) -> list[Interval]:
    return [(max(a, start), min(b, end)) for a, b in intervals if b > start and a < end]


def overlap_ns(first: Sequence[Interval], second: Sequence[Interval]) -> int:
    """Total time covered by both lists of intervals (each list free of self-overlap)."""
    return sum(max(0, min(b, d) - max(a, c)) for a, b in first for c, d in second)


def _phrases(segments: list[Interval], min_pause_ns: int) -> list[Interval]:
    """Segments joined across gaps shorter than a pause."""
    joined = [segments[0]]
    for start, end in segments[1:]:
        if start - joined[-1][1] < min_pause_ns:
            joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return joined


def _dbfs(samples: np.ndarray) -> float | None:
    power = float(np.mean(np.square(samples.astype(np.float64)))) if samples.size else 0.0
    return None if power == 0.0 else round(10.0 * math.log10(power / 32768.0 ** 2), 2)


def reply_voice(channel: PcmAudio, *, span_ns: Interval,
                speech_ns: Sequence[Interval] | None = None,
                user_speech_ns: Sequence[Interval] = (),
                min_pause_ms: float = MIN_PAUSE_MS) -> ReplyVoice:
    """The product's voice inside ``span_ns`` of ``channel`` (the placed product channel).

    ``speech_ns``: the channel's speech segments (default: voice activity on ``channel``, as
    :func:`~voicelab.metrics._voice.speech_segments_ns` finds them; pass them to find them
    once for every reply). ``user_speech_ns``: when the user speaks on the same timeline.
    """
    if speech_ns is None:
        speech_ns = speech_segments_ns(channel)
    segments = [(a, b) for a, b in _clipped(speech_ns, *span_ns) if b > a]
    if not segments:
        return ReplyVoice(overlap_with_user_ms=0.0, reason="no speech heard")
    min_pause_ns = int(min_pause_ms * 1_000_000)
    pauses = [(end, start - end)
              for (_, end), (start, _) in zip(segments[:-1], segments[1:], strict=True)
              if start - end >= min_pause_ns]
    phrases = _phrases(segments, min_pause_ns)
    speaking_ns = sum(b - a for a, b in phrases)
    rate = channel.sample_rate_hz
    samples = channel.samples
    speech_samples = np.concatenate([samples[ns_to_samples(a):ns_to_samples(b)]
                                     for a, b in segments])
    margin_ns = int(ANALYSIS_MARGIN_MS * 1_000_000)
    window_start = max(span_ns[0], segments[0][0] - margin_ns, 0)
    window_end = min(span_ns[1], segments[-1][1] + margin_ns, samples_to_ns(samples.size))
    window = PcmAudio(samples[ns_to_samples(window_start):ns_to_samples(window_end)], rate)
    floats = float_16k(window)
    onsets_ns = window_start + _onset_seconds(floats) * 1e9
    slack_ns = ONSET_FFT_SAMPLES / 2 / METRIC_SAMPLE_RATE_HZ * 1e9  # a frame centred before
    onset_count = int(sum(np.count_nonzero((onsets_ns >= a - slack_ns) & (onsets_ns < b))
                          for a, b in phrases))
    pitch = _pitch(floats)
    speaking_ms = speaking_ns / 1e6
    speech_rate = round(onset_count / (speaking_ms / 1e3), 3) \
        if speaking_ms >= MIN_RATE_SPEAKING_MS else None
    return ReplyVoice(
        speech_ms=_ms(sum(b - a for a, b in segments)), speaking_ms=round(speaking_ms, 3),
        onset_count=onset_count, speech_rate_onsets_per_s=speech_rate, **pitch,
        loudness_dbfs=_dbfs(speech_samples), pause_count=len(pauses),
        pause_total_ms=_ms(sum(length for _, length in pauses)),
        longest_pause_ms=_ms(max((length for _, length in pauses), default=0)),
        pauses=tuple((_ms(start), _ms(length)) for start, length in pauses),
        overlap_with_user_ms=_ms(overlap_ns(segments, user_speech_ns)),
        reason=None if speech_rate is not None and pitch["pitch_median_hz"] is not None
        else _why_missing(speech_rate, pitch))


def _why_missing(speech_rate: float | None, pitch: dict[str, object]) -> str:
    reasons = []
    if speech_rate is None:
        reasons.append(f"under {MIN_RATE_SPEAKING_MS:g} ms of speaking time: no rate")
    if pitch["pitch_median_hz"] is None:
        reasons.append(f"fewer than {MIN_VOICED_FRAMES} voiced frames: no pitch")
    return "; ".join(reasons)


def _onset_seconds(floats: np.ndarray) -> np.ndarray:
    """Onset times (s from the start of ``floats``, 16 kHz)."""
    import librosa

    envelope = librosa.onset.onset_strength(
        y=floats, sr=METRIC_SAMPLE_RATE_HZ, hop_length=HOP_SAMPLES, n_fft=ONSET_FFT_SAMPLES,
        n_mels=ONSET_MEL_BANDS, max_size=3)
    return np.asarray(librosa.onset.onset_detect(
        onset_envelope=envelope, sr=METRIC_SAMPLE_RATE_HZ, hop_length=HOP_SAMPLES,
        units="time"), dtype=np.float64)


def _pitch(floats: np.ndarray) -> dict[str, Any]:
    """Voiced-frame pitch statistics of ``floats`` (16 kHz) by pyin."""
    import librosa

    found: dict[str, Any] = {"voiced_frames": 0, "pitch_median_hz": None, "pitch_p5_hz": None,
                             "pitch_p95_hz": None, "pitch_range_semitones": None}
    if floats.size < PITCH_FRAME_SAMPLES:
        return found
    f0, voiced, _ = librosa.pyin(floats, fmin=PITCH_FMIN_HZ, fmax=PITCH_FMAX_HZ,
                                 sr=METRIC_SAMPLE_RATE_HZ, frame_length=PITCH_FRAME_SAMPLES,
                                 hop_length=HOP_SAMPLES)
    hz = f0[voiced & np.isfinite(f0)]
    found["voiced_frames"] = int(hz.size)
    if hz.size < MIN_VOICED_FRAMES:
        return found
    low, median, high = np.percentile(hz, [5, 50, 95])
    found.update(pitch_median_hz=round(float(median), 2), pitch_p5_hz=round(float(low), 2),
                 pitch_p95_hz=round(float(high), 2),
                 pitch_range_semitones=round(12.0 * math.log2(high / low), 3))
    return found


# --- every reply of a recording ---------------------------------------------------------------

def user_speech_intervals(recording: Recording, placement: Placement) -> list[Interval]:
    """Where the user speaks on the listener timeline: each user turn's speech, start to end."""
    users = run_steps(_gather(recording)).users
    intervals = []
    for turn in sorted(users):
        start, end = _user_speech_ns(turn, users, placement)
        if start is not None and end is not None and end > start:
            intervals.append((start, end))
    return intervals


def product_voice(recording: Recording, placement: Placement) -> dict[str, ReplyVoice]:
    """:func:`reply_voice` of every reply the listener heard, by turn id."""
    speech = speech_segments_ns(placement.product)
    users = user_speech_intervals(recording, placement)
    replies = {}
    for turn_id, playback in placement.responses.items():
        heard = [chunk for chunk in playback.chunks if chunk.heard]
        if not heard:
            continue
        span = (samples_to_ns(min(c.start for c in heard)),
                samples_to_ns(max(c.end for c in heard)))
        replies[turn_id] = reply_voice(placement.product, span_ns=span, speech_ns=speech,
                                       user_speech_ns=users)
    return replies


def add_product_voice_metrics(recording: Recording, metrics: VoiceMetrics, placement: Placement
                              ) -> None:
    """Each turn of ``metrics`` (a :class:`~voicelab.artifacts.VoiceMetrics`) gets the product
    voice of its reply: the flattened ``output_*`` fields and ``overlap_with_user_ms``, and the
    detail under ``speech["product_voice"]``. Seconds of numeric work: a worker thread."""
    replies = product_voice(recording, placement)
    for entry in metrics.turns:
        voice = replies.get(entry.turn_id)
        if voice is None:
            continue
        entry.output_speech_rate_onsets_per_s = voice.speech_rate_onsets_per_s
        entry.output_pitch_median_hz = voice.pitch_median_hz
        entry.output_pitch_range_semitones = voice.pitch_range_semitones
        entry.output_loudness_dbfs = voice.loudness_dbfs
        entry.output_pause_count = voice.pause_count
        entry.output_pause_total_ms = voice.pause_total_ms
        entry.output_longest_pause_ms = voice.longest_pause_ms
        entry.overlap_with_user_ms = voice.overlap_with_user_ms
        entry.speech = {**(entry.speech or {}), "product_voice": voice.detail()}
