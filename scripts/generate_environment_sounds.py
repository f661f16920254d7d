"""Generate the environment sounds shipped under datasets/environments/ from synthesized signals.

Every sound is made here from seeded noise, tones and voicelab's own tone speech, so the files
carry no third-party licence. Run it again to reproduce them (byte for byte, except the OGG stream serial number):

    python scripts/generate_environment_sounds.py
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile
from scipy import signal

from voicelab.audio import tone_speech

RATE_HZ = 16_000  # shipped below the canonical rate on purpose: the loader resamples
OUT = Path(__file__).resolve().parent.parent / "datasets" / "environments"


def _normalize(x: np.ndarray, peak: float) -> np.ndarray:
    return x * (peak / max(1e-9, float(np.max(np.abs(x)))))


def _pink(rng: np.random.Generator, count: int) -> np.ndarray:
    white = rng.standard_normal(count)
    spectrum = np.fft.rfft(white)
    freqs = np.fft.rfftfreq(count, 1 / RATE_HZ)
    spectrum[1:] /= np.sqrt(freqs[1:])
    spectrum[0] = 0
    return np.fft.irfft(spectrum, count)


def office_hum(rng: np.random.Generator) -> np.ndarray:
    seconds = 8.0
    t = np.arange(int(seconds * RATE_HZ)) / RATE_HZ
    mains = sum(a * np.sin(2 * np.pi * f * t) for f, a in ((50, 1.0), (100, 0.5), (150, 0.25)))
    sos = signal.butter(4, 400, "lowpass", fs=RATE_HZ, output="sos")
    hvac = signal.sosfilt(sos, _pink(rng, t.size))
    hvac = _normalize(hvac, 1.0)
    return _normalize(0.35 * mains + hvac, 0.5)


def distant_babble(rng: np.random.Generator) -> np.ndarray:
    lines = ["the quarterly numbers look fine but the meeting ran long again",
             "did you see the email about the parking garage on monday",
             "we should order lunch for the whole team before noon",
             "I think the printer on the third floor is jammed again",
             "can you send me the slides from yesterday afternoon"]
    seconds = 10.0
    total = np.zeros(int(seconds * RATE_HZ))
    for index, line in enumerate(lines):
        voice = tone_speech(line, seed=100 + index, sample_rate_hz=RATE_HZ).samples / 32768.0
        start = int(rng.uniform(0, 2.0) * RATE_HZ)
        reps = np.tile(np.concatenate([voice, np.zeros(int(rng.uniform(0.3, 1.2) * RATE_HZ))]), 4)
        segment = reps[: total.size - start]
        total[start:start + segment.size] += segment * rng.uniform(0.5, 1.0)
    sos = signal.butter(4, 1800, "lowpass", fs=RATE_HZ, output="sos")
    muffled = signal.sosfilt(sos, total)
    tail = np.exp(-np.arange(int(0.25 * RATE_HZ)) / (0.06 * RATE_HZ)) * rng.standard_normal(
        int(0.25 * RATE_HZ))
    room = signal.fftconvolve(muffled, tail)[: total.size]
    return _normalize(room, 0.5)


def door_close(rng: np.random.Generator) -> np.ndarray:
    seconds = 0.9
    t = np.arange(int(seconds * RATE_HZ)) / RATE_HZ
    thump = np.sin(2 * np.pi * 70 * t) * np.exp(-t / 0.09)
    sos = signal.butter(2, [800, 5000], "bandpass", fs=RATE_HZ, output="sos")
    click = signal.sosfilt(sos, rng.standard_normal(t.size)) * np.exp(-t / 0.012)
    rattle = signal.sosfilt(sos, rng.standard_normal(t.size)) * np.exp(-(t - 0.08).clip(0) / 0.05)
    rattle[t < 0.08] = 0
    return _normalize(thump + 0.6 * click + 0.25 * rattle, 0.9)


def keyboard_typing(rng: np.random.Generator) -> np.ndarray:
    seconds = 4.0
    total = np.zeros(int(seconds * RATE_HZ))
    sos = signal.butter(2, [1500, 6000], "bandpass", fs=RATE_HZ, output="sos")
    position = 0.1
    while position < seconds - 0.05:
        n = int(0.02 * RATE_HZ)
        key = signal.sosfilt(sos, rng.standard_normal(n)) * np.exp(-np.arange(n) / (0.003 * RATE_HZ))
        start = int(position * RATE_HZ)
        total[start:start + n] += key * rng.uniform(0.4, 1.0)
        position += rng.choice([rng.uniform(0.08, 0.2), rng.uniform(0.4, 0.9)], p=[0.85, 0.15])
    return _normalize(total, 0.6)


def phone_ring(rng: np.random.Generator) -> np.ndarray:
    seconds = 3.0
    t = np.arange(int(seconds * RATE_HZ)) / RATE_HZ
    tone = np.sin(2 * np.pi * 440 * t) + np.sin(2 * np.pi * 480 * t)
    gate = ((t % 1.5) < 1.0).astype(float)
    fade = np.convolve(gate, np.ones(160) / 160, mode="same")
    return _normalize(tone * fade, 0.6)


def street_traffic(rng: np.random.Generator) -> np.ndarray:
    seconds = 10.0
    count = int(seconds * RATE_HZ)
    brown = np.cumsum(rng.standard_normal(count))
    sos = signal.butter(2, 20, "highpass", fs=RATE_HZ, output="sos")
    rumble = signal.sosfilt(sos, brown)
    t = np.arange(count) / RATE_HZ
    swell = 0.6 + 0.4 * np.sin(2 * np.pi * 0.13 * t) ** 2
    return _normalize(_normalize(rumble, 1.0) * swell, 0.5)


def cafe_clatter(rng: np.random.Generator) -> np.ndarray:
    babble = distant_babble(rng) * 0.6
    sos = signal.butter(2, [2500, 7000], "bandpass", fs=RATE_HZ, output="sos")
    for _ in range(12):
        n = int(0.15 * RATE_HZ)
        clink = signal.sosfilt(sos, rng.standard_normal(n)) * np.exp(-np.arange(n) / (0.02 * RATE_HZ))
        start = int(rng.uniform(0, babble.size - n))
        babble[start:start + n] += _normalize(clink, 0.3)
    return _normalize(babble, 0.5)


def cough(rng: np.random.Generator) -> np.ndarray:
    """Two coughs: each an explosive broadband burst through vocal-tract-like resonances
    (bands around 500, 1500 and 2500 Hz) with a fast attack and a 50 ms decay, the second
    weaker."""
    seconds = 0.7
    t = np.arange(int(seconds * RATE_HZ)) / RATE_HZ
    total = np.zeros(t.size)
    for start, gain in ((0.03, 1.0), (0.3, 0.6)):
        local = (t - start).clip(0)
        envelope = (1 - np.exp(-local / 0.006)) * np.exp(-local / 0.05) * (t >= start)
        burst = rng.standard_normal(t.size) * envelope
        voiced = sum(signal.sosfilt(signal.butter(2, [f * 0.8, f * 1.2], "bandpass",
                                                  fs=RATE_HZ, output="sos"), burst) * weight
                     for f, weight in ((500, 1.0), (1500, 0.6), (2500, 0.35)))
        total += gain * voiced
    return _normalize(total, 0.8)


SOUNDS: dict[str, tuple[Callable[[np.random.Generator], np.ndarray], str]] = {
    "office-hum.wav": (office_hum, "PCM_16"),
    "distant-babble.wav": (distant_babble, "PCM_16"),
    "door-close.wav": (door_close, "PCM_16"),
    "keyboard-typing.wav": (keyboard_typing, "PCM_16"),
    "phone-ring.wav": (phone_ring, "PCM_16"),
    "street-traffic.flac": (street_traffic, "PCM_16"),
    "cafe-clatter.ogg": (cafe_clatter, "VORBIS"),
    "cough.wav": (cough, "PCM_16"),  # last: the seeds of the sounds before it stay the same
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", help="file names to write (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for index, (name, (make, subtype)) in enumerate(SOUNDS.items()):
        if args.only and name not in args.only:
            continue
        rng = np.random.default_rng(20260 + index)
        audio = np.clip(make(rng), -1.0, 1.0).astype(np.float32)
        soundfile.write(str(args.out / name), audio, RATE_HZ, subtype=subtype)
        print(f"{name}: {audio.size / RATE_HZ:.1f} s")


if __name__ == "__main__":
    main()
