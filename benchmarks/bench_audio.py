"""Audio engine throughput: signal analysis and environment mixing of 10 minutes of audio.

Target (issue): each at least 2,000x real time on one core. Run from the repository root:

    python benchmarks/bench_audio.py [--minutes 10] [--repeats 7]

The process pins itself to one CPU (where the OS allows it) and limits BLAS/OpenMP threads, so
the figures are single-core figures. Printed, not asserted: this is not a timed test.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # before numpy is imported

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from voicelab.audio import (  # noqa: E402
    PcmAudio,
    analyze_signal,
    mix,
    prepare_environment,
    tone_speech,
)
from voicelab.config import load_environment  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TARGET_X_REAL_TIME = 2_000.0


def pin_to_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned (no sched_setaffinity on this OS)"


def speech_timeline(seconds: float, *, seed: int) -> list[PcmAudio]:
    """Tone-speech user turns (with their pauses) adding up to ``seconds``."""
    sentences = ["Please record the plan and save the reminder.",
                 "Yes, that is right, thank you.",
                 "Could you also move the weekly summary to four in the afternoon?"]
    turns: list[PcmAudio] = []
    total = 0.0
    index = 0
    while total < seconds:
        turn = tone_speech(sentences[index % len(sentences)], seed=seed + index)
        turns.append(turn)
        total += turn.duration_seconds
        index += 1
    return turns


def timed(call: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    """(first run, later runs) in seconds; the first run pays page faults and cache misses."""
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times[0], times[1:]


def report(label: str, audio_seconds: float, first: float, later: list[float]) -> bool:
    best, median = min(later), statistics.median(later)
    speed = audio_seconds / median
    verdict = "meets" if speed >= TARGET_X_REAL_TIME else "MISSES"
    print(f"  {label:<44} first {first * 1e3:8.1f} ms | min {best * 1e3:7.1f} ms | "
          f"median {median * 1e3:7.1f} ms = {speed:8.0f}x real time "
          f"(first run {audio_seconds / first:6.0f}x) -> {verdict} {TARGET_X_REAL_TIME:.0f}x")
    return speed >= TARGET_X_REAL_TIME


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    seconds = args.minutes * 60

    print(f"bench_audio: {args.minutes:g} min of audio, {pin_to_one_core()}, "
          f"numpy {np.__version__}")
    start = time.perf_counter()
    office = load_environment(REPO / "examples" / "environment-office.yaml")
    environment = prepare_environment(office)
    print(f"  prepare_environment(office: 5 files, 16 kHz -> 24 kHz)  "
          f"{(time.perf_counter() - start) * 1e3:.1f} ms (decode + soxr resampling, once per run)")

    turns = speech_timeline(seconds, seed=1)
    one_buffer = PcmAudio.concat(turns)
    audio_seconds = one_buffer.duration_seconds
    offsets = np.concatenate([[0.0], np.cumsum([t.duration_seconds for t in turns])[:-1]])
    print(f"  speech: {len(turns)} tone-speech turns, {audio_seconds:.1f} s in total")

    results = []
    first, later = timed(lambda: analyze_signal(one_buffer), args.repeats)
    results.append(report("analyze_signal, one 10-minute buffer", audio_seconds, first, later))
    first, later = timed(lambda: [analyze_signal(t) for t in turns], args.repeats)
    results.append(report(f"analyze_signal, {len(turns)} turns", audio_seconds, first, later))

    def mix_turns() -> None:
        for number, (turn, offset) in enumerate(zip(turns, offsets, strict=True), start=1):
            mix(turn, environment=environment, seed=7, turn_number=number,
                stream_offset_seconds=float(offset))

    first, later = timed(lambda: mix(one_buffer, environment=environment, seed=7,
                                     turn_number=2), args.repeats)
    results.append(report("mix (office), one 10-minute turn", audio_seconds, first, later))
    first, later = timed(mix_turns, args.repeats)
    results.append(report(f"mix (office), {len(turns)} turns with offsets", audio_seconds,
                          first, later))

    print("bench_audio: all targets met" if all(results) else "bench_audio: TARGET MISSED")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
