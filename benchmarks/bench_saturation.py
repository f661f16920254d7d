"""Saturation honesty: what the evaluator's own loop lag does to its timings, and whether every
trial it made wrong says so (``measurement_quality.degraded``).

    python benchmarks/bench_saturation.py [--trials 50 100 200] [--stall-ms 200]
                                          [--tolerance-ms 40] [--ticker-seconds 3]

Ticker cost: the loop-lag ticker alone on an idle loop, with 1 and with 200 open windows (one
per concurrent trial): CPU time per tick and the share of one core it takes. Then
``--ab-rounds`` rounds of ``bench_runner.py``'s first-audio accuracy (50 concurrent paced
trials) with the ticker and with it replaced by a no-op, alternately, after one warm-up round
(the first run in a process pays cold caches and imports either way).

Saturation: the fake product runs in its own process, replies in real time, stalls every reply
for ``--stall-ms`` after 0.5 s of audio (known stalls) and reports when it sent every audio
frame (``report_frame_times``: the shared monotonic clock). For each concurrency, that many
paced trials run at once in this one process. The truth of each response is computed by the
same code as the measurement, from the same recording with every product chunk's arrival stamp
replaced by its send time: ``first_audio_latency_ms``, ``playback_stall_ms`` and
``dead_air_ms`` as a listener fed at the moments the product sent would have heard them. The
error is measured minus truth. A trial is *wrong* when any of its responses is off by more than
``--tolerance-ms`` on stall or dead air, or by more than ``--latency-tolerance-ms`` on first
audio; *silently wrong* when it is wrong and not flagged ``degraded``. Target: 0 silently wrong.
The same counts per response: a trial is judged per turn, so a wrong response must itself be
``timing_degraded`` (its timing verdicts rest on it). The lag-bin table (trials by their
loop-lag max, and the worst error in each bin) is what the default tolerances in
``MeasurementConfig`` were chosen from.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _send_time_truth import METRICS, _true_metrics  # noqa: E402

import voicelab  # noqa: E402
from voicelab.artifacts import LoopLag  # noqa: E402
from voicelab.config import MeasurementConfig  # noqa: E402
from voicelab.metrics import judge_measurement  # noqa: E402
from voicelab.runner._loop_lag import LoopLagMonitor  # noqa: E402

EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
LAG_BINS = (0.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0, float("inf"))


# --- ticker cost ------------------------------------------------------------------------------

async def ticker_cost(seconds: float, windows: int) -> tuple[float, int]:
    """CPU seconds per tick, ticks, with ``windows`` windows open on an otherwise idle loop."""
    monitor = LoopLagMonitor()
    opened = [monitor.open() for _ in range(windows)]
    cpu = time.process_time()
    await asyncio.sleep(seconds)
    used = time.process_time() - cpu
    ticks = [monitor.close(window).ticks for window in opened][0]
    return used / max(ticks, 1), ticks


class _NoWindow:
    def late_ticks(self, *, start_ns: int) -> list[list[int]]:
        return []


class _NoTicker:
    def open(self) -> _NoWindow:
        return _NoWindow()

    def close(self, window: object) -> LoopLag:
        return LoopLag(ticks=0, interval_ms=0.0)


async def ticker_ab(rounds: int, trials: int = 50) -> None:
    """First-audio latency error with and without the ticker (alternating, after a warm-up)."""
    import bench_runner  # noqa: PLC0415 - a sibling benchmark, only for this section

    import voicelab.runner._trial as trial_module  # noqa: PLC0415

    real = trial_module.loop_monitor
    with tempfile.TemporaryDirectory(dir=_scratch()) as tmp:
        await bench_runner.accuracy(trials, Path(tmp) / "warm-up")
        for round_ in range(rounds):
            for ticking in ((True, False) if round_ % 2 == 0 else (False, True)):
                trial_module.loop_monitor = real if ticking else _NoTicker  # type: ignore[assignment]
                try:
                    result = await bench_runner.accuracy(trials, Path(tmp) / f"r{round_}{ticking}")
                finally:
                    trial_module.loop_monitor = real
                errors = result["errors"]
                print(f"  {'with' if ticking else 'without':>7} the ticker: |first-audio error| "
                      f"p50 {np.percentile(errors, 50):.2f}, p99 {np.percentile(errors, 99):.2f},"
                      f" max {errors.max():.2f} ms")


def _scratch() -> Path | None:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else None


def _trial_rows(bundle: Path) -> list[dict]:
    rows = []
    for trial in sorted(bundle.glob("trial-*")):
        measured = json.loads((trial / "voice-metrics.json").read_text())
        truth = _true_metrics(trial)
        errors: dict[str, list[float]] = {m: [] for m in METRICS}
        responses = []
        for turn in measured["turns"]:
            own: dict[str, list[float]] = {m: [] for m in METRICS}
            for metric in METRICS:
                value, true = turn[metric], truth.get(turn["turn_id"], {}).get(metric)
                if value is not None and true is not None:
                    errors[metric].append(value - true)
                    own[metric].append(value - true)
            responses.append({"errors": own, "flagged": turn.get("timing_degraded"),
                              "bound": turn.get("stamp_error_bound_ms")})
        quality = measured["measurement_quality"]
        rows.append({"trial": trial.name, "errors": errors, "lag": quality["loop_lag_ms"],
                     "degraded": quality["degraded"], "responses": responses})
    return rows


async def saturation(trials: int, workdir: Path, *, stall_ms: float) -> tuple[list[dict], float]:
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab.doubles.product", "--settings", json.dumps({
            "audio_pacing": "realtime", "stall_ms": stall_ms, "stall_after_seconds": 0.5,
            "reply_latency_ms": 150.0, "report_frame_times": True,
            "complete_after_turns": 2})], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    uri = json.loads(process.stdout.readline())["uri"]
    try:
        loaded = voicelab.load_run(EXAMPLE, overrides=[
            "endpoint.adapter=websocket", f"endpoint.settings={{uri: '{uri}'}}",
            "pace_audio=true", "outcome_probe=null", "scenario.eval_spec.outcome_spec={}",
            "scenario.eval_spec.limits.max_time_seconds=120"])
        started = time.perf_counter()
        outcome = await voicelab.arun(loaded, voicelab.RunOptions(
            trials=trials,
            concurrency=trials,
            artifacts_dir=workdir))
        wall = time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(10)
    return _trial_rows(outcome.bundle_path), wall


def _worst(row: dict, metric: str) -> float:
    values = row["errors"][metric]
    return float(np.max(np.abs(values))) if values else 0.0


def _is_wrong(row: dict, *, tolerance_ms: float, latency_tolerance_ms: float) -> bool:
    return (_worst(row, "playback_stall_ms") > tolerance_ms
            or _worst(row, "dead_air_ms") > tolerance_ms
            or _worst(row, "first_audio_latency_ms") > latency_tolerance_ms)


def _percentiles(values: list[float]) -> str:
    if not values:
        return "no responses"
    absolute = np.abs(np.asarray(values))
    return (f"|p50| {np.percentile(absolute, 50):6.2f}  |p99| {np.percentile(absolute, 99):6.2f}"
            f"  max {absolute.max():6.2f}  (n={absolute.size})")


def report(rows: list[dict], *, trials: int, wall: float, tolerance_ms: float,
           latency_tolerance_ms: float) -> None:
    lags = [r["lag"] for r in rows if r["lag"] and r["lag"]["ticks"]]
    degraded = sum(r["degraded"] for r in rows)
    wrong = [r for r in rows if _is_wrong(r, tolerance_ms=tolerance_ms,
                                          latency_tolerance_ms=latency_tolerance_ms)]
    silent = [r for r in wrong if not r["degraded"]]
    print(f"\n{trials} concurrent paced trials in one process: {wall:.1f} s, "
          f"{trials / wall:.2f} trials/s")
    if lags:
        print(f"  loop lag per trial (ms): p99 median {np.median([x['p99'] for x in lags]):.1f}, "
              f"worst {max(x['p99'] for x in lags):.1f}; max median "
              f"{np.median([x['max'] for x in lags]):.1f}, worst {max(x['max'] for x in lags):.1f}"
              f"; ticks median {np.median([x['ticks'] for x in lags]):.0f}")
    for label, subset in (("all", rows), ("trusted", [r for r in rows if not r["degraded"]])):
        print(f"  {label} trials ({len(subset)}): measured - true, ms")
        for metric in METRICS:
            values = [v for r in subset for v in r["errors"][metric]]
            print(f"    {metric:<24} {_percentiles(values)}")
    print(f"  degraded {degraded}/{len(rows)}; wrong (stall/dead air > {tolerance_ms:g} ms or "
          f"first audio > {latency_tolerance_ms:g} ms) {len(wrong)}; silently wrong "
          f"{len(silent)} (target 0){'' if not silent else '  MISSES'}")
    # the same trials judged on their whole conversation's lag (the judgement of bundles
    # recorded before the late ticks were kept): the flags the per-turn judgement saves
    whole = [r for r in rows if r["lag"] and judge_measurement(
        LoopLag.model_validate(r["lag"]), MeasurementConfig()).degraded]
    print(f"  the same trials judged whole (p99/max of the conversation): degraded "
          f"{len(whole)}/{len(rows)}; silently wrong "
          f"{sum(1 for r in wrong if r not in whole)}")
    # per response (a trial judged per turn: a timing verdict rests on its own responses)
    responses = [r for row in rows for r in row.get("responses", [])
                 if r["flagged"] is not None]
    if responses:
        flagged = [r for r in responses if r["flagged"]]
        wrong_responses = [r for r in responses if _is_wrong(
            r, tolerance_ms=tolerance_ms, latency_tolerance_ms=latency_tolerance_ms)]
        missed = [r for r in wrong_responses if not r["flagged"]]
        print(f"  responses: timing_degraded {len(flagged)}/{len(responses)}; wrong "
              f"{len(wrong_responses)}; wrong and not flagged {len(missed)} (target 0)"
              f"{'' if not missed else '  MISSES'}")
        for metric in ("first_audio_latency_ms", "playback_stall_ms"):
            excess = [_worst(r, metric) - r["bound"] for r in responses]
            print(f"    {metric} error beyond the response's own stamp_error_bound_ms: max "
                  f"{max(excess):.1f} ms, p99 {np.percentile(excess, 99):.1f} ms")
        for response in missed[:5]:
            print(f"    bound {response['bound']} ms, worst stall "
                  f"{_worst(response, 'playback_stall_ms'):.1f}, dead air "
                  f"{_worst(response, 'dead_air_ms'):.1f}, first audio "
                  f"{_worst(response, 'first_audio_latency_ms'):.1f}")
    for row in silent[:5]:
        print(f"    {row['trial']}: lag {row['lag']}, worst stall "
              f"{_worst(row, 'playback_stall_ms'):.1f}, dead air {_worst(row, 'dead_air_ms'):.1f},"
              f" first audio {_worst(row, 'first_audio_latency_ms'):.1f}")


def beyond_lag(rows: list[dict]) -> None:
    """How far a trial's worst error went beyond its own loop-lag max: the slack a
    ``max_loop_lag_max_ms`` tolerance must leave below the accuracy it promises."""
    measured = [r for r in rows if r["lag"] and r["lag"]["max"] is not None]
    if not measured:
        return
    print("\nworst error beyond the trial's own loop-lag max (ms), every concurrency pooled:")
    for metric in ("first_audio_latency_ms", "playback_stall_ms"):
        excess = [_worst(r, metric) - r["lag"]["max"] for r in measured]
        print(f"  {metric:<24} max {max(excess):6.1f}  (p99 {np.percentile(excess, 99):.1f}, "
              f"over {len(excess)} trials)")


def lag_table(rows: list[dict], statistic: str) -> None:
    """Trials binned by one loop-lag statistic: the worst timing error seen in each bin."""
    other = "p99" if statistic == "max" else "max"
    print(f"\nworst |error| (ms) by the trial's loop-lag {statistic}, every concurrency pooled")
    print(f"  {f'lag {statistic} (ms)':>14} {'trials':>7} {'first audio':>12} {'stall':>8} "
          f"{'dead air':>9}  {f'lag {other} range':>14}")
    for low, high in zip(LAG_BINS, LAG_BINS[1:], strict=False):
        inside = [r for r in rows if r["lag"] and r["lag"][statistic] is not None
                  and low <= r["lag"][statistic] < high]
        if not inside:
            continue
        p99s = [r["lag"][other] for r in inside]
        print(f"  {f'{low:g}-{high:g}':>14} {len(inside):>7} "
              f"{max(_worst(r, 'first_audio_latency_ms') for r in inside):>12.1f} "
              f"{max(_worst(r, 'playback_stall_ms') for r in inside):>8.1f} "
              f"{max(_worst(r, 'dead_air_ms') for r in inside):>9.1f}  "
              f"{min(p99s):>6.1f}-{max(p99s):<6.1f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[50, 100, 200],
                        help="concurrent paced trials per measurement")
    parser.add_argument("--stall-ms", type=float, default=200.0)
    parser.add_argument("--tolerance-ms", type=float, default=40.0,
                        help="stall and dead-air error a trusted trial may have")
    parser.add_argument("--latency-tolerance-ms", type=float, default=20.0,
                        help="first-audio latency error a trusted trial may have")
    parser.add_argument("--ticker-seconds", type=float, default=3.0)
    parser.add_argument("--ab-rounds", type=int, default=2,
                        help="with/without-ticker accuracy rounds (0 skips them)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the bundles go while analysed (default: /dev/shm when "
                             "present: 200 trials write ~1 GB)")
    args = parser.parse_args()
    import logging

    logging.getLogger("voicelab").setLevel(logging.WARNING)
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    for windows in (1, 200):
        per_tick, ticks = await ticker_cost(args.ticker_seconds, windows)
        rate = ticks / args.ticker_seconds
        print(f"ticker, {windows:>3} window(s): {per_tick * 1e6:.1f} us CPU per tick, "
              f"{rate:.0f} ticks/s, {per_tick * rate:.2%} of one core")
    if args.ab_rounds:
        print("first-audio accuracy, 50 concurrent paced trials (bench_runner.py), with and "
              "without the ticker:")
        await ticker_ab(args.ab_rounds)
    pooled: list[dict] = []
    workdir = args.workdir or _scratch()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for trials in args.trials:
            rows, wall = await saturation(trials, Path(tmp) / f"c{trials}",
                                          stall_ms=args.stall_ms)
            shutil.rmtree(Path(tmp) / f"c{trials}")
            report(rows, trials=trials, wall=wall, tolerance_ms=args.tolerance_ms,
                   latency_tolerance_ms=args.latency_tolerance_ms)
            pooled += rows
    beyond_lag(pooled)
    lag_table(pooled, "max")
    lag_table(pooled, "p99")


if __name__ == "__main__":
    asyncio.run(main())
