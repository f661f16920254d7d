"""The speakerphone echo path: the seeded room impulse response, streaming convolution, the
echo return loss, and the live line's causal echo (what was heard at t is sent no earlier than
t + delay)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.signal import fftconvolve

from voicelab.audio import EchoPath, room_impulse_response
from voicelab.config import EchoConfig
from voicelab.recording import EventType, Recording
from voicelab.runner._heard_speech import HeardSpeech
from voicelab.runner._probes import LineEcho

RATE = 24_000


def test_the_room_is_seeded_and_decays_60_db_in_rt60():
    room = room_impulse_response(rt60_ms=300, lowpass_hz=3400, seed=5)
    assert room.shape == (int(0.3 * RATE),)
    # unit energy before the low-pass, which keeps roughly its band's share (3.4 of 12 kHz)
    assert 0.2 < np.dot(room, room) < 0.5
    assert_allclose(room_impulse_response(rt60_ms=300, lowpass_hz=3400, seed=5), room)
    assert not np.allclose(room_impulse_response(rt60_ms=300, lowpass_hz=3400, seed=6), room)
    # the tail's envelope: energy in the last 30 ms is about 60 dB under the 30 ms after the
    # direct path (the exponential's 54 dB between their centres, give or take the noise)
    window = int(0.03 * RATE)
    early = np.dot(room[window:2 * window], room[window:2 * window])
    late = np.dot(room[-window:], room[-window:])
    assert 45 < 10 * np.log10(early / late) < 65
    # the speakerphone's band: little energy above the low-pass
    spectrum = np.abs(np.fft.rfft(room, 1 << 15)) ** 2
    freqs = np.fft.rfftfreq(1 << 15, 1 / RATE)
    assert spectrum[freqs > 6000].sum() / spectrum.sum() < 0.01


def test_streaming_in_any_blocks_equals_one_convolution():
    rng = np.random.default_rng(3)
    room = room_impulse_response(rt60_ms=200, lowpass_hz=3400, seed=1)
    signal = rng.normal(0, 3000, 30_000)
    path = EchoPath(room)
    pieces, position = [], 0
    for size in rng.integers(1, 5000, 40):
        pieces.append(path.process(signal[position:position + size]))
        position += size
        if position >= signal.size:
            break
    streamed = np.concatenate(pieces)
    whole = fftconvolve(signal, room)[:streamed.size]
    # float rounding of two FFT routes: far below one PCM16 step
    assert_allclose(streamed, whole, atol=1e-6)


@pytest.mark.parametrize("loss_db", [6.0, 20.0, 35.0])
def test_the_echo_is_the_return_loss_below_broadband_input(loss_db):
    path = EchoPath.speakerphone(rt60_ms=250, lowpass_hz=3400, echo_return_loss_db=loss_db,
                                 seed=2)
    # noise inside the speakerphone's band (above it the low-pass takes energy away)
    rng = np.random.default_rng(0)
    noise = fftconvolve(rng.normal(0, 4000, 5 * RATE),
                        room_impulse_response(rt60_ms=1, lowpass_hz=3000, seed=9))[:5 * RATE]
    echo = path.process(noise)
    measured = 10 * np.log10(np.mean(noise[RATE:] ** 2) / np.mean(echo[RATE:] ** 2))
    # the room colours the spectrum; over 4 s of noise the power is within a dB and a half
    assert abs(measured - loss_db) < 1.5


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_the_line_sends_what_was_heard_no_earlier_than_the_delay():
    clock = _Clock()
    recording = Recording(session_id="s", trace_id="t" * 32, root_span_id="r" * 16,
                          clock_ns=clock, start_ns=0)
    click_at = RATE  # a 10 ms burst one second into the call
    audio = np.zeros(2 * RATE, dtype=np.int16)
    audio[click_at:click_at + 240] = 20_000
    recording.record(EventType.PRODUCT_AUDIO, source="product", direction="inbound",
                     turn_id="turn-000", audio=audio.tobytes())
    heard_speech = HeardSpeech(recording, hangover_ms=700)
    config = EchoConfig(delay_ms=50, echo_return_loss_db=10)
    echo = LineEcho(config, heard_speech=heard_speech, seed=0)
    echo.start(0)
    frame = 480  # 20 ms frames
    first_loud_send = None
    for index in range(100):
        clock.now = index * frame * 1_000_000_000 // RATE  # the frame is sent now
        samples = echo.for_frame(index, frame)
        if first_loud_send is None and np.abs(samples).max() > 1:
            first_loud_send = clock.now
    assert first_loud_send is not None
    heard_ns = click_at * 1_000_000_000 // RATE
    delay_ns = 50_000_000
    # sent no earlier than heard + delay, and at most one frame later
    assert heard_ns + delay_ns <= first_loud_send <= heard_ns + delay_ns + 20_000_000
