"""Scale benchmarks: executors (in-process, local worker processes, Dask), trials/s, peak memory
per worker, and timing accuracy with many concurrent paced trials.

    python benchmarks/bench_scale.py [--paced-trials 200] [--throughput-trials 200]
                                     [--memory-trials 100 500] [--skip-dask]

Every case runs in a fresh Python process (so ``ru_maxrss``, the peak resident memory, is the
case's own) and writes its bundle under ``--workdir`` (default: /dev/shm, removed after each case).

Throughput and memory: the seed example (``adapter: fake``, the fake product inside each worker
process), ``pace_audio: false``; trials per second over the whole run (worker start-up
included), the parent's peak RSS and each worker's peak RSS (reported by the worker with each
trial: ``resource.getrusage`` in the worker process). Memory is measured at two sweep sizes: flat
means the peak per process does not grow with the number of trials.

Accuracy at scale: the fake product runs in its own process with real-time paced audio, known
reply latencies and a known 400 ms stall in the second response after 0.5 s of its audio;
``--paced-trials`` run at once with ``--workers 2``. Every error is against the fake product's own
send times (``report_frame_times``: each audio frame's send time on the shared monotonic clock):
first-audio latency, the measured ``first_audio_latency_ms`` minus the truth from the send time
of the first audio frame (as in bench_runner.py); playback stall and dead air, the measured
values minus those of a listener fed at the frames' send times (as in bench_saturation.py), so a
product that really served late under the machine's load is not counted against voicelab. A
response is wrong past 20 ms (first audio) or 40 ms (stall, dead air); "wrong and not flagged"
counts the trials not flagged ``degraded`` and the responses not flagged ``timing_degraded``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
PACED_FAKE = {"audio_pacing": "realtime", "reply_latency_ms": [120.0, 240.0, 360.0],
              "complete_after_turns": 1, "stall_ms": 400.0, "stall_after_seconds": 0.5,
              "stall_on_response": 2, "report_frame_times": True}


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that ended (the worker processes, once
    their executor is closed)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _peak_rss_kib() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


async def _one_case(case: dict[str, Any]) -> dict[str, Any]:
    """Runs inside the case's own process."""
    import logging

    import voicelab
    from voicelab.execution import DaskExecutor, LocalExecutor

    logging.getLogger("voicelab").setLevel(logging.WARNING)
    overrides = list(case.get("overrides", []))
    loaded = voicelab.load_run(EXAMPLE, overrides=overrides)
    executor: Any = None
    if case["executor"] == "local" and case["workers"] > 1:
        executor = LocalExecutor(case["workers"])
    elif case["executor"] == "dask":
        executor = DaskExecutor(workers=case["workers"], parallel=case["concurrency"])
    rss_before = _peak_rss_kib()
    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    if executor is not None:
        await executor.start()
    # a load profile (--ramp) is passed on only when asked for: older versions lack it
    profile = {"ramp_seconds": case["ramp_seconds"]} if case.get("ramp_seconds") else {}
    try:
        outcome = await voicelab.arun(loaded, trials=case["trials"],
                                      concurrency=case["concurrency"],
                                      artifacts_dir=case["workdir"], executor=executor,
                                      **profile)
    finally:
        if executor is not None:
            await executor.close()
    wall = time.perf_counter() - started
    result: dict[str, Any] = {
        "wall_seconds": wall, "trials_per_second": case["trials"] / wall,
        "cpu_seconds": _cpu_seconds() - cpu_before,
        "event_loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
        "passed": outcome.report.passed_trials, "executed": outcome.report.executed_trials,
        "parent_peak_rss_mib": _peak_rss_kib() / 1024, "parent_rss_before_mib": rss_before / 1024,
        "worker_peak_rss_mib": sorted(v / 1024 for v in (executor.peak_rss_kib.values()
                                                         if executor is not None else [])),
        "bundle": str(outcome.bundle_path)}
    if case.get("truth"):
        result.update(_truth(outcome.bundle_path))
    return result


def response_errors(trial: Path) -> list[dict[str, Any]]:
    """Per response of one trial of the paced case: its measured figures minus the truth (the
    fake's send times; ``None`` where a figure is missing), its flags and stated bounds."""
    from _send_time_truth import _true_metrics  # type: ignore[import-not-found]

    metrics = json.loads((trial / "voice-metrics.json").read_text())
    try:
        truth = _true_metrics(trial)
    except SystemExit as unmatched:  # chunks the fake's frame log cannot account for
        print(f"    {unmatched}: no truth for its responses", file=sys.stderr)
        truth = {}
    rows = []
    for turn in metrics["turns"]:
        true = truth.get(turn["turn_id"], {})
        row: dict[str, Any] = {
            "turn": turn["turn_id"], "truth": bool(true),
            "timing_degraded": bool(turn.get("timing_degraded")),
            "first_audio_degraded": bool(turn.get("first_audio_degraded")),
            "first_audio_bound": turn.get("first_audio_error_bound_ms"),
            "stamp_bound": turn.get("stamp_error_bound_ms")}
        for name, metric in (("first_audio", "first_audio_latency_ms"),
                             ("stall", "playback_stall_ms"), ("dead_air", "dead_air_ms")):
            measured, real = turn.get(metric), true.get(metric)
            row[name] = None if measured is None or real is None else measured - real
        rows.append(row)
    return rows


def run_case_here(case: dict[str, Any]) -> dict[str, Any]:
    """A case, in this process (its own), on the event loop the command line would choose
    (``VOICELAB_EVENT_LOOP``)."""
    from voicelab.execution import use_chosen_event_loop

    use_chosen_event_loop()
    return asyncio.run(_one_case(case))


def _truth(bundle: Path) -> dict[str, Any]:
    from _runner_accuracy import _trial_truth_errors  # type: ignore[import-not-found]

    latency: list[float] = []
    errors: dict[str, list[float]] = {"stall": [], "dead_air": []}
    trials: list[dict[str, Any]] = []  # per trial: flags, its worst errors, its loop lag
    for trial in sorted(bundle.glob("trial-*")):
        first_audio = _trial_truth_errors(trial)
        latency += first_audio
        metrics = json.loads((trial / "voice-metrics.json").read_text())
        responses = []  # (wrong, flagged) per response
        for row in response_errors(trial):
            worst = 0.0
            for name in ("stall", "dead_air"):
                if row[name] is not None:
                    errors[name].append(row[name])
                    worst = max(worst, abs(row[name]))
            late = abs(row["first_audio"]) if row["first_audio"] is not None else 0.0
            responses.append((worst > 40.0 or late > 20.0, row["timing_degraded"]))
        quality = metrics.get("measurement_quality") or {}
        lag = quality.get("loop_lag_ms") or {}
        trials.append({"name": trial.name, "degraded": bool(quality.get("degraded")),
                       "first_audio": max((abs(e) for e in first_audio), default=0.0),
                       "responses": responses,
                       "loop_lag": (lag.get("p99") or 0.0, lag.get("max") or 0.0)})
    return {"latency_errors": latency, **errors, "trials": trials}


def _silently_wrong(measured: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """(trials flagged degraded, trials wrong, trials wrong and not flagged, responses wrong,
    responses wrong and not flagged ``timing_degraded``)."""
    flagged = wrong = silent = responses_wrong = responses_silent = 0
    for trial in measured["trials"]:
        is_wrong = trial["first_audio"] > 20.0 or any(w for w, _ in trial["responses"])
        flagged += trial["degraded"]
        wrong += is_wrong
        silent += is_wrong and not trial["degraded"]
        responses_wrong += sum(w for w, _ in trial["responses"])
        responses_silent += sum(w and not f for w, f in trial["responses"])
        if is_wrong and not trial["degraded"]:
            print(f"    {trial['name']} wrong and not flagged: first audio off by "
                  f"{trial['first_audio']:.1f} ms, its loop lag p99/max "
                  f"{'/'.join(f'{v:.1f}' for v in trial['loop_lag'])} ms")
    return flagged, wrong, silent, responses_wrong, responses_silent


def _run_case(case: dict[str, Any], *, script: str = __file__,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs ``case`` in a fresh process (``script --case``), its bundle in a temporary folder."""
    workdir = Path(tempfile.mkdtemp(prefix="voicelab-scale-", dir=case.pop("root")))
    case["workdir"] = str(workdir)
    try:
        completed = subprocess.run([sys.executable, script, "--case", json.dumps(case)],
                                   capture_output=True, text=True, cwd=ROOT, timeout=3600,
                                   env=env)
        if completed.returncode != 0:
            raise RuntimeError(completed.stderr[-3000:])
        return json.loads(completed.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _start_fake(settings: dict[str, Any]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "voicelab.doubles.product", "--settings",
                                json.dumps(settings)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None
    return process, json.loads(process.stdout.readline())["uri"]


def _paced_overrides(uri: str) -> list[str]:
    return ["endpoint.adapter=websocket", f"endpoint.settings={{uri: '{uri}'}}",
            "pace_audio=true", "outcome_probe=null", "scenario.eval_spec.outcome_spec={}",
            "scenario.eval_spec.response_timeout_seconds=120"]


def _describe(values: np.ndarray) -> str:
    if not values.size:
        return "no samples"
    absolute = np.abs(values)
    return (f"|p50| {np.percentile(absolute, 50):.2f}, |p99| {np.percentile(absolute, 99):.2f}, "
            f"max {absolute.max():.2f} ms over {values.size}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--paced-trials", type=int, nargs="+", default=[200],
                        help="concurrent paced trials (several sizes: one row each)")
    parser.add_argument("--paced-executors", nargs="+", default=["local:2", "dask:2"],
                        help="EXECUTOR:WORKERS of the accuracy section (local:1 = in-process)")
    parser.add_argument("--throughput-trials", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8,
                        help="throughput and memory cases: trials at once")
    parser.add_argument("--memory-trials", type=int, nargs=2, default=[100, 500])
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--skip-paced", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--workdir", default="/dev/shm" if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case_here(json.loads(args.case)), default=str))
        return
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    base = {"root": args.workdir, "concurrency": args.concurrency}

    if args.skip_throughput:
        executors_run: list[tuple[str, int]] = []
    else:
        executors_run = [("local", 1), ("local", 2)] + ([] if args.skip_dask else [("dask", 2)])
    if executors_run:
        print(f"\nthroughput: seed example, pace_audio false, {args.throughput_trials} trials, "
              f"concurrency {args.concurrency} (worker start-up included)")
        print(f"{'executor':<22} {'trials/s':>9} {'passed':>8} {'parent MiB':>11} "
              f"{'peak MiB per worker':>22}")
    for executor, workers in executors_run:
        result = _run_case({**base, "executor": executor, "workers": workers,
                            "trials": args.throughput_trials})
        name = f"{executor}, {workers} worker(s)" if workers > 1 else "in-process"
        print(f"{name:<22} {result['trials_per_second']:>9.1f} "
              f"{result['passed']:>4}/{args.throughput_trials:<3} "
              f"{result['parent_peak_rss_mib']:>11.0f} "
              f"{', '.join(f'{v:.0f}' for v in result['worker_peak_rss_mib']) or '-':>22}")

    small, large = args.memory_trials
    if not args.skip_memory:
        print(f"\nmemory: peak RSS at {small} and {large} trials (pace_audio false, "
              f"concurrency {args.concurrency})")
    for executor, workers in ([] if args.skip_memory else [("local", 1), ("local", 2)]):
        rows = [_run_case({**base, "executor": executor, "workers": workers, "trials": n})
                for n in (small, large)]
        name = "in-process" if workers == 1 else f"local, {workers} workers"
        per_worker = ["/".join(f"{v:.0f}" for v in r["worker_peak_rss_mib"]) or "-"
                      for r in rows]
        print(f"{name:<22} parent {rows[0]['parent_peak_rss_mib']:.0f} -> "
              f"{rows[1]['parent_peak_rss_mib']:.0f} MiB; workers {per_worker[0]} -> "
              f"{per_worker[1]} MiB ({rows[0]['trials_per_second']:.1f} and "
              f"{rows[1]['trials_per_second']:.1f} trials/s)")

    if args.skip_paced:
        return
    process, uri = _start_fake(PACED_FAKE)
    try:
        overrides = _paced_overrides(uri)
        cases = [(choice.split(":")[0], int(choice.split(":")[1]), size)
                 for size in args.paced_trials for choice in args.paced_executors
                 if not (args.skip_dask and choice.startswith("dask"))]
        for executor, workers, size in cases:
            result = _run_case({**base, "executor": executor, "workers": workers,
                                "trials": size, "concurrency": size,
                                "overrides": overrides, "truth": True})
            where = "in-process" if executor == "local" and workers == 1 else \
                f"{executor} with {workers} workers"
            print(f"\naccuracy: {size} concurrent paced trials, {where}, fake product in its "
                  f"own process: {result['passed']}/{size} passed in "
                  f"{result['wall_seconds']:.1f} s")
            latency = np.asarray(result["latency_errors"], dtype=float)
            print(f"  first_audio_latency_ms - truth (fake's send time): {_describe(latency)}"
                  f"  (target |p99| <= 3)")
            for name in ("stall", "dead_air"):
                errors = np.asarray(result[name], dtype=float)
                print(f"  {name}_ms - truth (a listener fed at the send times): "
                      f"{_describe(errors)}  (target |p99| <= 40)")
            lag = np.asarray([t["loop_lag"] for t in result["trials"]], dtype=float).reshape(-1, 2)
            print(f"  trial loop lag (ms), over trials: p99 median {np.median(lag[:, 0]):.1f}, "
                  f"worst {lag[:, 0].max():.1f}; max median {np.median(lag[:, 1]):.1f}, "
                  f"worst {lag[:, 1].max():.1f}")
            flagged, wrong, silent, responses_wrong, responses_silent = _silently_wrong(result)
            print(f"  trials flagged degraded {flagged}/{size}, wrong (first audio > 20 ms, "
                  f"stall or dead air > 40 ms) {wrong}, wrong and not flagged {silent}; "
                  f"responses wrong {responses_wrong}, wrong and not flagged "
                  f"{responses_silent}  (target 0)")
            print(f"  peak RSS per worker: "
                  f"{', '.join(f'{v:.0f}' for v in result['worker_peak_rss_mib']) or '-'} MiB,"
                  f" parent {result['parent_peak_rss_mib']:.0f} MiB", flush=True)
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    main()
