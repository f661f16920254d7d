"""The endpointing curve against the fake product at known thresholds: how close the measured
half-cut-in pause comes to the configured end-of-turn silence (``vad_silence_ms``).

    python benchmarks/bench_endpointing.py [--thresholds 500 1000] [--trials 3] [--step 0.1]

For each threshold it sweeps examples/sweep-endpointing.yaml over pauses from 0.2 s to 2.0 s
(``--step`` apart, ``--trials`` seeded trials each) and prints the curve (cut-in probability
with its Wilson interval, the waited-through latency's median) and the half-cut-in pause.
Real-time calls: about ``cells x trials`` calls of ~6 s, run at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import voicelab
from voicelab.config import EndpointingAxis, load_suite

SUITE = Path(__file__).resolve().parents[1] / "examples" / "sweep-endpointing.yaml"


def measure(threshold_ms: float, *, pauses: list[float], trials: int, folder: Path) -> None:
    suite = load_suite(SUITE)
    suite = dataclasses.replace(suite, suite=suite.suite.model_copy(update={
        "endpointing": EndpointingAxis(turn=0, pause_seconds=pauses)}))
    started = time.perf_counter()
    outcome = voicelab.run_matrix(suite, voicelab.RunOptions(
        trials=trials,
        concurrency=min(32, len(pauses) * trials),
        artifacts_dir=folder,
        overrides=[f"endpoint.settings.vad_silence_ms={threshold_ms}"]))
    elapsed = time.perf_counter() - started
    (curve,) = outcome.report.endpointing or []
    print(f"\nvad_silence_ms={threshold_ms:g}: {len(pauses)} pauses x {trials} trial(s) "
          f"in {elapsed:.0f} s")
    print(f"{'pause ms':>9} {'cut-ins':>8} {'P(cut-in) [95% Wilson]':>26} {'latency p50 ms':>15}")
    for point in curve.points:
        latency = f"{point.latency_median_ms:.0f}" if point.latency_median_ms is not None \
            else "-"
        print(f"{point.pause_ms:9.0f} {point.cut_ins:>3}/{point.turns:<4} "
              f"{point.cut_in_probability:8.2f} [{point.cut_in_low:.2f}, {point.cut_in_high:.2f}]"
              f"{'':6} {latency:>15}")
    half = curve.half_cut_in_pause_ms
    error = f" ({half - threshold_ms:+.0f} ms from the threshold)" if half is not None else ""
    print(f"half-cut-in pause: {half} ({curve.half_cut_in}){error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--thresholds", type=float, nargs="+", default=[500.0, 1000.0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--step", type=float, default=0.1)
    args = parser.parse_args()
    count = int(round((2.0 - 0.2) / args.step)) + 1
    pauses = [round(0.2 + index * args.step, 3) for index in range(count)]
    with tempfile.TemporaryDirectory(prefix="bench-endpointing-") as folder:
        for threshold in args.thresholds:
            measure(threshold, pauses=pauses, trials=args.trials,
                    folder=Path(folder) / f"{threshold:g}")


if __name__ == "__main__":
    main()
