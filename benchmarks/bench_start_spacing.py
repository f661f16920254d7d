"""Trial start spacing: concurrent trials on one event loop open their conversations at least
``START_SPACING_SECONDS`` apart (the loop's busiest moment, spread out so arrival stamps of other
trials stay accurate). Printed, not asserted: a busy machine delays starts, never advances them.

    python benchmarks/bench_start_spacing.py [--trials 8] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import voicelab  # noqa: E402
from voicelab.execution._start_spacing import START_SPACING_SECONDS  # noqa: E402

EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def gaps_ms(trials: int) -> np.ndarray:
    loaded = voicelab.load_run(EXAMPLE)
    with tempfile.TemporaryDirectory() as folder:
        outcome = voicelab.run(loaded, voicelab.RunOptions(
            trials=trials,
            concurrency=trials,
            artifacts_dir=folder))
        starts = []
        for trial in sorted(outcome.bundle_path.glob("trial-*")):
            first = json.loads((trial / "voice-events.jsonl").read_text().splitlines()[0])
            starts.append(first["attributes"]["clock_start_ns"])
    return np.diff(sorted(starts)) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    target = START_SPACING_SECONDS * 1000
    smallest = []
    for _ in range(args.repeats):
        gaps = gaps_ms(args.trials)
        smallest.append(float(gaps.min()))
        print(f"gaps ms: min {gaps.min():.2f}  median {np.median(gaps):.2f}  max {gaps.max():.2f}")
    verdict = "ok" if min(smallest) >= target * 0.9 else "MISSES"
    print(f"smallest gap over {args.repeats} runs: {min(smallest):.2f} ms "
          f"(target >= {target:.1f} ms) {verdict}")


if __name__ == "__main__":
    main()
