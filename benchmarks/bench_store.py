"""Remote artifact stores: what writing the bundle to a store costs, and how little stays local.

    python benchmarks/bench_store.py [--trials 40] [--concurrency 8] [--repeats 3]
                                     [--paced-trials 30] [--paced-rounds 2]

The seed example with pacing off (every trial as fast as the fake product answers) runs into a
local folder, into ``memory://`` and into ``s3://`` on moto's S3 server (started as its own
process on 127.0.0.1, reached through s3fs like a real endpoint), alternately, ``--repeats``
times each; the median trials per second of each is printed with the run's wall time. For the
store runs a sampler thread counts, every 20 ms, the trial folders present in the staging
folder (the local disk a store run uses) and the bytes under it; the maximum is printed next to
the number of trials.

Timing accuracy while publishing: ``--paced-trials`` concurrent paced trials against the fake
product in its own process (as ``bench_runner.py``'s accuracy section: the product reports
when it sent each response's first audio frame, on the shared monotonic clock), once into a
local folder and once into ``s3://``; the first-audio latency error (measured minus truth) of
both, read back from where the bundle ended up. Publishing runs beside the conversations (a
worker thread, s3fs's I/O thread), so this shows whether it disturbs their arrival stamps.
Nothing is asserted: timings depend on the machine and what else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from _runner_accuracy import _start_fake_server, _truth_errors  # noqa: E402

import voicelab  # noqa: E402
from voicelab.artifacts import local_folder  # noqa: E402

EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
BUCKET = "voicelab-bench"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, endpoint
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("moto's server did not start")


class StagingSampler:
    """The most trial folders and bytes seen at once under the staging root."""

    def __init__(self, root: Path):
        self.root = root
        self.max_trials = 0
        self.max_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            trials = 0
            size = 0
            for folder, dirs, files in os.walk(self.root):
                trials += sum(1 for d in dirs if d.startswith("trial-"))
                for name in files:
                    try:
                        size += os.path.getsize(os.path.join(folder, name))
                    except OSError:
                        pass
            self.max_trials = max(self.max_trials, trials)
            self.max_bytes = max(self.max_bytes, size)

    def __enter__(self) -> StagingSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _one(loaded: voicelab.LoadedRun, target: str, *, trials: int, concurrency: int,
         staging_root: Path) -> tuple[float, StagingSampler]:
    with StagingSampler(staging_root) as sampler:
        started = time.perf_counter()
        outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=trials,
            concurrency=concurrency,
            artifacts_dir=target)))
        elapsed = time.perf_counter() - started
    if outcome.exit_code != 0:
        raise SystemExit(f"{target}: exit {outcome.exit_code}: {outcome.write_errors}")
    return elapsed, sampler


async def _paced_errors(target: str, trials: int) -> np.ndarray:
    process, uri = _start_fake_server({"audio_pacing": "realtime",
                                       "reply_latency_ms": [120.0, 240.0, 360.0],
                                       "complete_after_turns": 1})
    try:
        loaded = voicelab.load_run(EXAMPLE, overrides=[
            "endpoint.adapter=websocket", f"endpoint.settings={{uri: '{uri}'}}",
            "pace_audio=true", "outcome_probe=null", "scenario.eval_spec.outcome_spec={}"])
        outcome = await voicelab.arun(loaded, voicelab.RunOptions(
            trials=trials,
            concurrency=trials,
            artifacts_dir=target))
    finally:
        process.terminate()
        process.wait(10)
    with local_folder(outcome.location) as bundle:
        return np.abs(np.asarray(_truth_errors(bundle)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paced-trials", type=int, default=30)
    parser.add_argument("--paced-rounds", type=int, default=2,
                        help="paced runs per destination, alternating (0: no throughput runs "
                             "with --repeats 0)")
    args = parser.parse_args()

    moto, endpoint = _start_moto()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_DEFAULT_REGION="us-east-1")
    import fsspec

    fsspec.config.conf["s3"] = {"endpoint_url": endpoint}
    fsspec.filesystem("s3").mkdir(BUCKET)
    local_root = Path(tempfile.mkdtemp(prefix="voicelab-bench-local-"))
    staging_root = Path(tempfile.mkdtemp(prefix="voicelab-bench-store-"))
    tempfile.tempdir = str(staging_root)  # the store runs stage under it: the sampler watches
    loaded = voicelab.load_run(EXAMPLE, overrides=["pace_audio=false"])
    targets = {"local folder": str(local_root), "memory://": "memory://bench",
               "s3:// (moto, 127.0.0.1)": f"s3://{BUCKET}/runs"}
    seconds: dict[str, list[float]] = {name: [] for name in targets}
    staged: dict[str, tuple[int, int]] = {name: (0, 0) for name in targets}
    try:
        _one(loaded, str(local_root), trials=4, concurrency=2, staging_root=staging_root)  # warm
        for _ in range(args.repeats if args.repeats > 0 else 0):
            for name, target in targets.items():
                elapsed, sampler = _one(loaded, target, trials=args.trials,
                                        concurrency=args.concurrency, staging_root=staging_root)
                seconds[name].append(elapsed)
                if name != "local folder":
                    staged[name] = (max(staged[name][0], sampler.max_trials),
                                    max(staged[name][1], sampler.max_bytes))
        if args.repeats > 0:
            print(f"{args.trials} trials, concurrency {args.concurrency}, pace_audio false, "
                  f"{args.repeats} runs each (alternating); median:")
        for name in targets if args.repeats > 0 else ():
            median = statistics.median(seconds[name])
            line = (f"  {name:<26} {median:6.2f} s  {args.trials / median:6.1f} trials/s  "
                    f"(runs: {', '.join(f'{s:.2f}' for s in seconds[name])})")
            if name != "local folder":
                most, size = staged[name]
                line += (f"; staging held at most {most} trial folder(s), "
                         f"{size / 1e6:.1f} MB")
            print(line)
        if args.repeats > 0:
            bucket = fsspec.filesystem("s3")
            bucket.invalidate_cache()
            objects = bucket.find(f"{BUCKET}/runs")
            print(f"  s3 bucket: {len(objects)} objects, "
                  f"{sum(bucket.du(f'{BUCKET}/runs', total=False).values()) / 1e6:.1f} MB")
        if args.paced_trials and args.paced_rounds:
            print(f"first-audio latency error, {args.paced_trials} concurrent paced trials, "
                  f"{args.paced_rounds} run(s) each, alternating (|measured - product's send "
                  "time|):")
            destinations = {"local folder": str(local_root / "paced"),
                            "s3:// (moto, 127.0.0.1)": f"s3://{BUCKET}/paced"}
            errors: dict[str, list[np.ndarray]] = {name: [] for name in destinations}
            for _ in range(args.paced_rounds):
                for name, target in destinations.items():
                    errors[name].append(asyncio.run(_paced_errors(target, args.paced_trials)))
            for name, parts in errors.items():
                pooled = np.concatenate(parts)
                print(f"  {name:<26} n {pooled.size}  p50 {np.percentile(pooled, 50):.2f} ms  "
                      f"p99 {np.percentile(pooled, 99):.2f} ms  max {pooled.max():.2f} ms")
    finally:
        moto.terminate()
        moto.wait(timeout=10)
        shutil.rmtree(staging_root, ignore_errors=True)
        shutil.rmtree(local_root, ignore_errors=True)


if __name__ == "__main__":
    main()
