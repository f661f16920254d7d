"""The product's voice on synthetic signals whose pitch, rate, loudness, pauses and overlap are
known by construction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voicelab.audio import PcmAudio
from voicelab.metrics import compute_voice_metrics, place_channels
from voicelab.metrics._product_voice import (
    MIN_PAUSE_MS,
    add_product_voice_metrics,
    overlap_ns,
    reply_voice,
)
from voicelab.recording import ATTRIBUTES, EventType, Recording

RATE = 24_000
MS = 1_000_000  # ns
EDGE_MS = 10.0  # raised-cosine fade of every burst: no click, so no spurious onset


def harmonic(f0_hz: float | np.ndarray, ms: float, *, rms_dbfs: float = -20.0) -> np.ndarray:
    """A voice-like harmonic tone (fundamental and three harmonics) at ``f0_hz`` (a constant or
    one frequency per sample), scaled to ``rms_dbfs`` before its fades."""
    count = int(RATE * ms / 1000)
    frequency = np.broadcast_to(np.asarray(f0_hz, dtype=np.float64), (count,))
    phase = 2 * np.pi * np.cumsum(frequency) / RATE
    wave = sum(weight * np.sin(k * phase) for k, weight in ((1, 1.0), (2, 0.5), (3, 0.25),
                                                           (4, 0.12)))
    wave *= 32768 * 10 ** (rms_dbfs / 20) / np.sqrt(np.mean(wave ** 2))
    edge = int(RATE * EDGE_MS / 1000)
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, edge))
    wave[:edge] *= ramp
    wave[-edge:] *= ramp[::-1]
    return wave


def silence(ms: float) -> np.ndarray:
    return np.zeros(int(RATE * ms / 1000))


# No steady sound here lasts a second: the voice activity detector takes a sound that never dips
# for its 1 s noise window as the background (speech has pauses and closures, a tone does not).
def channel(*parts: np.ndarray) -> PcmAudio:
    """The parts one after another, with 200 ms of silence before and after."""
    samples = np.concatenate([silence(200), *parts, silence(200)])
    return PcmAudio(np.round(samples).astype(np.int16))


def voice_of(audio: PcmAudio, **options):
    return reply_voice(audio, span_ns=(0, audio.num_samples * 1_000_000_000 // RATE), **options)


@pytest.mark.parametrize("f0_hz", [110.0, 220.0])
def test_pitch_of_a_steady_tone(f0_hz):
    tone = harmonic(f0_hz, 900)
    voice = voice_of(channel(tone))
    # speech is what is audible: from the first to the last sample above the silence threshold
    # (its fades are quiet only for their first and last millisecond or so)
    loud = np.flatnonzero(np.abs(np.round(tone)) > 256)
    assert voice.speech_ms == pytest.approx((loud[-1] + 1 - loud[0]) / RATE * 1000, abs=0.1)
    # pyin's pitch grid is 0.1 semitone (0.6 %); a steady tone has no range
    assert voice.pitch_median_hz == pytest.approx(f0_hz, rel=0.01)
    assert voice.pitch_range_semitones < 0.2
    assert voice.voiced_frames > 80  # about one per 10 ms of the tone


def test_pitch_range_of_an_octave_glide():
    # 110 Hz to 220 Hz at a constant rate in semitones: the voiced frames spread evenly over
    # 12 semitones, so the 5th-95th percentile range is 90 % of them
    samples = int(RATE * 0.95)
    glide = 110.0 * 2.0 ** (np.arange(samples) / samples)
    voice = voice_of(channel(harmonic(glide, 950)))
    assert voice.pitch_range_semitones == pytest.approx(10.8, abs=0.4)
    assert voice.pitch_median_hz == pytest.approx(110 * math.sqrt(2), rel=0.02)
    assert voice.pitch_p5_hz < 120 and voice.pitch_p95_hz > 200


@pytest.mark.parametrize(("per_second", "burst_ms"), [(4.0, 120.0), (6.0, 90.0)])
def test_speech_rate_of_a_syllable_train(per_second, burst_ms):
    # 12 syllables (alternating pitch) with gaps shorter than a pause: speaking time runs from
    # the first syllable's start to the last one's end
    period_ms = 1000 / per_second
    parts = []
    for index in range(12):
        parts += [harmonic(140.0 * (1 + 0.12 * (index % 3)), burst_ms),
                  silence(period_ms - burst_ms)]
    voice = voice_of(channel(*parts[:-1]))
    speaking_ms = 11 * period_ms + burst_ms
    assert voice.pause_count == 0
    assert voice.speaking_ms == pytest.approx(speaking_ms, abs=15)  # 10 ms fades at each end
    assert voice.onset_count == 12
    assert voice.speech_rate_onsets_per_s == pytest.approx(12 / (speaking_ms / 1000), rel=0.01)


@pytest.mark.parametrize("rms_dbfs", [-12.0, -30.0])
def test_loudness_of_a_sine_at_a_known_level(rms_dbfs):
    count = int(RATE * 0.8)
    amplitude = 32768 * 10 ** (rms_dbfs / 20) * math.sqrt(2)  # a sine's RMS is peak / sqrt 2
    sine = amplitude * np.sin(2 * np.pi * 440 * np.arange(count) / RATE)
    voice = voice_of(channel(sine))
    # int16 rounding and a sample or two at the refined edges: well under 0.05 dB
    assert voice.loudness_dbfs == pytest.approx(rms_dbfs, abs=0.05)


def test_pauses_inside_a_reply_are_silences_of_at_least_200_ms():
    assert MIN_PAUSE_MS == 200.0
    voice = voice_of(channel(harmonic(150, 600), silence(400), harmonic(150, 500), silence(250),
                             harmonic(150, 300), silence(120),  # a gap, not a pause
                             harmonic(150, 300)))
    assert voice.pause_count == 2
    # edges are found to the sample where a 10 ms fade rises above a tenth of its frame's peak
    assert voice.longest_pause_ms == pytest.approx(400 + 2 * EDGE_MS / 2, abs=8)
    assert voice.pause_total_ms == pytest.approx(650 + 4 * EDGE_MS / 2, abs=12)
    starts = [start for start, _ in voice.pauses]
    assert starts == pytest.approx([200 + 600 - EDGE_MS / 2, 200 + 1500 - EDGE_MS / 2], abs=5)
    # first start to last end, minus the pauses: every edge about half a fade inside its burst
    speaking_ms = (600 + 500 + 300 + 120 + 300) - 6 * EDGE_MS / 2
    assert voice.speaking_ms == pytest.approx(speaking_ms, abs=10)
    # the pauses do not dilute the loudness
    assert voice.loudness_dbfs == pytest.approx(-20.0, abs=0.3)


def test_overlap_with_the_user_counts_only_product_speech():
    # product speech 200-1200 ms and 1500-2000 ms; the user speaks 0-500 ms and 1250-1400 ms
    # (inside the product's pause): 300 ms of overlap
    audio = channel(harmonic(150, 900), harmonic(170, 100), silence(300), harmonic(150, 500))
    voice = voice_of(audio, user_speech_ns=[(0, 500 * MS), (1250 * MS, 1400 * MS)])
    assert voice.overlap_with_user_ms == pytest.approx(300, abs=6)
    assert overlap_ns([(0, 10), (20, 30)], [(5, 25)]) == 10


def test_a_silent_reply_has_no_voice_and_says_why():
    voice = voice_of(PcmAudio.silence(1.0))
    assert voice.reason == "no speech heard"
    assert voice.pitch_median_hz is None and voice.pause_count is None
    assert voice.overlap_with_user_ms == 0.0
    short = voice_of(channel(harmonic(150, 150)))
    assert short.speech_rate_onsets_per_s is None and "no rate" in short.reason
    assert short.pitch_median_hz == pytest.approx(150, rel=0.01)


def test_the_analysis_is_deterministic():
    audio = channel(harmonic(120, 400), silence(300), harmonic(180, 400))
    assert voice_of(audio) == voice_of(audio)


# --- a recording: the reply placed on the listener timeline -----------------------------------

def record(recording: Recording, at_ms: float, kind: str, turn: str, source: str = "evaluator",
           samples: np.ndarray | None = None, **attributes) -> None:
    kind = EventType(kind)
    recording.record(kind, ATTRIBUTES[kind](**attributes) if attributes else None,
                     source=source, direction="internal",
                     at_ns=int(at_ms * MS), turn_id=turn,
                     speaker_role="assistant" if source == "product" else None,
                     audio=None if samples is None else
                     np.round(samples).astype("<i2").tobytes())


def test_a_reply_that_starts_before_the_user_finished_overlaps_by_the_difference():
    recording = Recording(session_id="s", trace_id="0" * 32, root_span_id="r",
                          clock_ns=lambda: 0)
    user = np.concatenate([silence(100), harmonic(200, 1000), silence(100)])
    record(recording, 0, "user.turn_started", "turn-001", text="hello there",
           speech_start_sample=int(0.1 * RATE), speech_end_sample=int(1.1 * RATE))
    record(recording, 0, "user.audio_chunk", "turn-001", samples=user)
    record(recording, 1200, "user.turn_committed", "turn-001", expects_response="turn-001")
    # the product answers at 800 ms, while the user still speaks until 1100 ms
    reply = np.concatenate([harmonic(130, 700), silence(300), harmonic(130, 600)])
    record(recording, 800, "product.audio_chunk", "turn-001", "product", samples=reply)
    record(recording, 2500, "product.response_done", "turn-001", "product", status="completed")
    placement = place_channels(recording)
    metrics = compute_voice_metrics(recording, placement)
    add_product_voice_metrics(recording, metrics, placement)
    turn = metrics.turns[0]
    # the user's speech ends at 1100 ms, the product's begins at 800 ms (+ half its fade)
    assert turn.overlap_with_user_ms == pytest.approx(300 - EDGE_MS / 2, abs=5)
    assert turn.output_pause_count == 1
    assert turn.output_longest_pause_ms == pytest.approx(300 + EDGE_MS, abs=8)
    assert turn.output_pitch_median_hz == pytest.approx(130, rel=0.01)
    assert turn.output_loudness_dbfs == pytest.approx(-20.0, abs=0.3)
    assert turn.output_speech_rate_onsets_per_s == pytest.approx(
        2 / (turn.speech["product_voice"]["speaking_ms"] / 1000), rel=1e-3)
    assert turn.speech["product_voice"]["onset_count"] == 2
