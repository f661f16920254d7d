"""Telephony channel throughput: 10 minutes of tone speech through each codec, turn by turn.

Targets (issue 14, audio side): G.711 (mulaw, alaw) at least 100x real time on one core, Opus at
least 20x. Each line runs a fresh channel with a realistic impairment (Gilbert-Elliott loss,
exponential jitter, repeat concealment) over the ~165 turns of the timeline, and the live form
(a ChannelStream fed 20 ms chunks) is printed for the codecs too. Run from the repository root:

    python benchmarks/bench_channel.py [--minutes 10] [--repeats 3]

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

import numpy as np  # noqa: E402

from voicelab.audio import Channel, ChannelStream, PcmAudio, tone_speech  # noqa: E402
from voicelab.config._channel import (  # noqa: E402
    ConcealmentConfig,
    GilbertElliottLoss,
    JitterConfig,
    LineConfig,
    OpusConfig,
)

TARGETS_X_REAL_TIME = {"pcm": 100.0, "mulaw": 100.0, "alaw": 100.0, "opus": 20.0}
LINES = {
    "pcm": LineConfig(codec="pcm"),
    "mulaw": LineConfig(codec="mulaw"),
    "alaw": LineConfig(codec="alaw"),
    "opus 24 kHz, 24 kbps": LineConfig(codec="opus"),
    "opus 48 kHz, 24 kbps": LineConfig(codec="opus", opus=OpusConfig(sample_rate_hz=48_000)),
}
IMPAIRMENT = {"loss": GilbertElliottLoss(p=0.01, r=0.3), "jitter": JitterConfig(jitter_ms=15),
              "concealment": ConcealmentConfig(policy="repeat")}


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
    """(first run, later runs) in seconds; the first run pays imports and page faults."""
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times[0], times[1:]


def report(label: str, audio_seconds: float, first: float, later: list[float],
           target: float) -> bool:
    median = statistics.median(later)
    speed = audio_seconds / median
    verdict = "meets" if speed >= target else "MISSES"
    print(f"  {label:<40} first {first:6.2f} s | median {median:6.2f} s = {speed:7.0f}x "
          f"real time -> {verdict} {target:.0f}x")
    return speed >= target


def by_turns(config: LineConfig, turns: list[PcmAudio]) -> None:
    channel = Channel(config, seed=7)
    for number, turn in enumerate(turns):
        channel.process(turn, turn_id=number)


def live(config: LineConfig, turns: list[PcmAudio]) -> None:
    stream = ChannelStream(config, seed=7)
    for number, turn in enumerate(turns):
        for chunk in turn.chunks(config.packet_ms):
            stream.push(chunk, turn_id=number)
    stream.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(f"bench_channel: {args.minutes:g} min of tone speech, {pin_to_one_core()}, "
          f"numpy {np.__version__}")
    turns = speech_timeline(args.minutes * 60, seed=1)
    audio_seconds = sum(turn.duration_seconds for turn in turns)
    print(f"  speech: {len(turns)} turns, {audio_seconds:.1f} s; impairment: Gilbert-Elliott "
          "p=0.01 r=0.3, exponential jitter 15 ms, repeat concealment, 20 ms packets")

    results = []
    for label, line in LINES.items():
        config = line.model_copy(update=IMPAIRMENT)
        target = TARGETS_X_REAL_TIME[config.codec]
        first, later = timed(lambda config=config: by_turns(config, turns), args.repeats)
        results.append(report(f"{label}, turn by turn", audio_seconds, first, later, target))
        first, later = timed(lambda config=config: live(config, turns), args.repeats)
        results.append(report(f"{label}, live 20 ms pushes", audio_seconds, first, later, target))

    print("bench_channel: all targets met" if all(results) else "bench_channel: TARGET MISSED")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
