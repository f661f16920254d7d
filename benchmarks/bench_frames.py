"""Frames benchmark: load_frames over 1,000 trial bundles next to the time to merely parse the
same JSON files (the floor). Target: load_frames within 2x the floor.

    python benchmarks/bench_frames.py                       # 1,000 trials, copied bundles
    python benchmarks/bench_frames.py --mode run            # 1,000 real trials (~2 min here)
    python benchmarks/bench_frames.py --bundles /tmp/b1000  # keep/reuse the generated bundles

``--mode copy`` (default) runs a few real trials against the embedded fake product (clean,
stalled, clipped) and copies their JSON files into ``--trials`` trial folders, 100 per run, with
distinct run and trial ids (WAVs are left out: load_frames does not read them). ``--mode run``
runs every trial for real (concurrency 8, ``pace_audio: false``). Each timing is the best of
``--repeat`` rounds; the floor decodes every file load_frames reads (run-report.json,
trial-report.json, voice-metrics.json, voice-events.jsonl) and discards the result, both the
fast way (a JSONL file joined into one array, one ``json.loads``) and line by line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
FAULTS = ([], ["endpoint.settings.stall_ms=900", "endpoint.settings.stall_on_response=2"],
          ["endpoint.settings.clip=true"])
PER_RUN = 100
JSON_FILES = ("trial-report.json", "voice-metrics.json")


def run_trials(root: Path, *, trials: int, overrides: list[str], concurrency: int) -> Path:
    import voicelab

    loaded = voicelab.load_run(EXAMPLE, overrides=overrides)
    outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=trials,
        concurrency=concurrency,
        artifacts_dir=root)))
    return outcome.bundle_path


def copy_bundles(root: Path, *, trials: int) -> None:
    """A few real trials, copied into ``trials`` folders with distinct ids (no WAVs)."""
    seeds = Path(tempfile.mkdtemp(prefix="voicelab-bench-seed-"))
    try:
        sources = [trial for overrides in FAULTS
                   for trial in sorted(run_trials(seeds, trials=3, overrides=overrides,
                                                  concurrency=3).glob("trial-*"))]
        template = json.loads((sources[0].parent / "run-report.json").read_text())
        for run_number in range((trials + PER_RUN - 1) // PER_RUN):
            run_id = f"bench-run-{run_number:03d}"
            run_dir = root / run_id
            count = min(PER_RUN, trials - run_number * PER_RUN)
            for index in range(1, count + 1):
                source = sources[(run_number * PER_RUN + index) % len(sources)]
                target = run_dir / f"trial-{index:03d}"
                target.mkdir(parents=True)
                report = json.loads((source / "trial-report.json").read_text())
                report.update(trial=index, trial_id=target.name)
                (target / "trial-report.json").write_text(json.dumps(report, indent=2))
                for name in ("voice-metrics.json", "voice-events.jsonl", "transcript.json"):
                    shutil.copyfile(source / name, target / name)
            (run_dir / "run-report.json").write_text(json.dumps(
                {**template, "run_id": run_id, "bundle_path": str(run_dir), "trials": [],
                 "trial_count": count, "planned_trials": count, "executed_trials": count},
                indent=2))
    finally:
        shutil.rmtree(seeds, ignore_errors=True)


def count_trials(root: Path) -> int:
    return sum(1 for _ in root.glob("**/trial-report.json")) if root.is_dir() else 0


def parse_floor(root: Path, *, line_by_line: bool) -> float:
    started = time.perf_counter()
    for run_report in root.glob("**/run-report.json"):
        json.loads(run_report.read_bytes())
        for trial in run_report.parent.glob("trial-*"):
            for name in JSON_FILES:
                json.loads((trial / name).read_bytes())
            events = (trial / "voice-events.jsonl").read_bytes()
            if line_by_line:
                for line in events.splitlines():
                    json.loads(line)
            else:
                json.loads(b"[" + events.strip().replace(b"\n", b",") + b"]")
    return time.perf_counter() - started


def timed_load(root: Path, *, events: bool) -> tuple[float, object]:
    from voicelab.analysis import load_frames

    started = time.perf_counter()
    frames = load_frames(root, events=events)
    return time.perf_counter() - started, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--mode", choices=("copy", "run"), default="copy")
    parser.add_argument("--bundles", type=Path, default=None,
                        help="generate into (or reuse) this directory instead of a temporary one")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    root = args.bundles or Path(tempfile.mkdtemp(prefix="voicelab-bench-frames-"))
    try:
        if count_trials(root) < args.trials:
            started = time.perf_counter()
            if args.mode == "run":
                run_trials(root, trials=args.trials, overrides=[], concurrency=8)
            else:
                copy_bundles(root, trials=args.trials)
            print(f"generated {count_trials(root)} trial bundles ({args.mode}) in "
                  f"{time.perf_counter() - started:.1f} s under {root}")
        else:
            print(f"reusing {count_trials(root)} trial bundles under {root}")
        parse_floor(root, line_by_line=False)  # warm the page cache
        fast, lines, loads, light = [], [], [], []
        frames = None
        for _ in range(args.repeat):
            fast.append(parse_floor(root, line_by_line=False))
            seconds, frames = timed_load(root, events=True)
            loads.append(seconds)
            lines.append(parse_floor(root, line_by_line=True))
            light.append(timed_load(root, events=False)[0])
        floor, load = min(fast), min(loads)
        print(f"\nframes: {frames}")
        print(f"{'parse floor (one json.loads per file)':45s} {floor:7.3f} s")
        print(f"{'parse floor (JSONL line by line)':45s} {min(lines):7.3f} s")
        print(f"{'load_frames':45s} {load:7.3f} s   {load / floor:.2f}x the floor")
        print(f"{'load_frames(events=False)':45s} {min(light):7.3f} s")
        verdict = "PASS" if load <= 2 * floor else "FAIL"
        print(f"target load_frames <= 2x floor: {verdict} (best of {args.repeat})")
    finally:
        if args.bundles is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
