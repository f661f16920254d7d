"""Verdict trust on a busy machine: a healthy product passes, a broken one fails, and every
figure a verdict uses agrees with the product's own truth.

    python benchmarks/bench_verdicts.py [--trials 50] [--rounds 3] [--starter-runs 5]
                                        [--burners 2] [--workdir DIR] [--skip-accuracy]

1. **Accuracy at ``--trials`` concurrent paced trials** (``--rounds`` rounds): the fake product
   runs in its own process with real-time audio and known reply latencies and reports, on the
   shared monotonic clock, when it sent each response's first audio frame. The error of
   ``first_audio_latency_ms`` against that truth is split into the responses voicelab flagged
   ``first_audio_degraded`` (their stated ``first_audio_error_bound_ms`` must cover the error)
   and the unflagged ones (|p50|, |p99|, max, and how many exceed 3 ms, the default
   ``measurement.max_first_audio_error_ms``). The trials carry a
   ``first_audio_latency`` verdict of 2000 ms and the default retry of inconclusive trials: the
   table counts how many passed, were retried, ended inconclusive or failed (a healthy product:
   all pass).
2. **The ``voice-evaluator init`` starter suite** run ``--starter-runs`` times through the CLI,
   ``--burners`` CPU-bound processes running beside it: its exit codes and trial statuses.
3. **A broken product under the same load**: the starter suite against a fake product that
   answers after 2.5 s (limit 2 s): every trial must fail ``first_audio_latency``, none be
   inconclusive.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _runner_accuracy import EXAMPLE, _start_fake_server  # noqa: E402
from bench_runner import logging_quiet  # noqa: E402

import voicelab  # noqa: E402

LIMIT_MS = 2000


@contextmanager
def burners(count: int):
    """``count`` CPU-bound processes beside the measurement."""
    processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                 for _ in range(count)]
    try:
        yield
    finally:
        for process in processes:
            process.kill()
            process.wait()


def _turn_errors(trial: Path) -> list[tuple[float, bool, float]]:
    """(measured minus true first-audio latency ms, flagged, stated bound ms) per response."""
    events = [json.loads(x) for x in (trial / "voice-events.jsonl").read_text().splitlines()]
    start_ns = events[0]["attributes"]["clock_start_ns"]
    references = {e["attributes"]["expects_response"]: e["monotonic_offset_ns"]
                  for e in events if e["attributes"].get("expects_response")}
    turn_of = {e["sequence"]: e["turn_id"] for e in events}
    sent = {}
    for event in json.loads((trial / "raw-endpoint-events.json").read_text())["events"]:
        if event["type"] == "turn_complete":
            timing = (event["raw"] or {}).get("server_timing") or {}
            if timing.get("first_audio_ns"):
                sent[turn_of[event["sequence"]]] = timing["first_audio_ns"]
    rows = []
    for turn in json.loads((trial / "voice-metrics.json").read_text())["turns"]:
        turn_id = turn["turn_id"]
        if turn["first_audio_latency_ms"] is None or turn_id not in sent \
                or turn_id not in references:
            continue
        truth = (sent[turn_id] - (start_ns + references[turn_id])) / 1e6
        rows.append((turn["first_audio_latency_ms"] - truth,
                     bool(turn["first_audio_degraded"]),
                     float(turn["first_audio_error_bound_ms"] or 0.0)))
    return rows


async def accuracy_round(trials: int, workdir: Path) -> dict:
    process, uri = _start_fake_server({"audio_pacing": "realtime",
                                       "reply_latency_ms": [120.0, 180.0, 240.0, 300.0, 360.0,
                                                            420.0],
                                       "complete_after_turns": 1})
    try:
        loaded = voicelab.load_run(EXAMPLE, overrides=[
            "endpoint.adapter=websocket", f"endpoint.settings={{uri: '{uri}'}}",
            "pace_audio=true", "outcome_probe=null", "scenario.eval_spec.outcome_spec={}",
            f"scenario.eval_spec.max_first_audio_latency_ms={LIMIT_MS}"])
        outcome = await voicelab.arun(loaded, voicelab.RunOptions(
            trials=trials,
            concurrency=trials,
            artifacts_dir=workdir))
    finally:
        process.terminate()
        process.wait(10)
    rows = [row for trial in sorted(outcome.bundle_path.glob("trial-*"))
            for row in _turn_errors(trial)]
    statuses = [t.status for t in outcome.report.trials]
    return {"rows": rows, "statuses": statuses, "retried": outcome.report.retried_trials}


def accuracy(trials: int, rounds: int, workdir: Path) -> None:
    rows: list[tuple[float, bool, float]] = []
    statuses: list[str] = []
    retried = 0
    for number in range(rounds):
        result = asyncio.run(accuracy_round(trials, workdir / f"accuracy-{number}"))
        rows += result["rows"]
        statuses += result["statuses"]
        retried += result["retried"]
    unflagged = np.abs([e for e, flagged, _ in rows if not flagged])
    flagged = [(abs(e), bound) for e, flagged_, bound in rows if flagged_]
    print(f"\n## first-audio latency at {trials} concurrent paced trials, {rounds} rounds "
          f"({len(rows)} responses)\n")
    print("| responses | n | abs error p50 | p99 | max | over 3 ms |")
    print("|---|---|---|---|---|---|")
    if unflagged.size:
        print(f"| unflagged | {unflagged.size} | {np.percentile(unflagged, 50):.3f} | "
              f"{np.percentile(unflagged, 99):.3f} | {unflagged.max():.3f} | "
              f"{int((unflagged > 3).sum())} |")
    if flagged:
        errors = np.asarray([e for e, _ in flagged])
        covered = sum(e <= bound + 1.0 for e, bound in flagged)  # within its stated bound
        print(f"| first_audio_degraded | {len(flagged)} | {np.percentile(errors, 50):.3f} | "
              f"{np.percentile(errors, 99):.3f} | {errors.max():.3f} | "
              f"{int((errors > 3).sum())} (bound covers {covered}/{len(flagged)}) |")
    counts = {s: statuses.count(s) for s in ("passed", "inconclusive", "failed")}
    print(f"\ntrials (limit {LIMIT_MS} ms, healthy product): {counts}, {retried} retried")


def starter(runs: int, workdir: Path, *, broken: bool) -> None:
    suite = workdir / ("broken" if broken else "starter")
    subprocess.run([sys.executable, "-m", "voicelab", "init", str(suite)], check=True,
                   capture_output=True)
    sets = ["--set", "endpoint.settings.reply_latency_ms=2500"] if broken else []
    codes, statuses, reasons = [], [], []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-m", "voicelab", "run", str(suite / "run.yaml"),
                               "--quiet", *sets], capture_output=True, text=True, cwd=suite)
        codes.append(done.returncode)
        report = json.loads((suite / "artifacts" / "latest" / "run-report.json").read_text())
        for trial in report["trials"]:
            statuses.append(trial["status"])
            reasons += trial["failed_verdicts"] + trial.get("inconclusive_verdicts", [])
    what = "broken (reply after 2.5 s, limit 2 s)" if broken else "healthy"
    print(f"\n## init starter suite, {what}: {runs} runs x 3 trials\n")
    print(f"exit codes: {codes}")
    print(f"trial statuses: { {s: statuses.count(s) for s in sorted(set(statuses))} }")
    print(f"verdicts not passed: { {r: reasons.count(r) for r in sorted(set(reasons))} }")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--starter-runs", type=int, default=5)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--skip-accuracy", action="store_true")
    args = parser.parse_args()
    logging_quiet()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="voicelab-bench-verdicts-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(workdir)
    started = time.perf_counter()
    if not args.skip_accuracy:
        accuracy(args.trials, args.rounds, workdir)
    with burners(args.burners):
        print(f"\n(with {args.burners} CPU-bound process(es) beside it)")
        starter(args.starter_runs, workdir, broken=False)
        starter(args.starter_runs, workdir, broken=True)
    print(f"\n{time.perf_counter() - started:.0f} s in all; bundles in {workdir}")


if __name__ == "__main__":
    main()
