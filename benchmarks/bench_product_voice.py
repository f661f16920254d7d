"""The product's voice metrics: cost per second of analysed reply, and the figures against what
the signal is by construction.

Each reply is tone speech (``voicelab.audio.tone_speech``: one harmonic burst per word), so the
truth is known: the words per second of speaking time (one burst, one onset), and the voice's
base pitch, which the seed chooses in 105-230 Hz (each word is pitched at base x U(0.85, 1.2)
with a glide, so the median over voiced frames lies a few percent above the base).
Printed per reply length: milliseconds of analysis per second of audio (one core), and the
measured rate and pitch median beside the truth. Run from the repository root:

    python benchmarks/bench_product_voice.py [--repeats 3]

Printed, not asserted: this is not a timed test.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # before numpy is imported

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from voicelab.audio import tone_speech  # noqa: E402
from voicelab.metrics._product_voice import reply_voice  # noqa: E402

SENTENCE = "thank you for calling the reservations line how can I help you today"


def base_pitch_hz(seed: int) -> float:
    """The tone voice's base pitch for ``seed`` (as ``voicelab.audio._tone`` draws it)."""
    from voicelab.audio._tone import _stable_seed

    return float(np.random.default_rng(_stable_seed("voice", seed)).uniform(105.0, 230.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    reply_voice(tone_speech(SENTENCE, seed=1), span_ns=(0, 10**9))  # librosa/numba warm-up
    print(f"{'sentences':>9} {'audio s':>8} {'ms per s':>9} {'words/s':>8} {'onsets/s':>9} "
          f"{'f0 base':>9} {'f0 median':>10}")
    for sentences in (1, 2, 4, 8):
        seed = 3 + sentences
        audio = tone_speech(" . ".join([SENTENCE] * sentences), seed=seed)
        seconds = audio.num_samples / audio.sample_rate_hz
        span = (0, audio.num_samples * 1_000_000_000 // audio.sample_rate_hz)
        costs = []
        for _ in range(arguments.repeats):
            started = time.perf_counter()
            voice = reply_voice(audio, span_ns=span)
            costs.append(time.perf_counter() - started)
        words = len(SENTENCE.split()) * sentences
        words_per_s = words / ((voice.speaking_ms or 0.0) / 1e3)
        print(f"{sentences:>9} {seconds:>8.1f} {statistics.median(costs) / seconds * 1e3:>9.1f} "
              f"{words_per_s:>8.2f} {voice.speech_rate_onsets_per_s or float('nan'):>9.2f} "
              f"{base_pitch_hz(seed):>9.1f} {voice.pitch_median_hz or float('nan'):>10.1f}")


if __name__ == "__main__":
    main()
