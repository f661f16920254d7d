"""Voice activity detection cost: microseconds per received chunk, and times real time.

Target (issue 13): the streaming energy detector runs on the event loop for every received
chunk of every trial (tens of chunks a second, up to 200 concurrent trials), so a 20-40 ms chunk
at 24 kHz must cost well under 50 us. The stream is the product side of a conversation: tone
speech replies separated by seconds of silence frames, with office room noise under all of it
(so the detector is never on a cheap all-zero path). Also printed: the batch form
(``detect_speech`` over the whole stream), ``speech_bounds`` of one turn, and the webrtc backend
when it is installed. Run from the repository root:

    python benchmarks/bench_vad.py [--minutes 2] [--repeats 5]

The process pins itself to one CPU (where the OS allows it) and limits BLAS/OpenMP threads, so
the figures are single-core figures. Printed, not asserted: this is not a timed test.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # before numpy is imported

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from voicelab.audio import (  # noqa: E402
    CANONICAL_SAMPLE_RATE_HZ,
    PcmAudio,
    StreamingVad,
    detect_speech,
    mix,
    prepare_environment,
    speech_bounds,
    tone_speech,
)
from voicelab.config import load_environment  # noqa: E402

TARGET_US_PER_CHUNK = 50.0
CHUNK_MS = (20, 40)
OFFICE = Path(__file__).resolve().parents[1] / "examples" / "environment-office.yaml"
SENTENCES = ["Thanks for calling, how can I help you today?",
             "Your table for two is booked for seven o'clock on Friday.",
             "Is there anything else I can do for you?"]


def pin_to_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned (no sched_setaffinity on this OS)"


def product_stream(seconds: float) -> np.ndarray:
    """Replies (tone speech) with 1.5 s of silence after each, office noise under everything."""
    parts, total, index = [], 0, 0
    gap = np.zeros(int(1.5 * CANONICAL_SAMPLE_RATE_HZ), dtype=np.int16)
    while total < seconds * CANONICAL_SAMPLE_RATE_HZ:
        reply = tone_speech(SENTENCES[index % len(SENTENCES)], seed=index).samples
        parts += [reply, gap]
        total += reply.shape[0] + gap.shape[0]
        index += 1
    clean = PcmAudio(np.concatenate(parts))
    environment = prepare_environment(load_environment(OFFICE))
    return mix(clean, environment=environment, seed=3, turn_number=1).audio.samples


def stream_chunks(samples: np.ndarray, chunk_ms: int) -> list[np.ndarray]:
    size = CANONICAL_SAMPLE_RATE_HZ * chunk_ms // 1000
    return [samples[i:i + size] for i in range(0, samples.shape[0], size)]


def time_pushes(chunks: list[np.ndarray], repeats: int, **options) -> tuple[float, float]:
    """(median, p99) microseconds per push over ``repeats`` runs of the whole stream."""
    per_push: list[float] = []
    for _ in range(repeats):
        vad = StreamingVad(**options)
        push, clock = vad.push, time.perf_counter_ns
        times = np.empty(len(chunks))
        for index, chunk in enumerate(chunks):
            start = clock()
            push(chunk)
            times[index] = clock() - start
        per_push += (times / 1000.0).tolist()
    return statistics.median(per_push), float(np.percentile(per_push, 99))


def time_call(call, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])  # the first call pays imports and page faults


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    print(f"bench_vad: {args.minutes:g} min product stream (tone speech replies, 1.5 s silences, "
          f"office noise), {pin_to_one_core()}, numpy {np.__version__}")
    samples = product_stream(args.minutes * 60)
    seconds = samples.shape[0] / CANONICAL_SAMPLE_RATE_HZ
    backends = ["energy"]
    if importlib.util.find_spec("webrtcvad") is not None:
        backends.append("webrtc")
    else:
        print("  (webrtcvad not installed: the webrtc backend is skipped)")

    audio = PcmAudio(samples)
    turn = tone_speech(SENTENCES[1], seed=1)
    met = True
    for backend in backends:
        for chunk_ms in CHUNK_MS:
            chunks = stream_chunks(samples, chunk_ms)
            time_pushes(chunks[:200], 1, backend=backend)  # warm up imports and caches
            median, p99 = time_pushes(chunks, args.repeats, backend=backend)
            speed = chunk_ms * 1000.0 / median
            verdict = ""
            if backend == "energy":
                ok = median < TARGET_US_PER_CHUNK
                met &= ok
                verdict = f" -> {'meets' if ok else 'MISSES'} < {TARGET_US_PER_CHUNK:.0f} us"
            print(f"  {backend:<6} StreamingVad.push, {chunk_ms} ms chunks: median "
                  f"{median:6.1f} us, p99 {p99:6.1f} us per chunk = {speed:7.0f}x real time"
                  f"{verdict}")
        batch = time_call(lambda backend=backend: detect_speech(audio, backend=backend),
                          args.repeats)
        print(f"  {backend:<6} detect_speech over {seconds:.0f} s: {batch * 1000:7.1f} ms = "
              f"{seconds / batch:7.0f}x real time")
        bounds = time_call(lambda backend=backend: speech_bounds(turn, backend=backend),
                           args.repeats)
        print(f"  {backend:<6} speech_bounds of a {turn.duration_seconds:.1f} s turn: "
              f"{bounds * 1e6:7.0f} us")

    print("bench_vad: target met" if met else "bench_vad: TARGET MISSED")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
