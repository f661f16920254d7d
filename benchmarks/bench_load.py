"""Load benchmark: are voicelab's timing figures honest with many concurrent calls?

    python benchmarks/bench_load.py [--sizes 50 100 200] [--workers 1] [--event-loop auto]
                                    [--busy 2] [--ramp SECONDS] [--repeat 1] [--listening N]
                                    [--keep DIR] [--untuned]
    python benchmarks/bench_load.py --judge DIR/*   # kept bundles, as judged now

For each N of ``--sizes``: N paced trials at once (the seed example's script, three responses
each, audio in real time) against the fake product in its own process, which logs its own send
time of every audio frame on the shared monotonic clock (``report_frame_times``, as in
bench_scale.py's accuracy case, whose code this shares). Each case runs in a fresh process on the
event loop the command line would choose (``--event-loop``: ``VOICELAB_EVENT_LOOP``), in a
process tuned as the command line's (``voicelab.execution.tuned_process``: a short GIL switch
interval, older objects frozen out of garbage collection, full collections put off while trials
run; ``--untuned``: as a library call in a notebook runs them), in-process
(``--workers 1``, the library's default) or in ``--workers`` worker processes.

Per N it prints:

* flagged: the share of responses with a timing figure flagged (``timing_degraded`` or
  ``first_audio_degraded``);
* unflagged error: |first_audio_latency_ms - truth| over the responses whose first-audio figure
  is not flagged, p50 / p99 / max (truth: the latency to the fake's send of its first frame,
  which it brackets by its clock before the send began and after it returned: a figure within
  that window has no error, one outside it errs by its distance to the window);
* silently wrong: figures not flagged yet outside the accuracy an unflagged figure promises:
  first audio stamped later than the truth by more than
  ``measurement.max_first_audio_error_ms`` (3 ms; earlier than the truth is the fake's own
  send stamp being late, counted in the error columns but not here), playback stall
  or dead air (measured minus a listener fed at the send times) off by more than the documented
  40 ms. The target is 0 at every load: a figure voicelab cannot vouch for must say so;
* CPU per trial: user + system seconds of voicelab's processes (the case's process and its
  workers; the product's are not counted) over the trials;
* concurrency: the most trials in conversation at once (from each trial's recorded start and
  end on the shared clock), and the wall time of the case.

``--listening N`` also runs N concurrent trials of the listening line (``server_vad``, a barge-in
in the first response: bench_runner.py's listening case) and prints the response-latency and
barge-in stop-latency errors against the fake's send times, and the responses flagged.

``--busy K`` starts K processes that spin on a core beside the benchmark (a shared CI machine)
and stops them after. ``--ramp SECONDS`` starts the trials evenly over that period instead of
all at once (passed on as ``voicelab.arun(..., ramp_seconds=...)``, when that voicelab has it).
``--keep DIR`` keeps each case's bundle (the listening line's as ``listening-*``); ``--judge`` prints the flagged and silently wrong
figures of such bundles as their files say now, so one set of recordings can be rescored
(``voice-evaluator rescore``) by two versions of voicelab and their judgements compared.
Results: docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import (  # noqa: E402
    PACED_FAKE,
    _paced_overrides,
    _run_case,
    _start_fake,
    response_errors,
    run_case_here,
)

#: an unflagged first-audio figure promises this accuracy (``measurement`` default, ms)
FIRST_AUDIO_TOLERANCE_MS = 3.0
#: ... and an unflagged stall or dead-air figure this (the documented accuracy, ms)
STALL_TOLERANCE_MS = 40.0


def _trial_span(trial: Path) -> tuple[int, int]:
    """When the trial's conversation began and ended, on the shared monotonic clock (ns)."""
    lines = (trial / "voice-events.jsonl").read_text().splitlines()
    first, last = json.loads(lines[0]), json.loads(lines[-1])
    start = int(first["attributes"]["clock_start_ns"])
    return start, start + int(last["monotonic_offset_ns"])


def _first_frame_windows(trial: Path) -> dict[str, float]:
    """Per response, how long the fake's send of its first frame took (ms): the fake notes the
    clock before the send began and after it returned, and the frame left in between."""
    events = [json.loads(line) for line in (trial / "voice-events.jsonl").read_text()
              .splitlines()]
    turn_of = {event["sequence"]: event["turn_id"] for event in events}
    raw = json.loads((trial / "raw-endpoint-events.json").read_text())["events"]
    windows: dict[str, float] = {}
    for event in raw:
        timing = (event.get("raw") or {}).get("server_timing") or {} \
            if event["type"] == "turn_complete" else {}
        before, after = timing.get("frame_before_ns"), timing.get("frame_sent_ns")
        if before and after:
            windows[turn_of[event["sequence"]]] = (after[0] - before[0]) / 1e6
    return windows


#: a figure's own bound beyond this (``measurement.max_loop_lag_max_ms``, ms) flags it
FIGURE_TOLERANCE_MS = 25.0


def _trial_rows(trial: Path) -> list[dict[str, Any]]:
    rows = response_errors(trial)
    windows = _first_frame_windows(trial)
    turns = {turn["turn_id"]: turn for turn in json.loads(
        (trial / "voice-metrics.json").read_text())["turns"]}
    for row in rows:
        row["first_audio_window"] = windows.get(row["turn"], 0.0)
        bounds = turns.get(row["turn"], {}).get("figure_error_bounds_ms") or {}
        row["figures_over"] = sorted(name for name, bound in bounds.items()
                                     if bound > FIGURE_TOLERANCE_MS)
    return rows


def against_send_window(error_ms: float, window_ms: float) -> float:
    """A first-audio error against the fake's send window rather than its end: the latency to
    the end of the send minus ``window_ms`` is as true as the latency to its end (the frame
    left in between), so only a stamp outside the window errs, by its distance to it."""
    if error_ms > 0:
        return error_ms
    return min(0.0, error_ms + window_ms)


def _listening_here(case: dict[str, Any]) -> dict[str, Any]:
    """In the case's own process: bench_runner's listening case (server_vad, a barge-in in
    the first response), its errors against the fake's send times, the responses flagged."""
    import asyncio
    import resource

    from bench_runner import listening_accuracy  # type: ignore[import-not-found]

    from voicelab.execution import use_chosen_event_loop

    use_chosen_event_loop()
    logging.getLogger("voicelab").setLevel(logging.WARNING)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result: dict[str, Any] = asyncio.run(listening_accuracy(
        case["trials"], Path(case["workdir"]) / "listening", "process"))
    after = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_seconds"] = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    bundle = next((Path(case["workdir"]) / "listening").glob("2*"))
    turns = [turn for trial in sorted(bundle.glob("trial-*")) for turn in json.loads(
        (trial / "voice-metrics.json").read_text())["turns"]]
    result["flagged"] = sum(bool(t.get("timing_degraded") or t.get("first_audio_degraded"))
                            for t in turns)
    result["responses"] = len(turns)
    if case.get("keep"):
        shutil.copytree(bundle, Path(case["keep"]) / f"listening-{bundle.name}")
    return result


def _listening_row(result: dict[str, Any]) -> list[str]:
    lines = [f"listening, {result['trials']} concurrent: {result['passed']}/{result['trials']} "
             f"passed, {result['flagged']}/{result['responses']} responses flagged, "
             f"{result['wall_seconds']:.1f} s, CPU {result['cpu_seconds'] / result['trials'] * 1000:.0f} "
             f"ms/trial"]
    for name, target in (("response_latency", 20.0), ("stop_latency", 20.0),
                         ("stop_latency_unflagged", 20.0), ("stop_latency_sent", None)):
        values = np.abs(np.asarray(result[name], dtype=float))
        lines.append(f"  |error| {name}_ms over {values.size}: " + (
            f"p50 {np.percentile(values, 50):.2f}, p99 {np.percentile(values, 99):.2f}, max "
            f"{values.max():.2f}" + (f" (target p99 <= {target:g})" if target else
                                     " (to the last speech sample's send)")
            if values.size else "no samples"))
    beyond = result.get("stop_latency_beyond_bound", [])
    lines.append(f"  stop latencies off by more than their stated bound: {len(beyond)}"
                 + (f" ({', '.join(f'{e:+.1f}' for e in beyond[:5])} ms)" if beyond else ""))
    return lines


def _case_here(case: dict[str, Any]) -> dict[str, Any]:
    """In the case's own process: the run, then every response's errors and the spans; in a
    tuned process (as the command line runs), unless ``--untuned`` (a library call's)."""
    from voicelab.execution import tuned_process

    with contextlib.nullcontext() if case.get("untuned") else tuned_process():
        return _tuned_case_here(case)


def _tuned_case_here(case: dict[str, Any]) -> dict[str, Any]:
    if case.get("listening"):
        return _listening_here(case)
    result = run_case_here(case)
    if case.get("keep"):  # the recordings, to judge again (--judge) under other code
        shutil.copytree(result["bundle"], Path(case["keep"]) / Path(result["bundle"]).name)
    trials = sorted(Path(result["bundle"]).glob("trial-*"))
    result["responses"] = [row for trial in trials for row in _trial_rows(trial)]
    result["spans"] = [_trial_span(trial) for trial in trials]
    return result


def peak_concurrency(spans: Sequence[tuple[int, int]]) -> int:
    """The most spans open at once (an end and a start at the same moment do not overlap)."""
    moments = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans],
                     key=lambda moment: (moment[0], moment[1]))
    open_now = peak = 0
    for _, step in moments:
        open_now += step
        peak = max(peak, open_now)
    return peak


@dataclasses.dataclass(frozen=True)
class LoadFigures:
    responses: int
    flagged: int
    unflagged_errors_ms: np.ndarray
    silently_wrong: list[str]
    #: responses whose truth could not be rebuilt (more chunks than the fake logged frames)
    without_truth: int = 0

    @property
    def flagged_fraction(self) -> float:
        return self.flagged / self.responses if self.responses else 0.0


def load_figures(rows: Sequence[dict[str, Any]]) -> LoadFigures:
    """The benchmark's figures from the responses' rows (``bench_scale.response_errors``)."""
    flagged = sum(row["timing_degraded"] or row["first_audio_degraded"] for row in rows)
    unflagged: list[float] = []
    wrong: list[str] = []
    for row in rows:
        error = row["first_audio"]
        if error is not None:
            error = against_send_window(error, row.get("first_audio_window", 0.0))
        if error is not None and not row["first_audio_degraded"]:
            unflagged.append(abs(error))
            # late only: a stamp before the fake's own send time means the fake stamped its
            # send late (its loop was busy after the write), not that voicelab erred
            if error > FIRST_AUDIO_TOLERANCE_MS:
                wrong.append(f"{row['turn']} first audio {error:+.1f} ms "
                             f"(stated bound {row['first_audio_bound']} ms)")
        for name in ("stall", "dead_air"):
            if row[name] is not None and not row["timing_degraded"] and \
                    abs(row[name]) > STALL_TOLERANCE_MS:
                wrong.append(f"{row['turn']} {name} {row[name]:+.1f} ms "
                             f"(stated bound {row['stamp_bound']} ms)")
    untrue = sum(not row.get("truth", True) for row in rows)
    return LoadFigures(len(rows), flagged, np.asarray(unflagged, dtype=float), wrong, untrue)


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """``count`` processes spinning on a core each, stopped when the block ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait(10)


def _machine() -> str:
    return (f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
            f"Linux {platform.release()}, Python {platform.python_version()}")


def _row(size: int, result: dict[str, Any], figures: LoadFigures) -> str:
    errors = figures.unflagged_errors_ms
    spread = (f"{np.percentile(errors, 50):5.2f} {np.percentile(errors, 99):6.2f} "
              f"{errors.max():6.2f}") if errors.size else f"{'-':>5} {'-':>6} {'-':>6}"
    return (f"{size:>4} {result['event_loop']:>8} {figures.flagged_fraction:>8.1%} "
            f"{spread} {len(figures.silently_wrong):>7} "
            f"{result['cpu_seconds'] / size * 1000:>8.0f} "
            f"{peak_concurrency(result['spans']):>5} {result['wall_seconds']:>6.1f} "
            f"{result['passed']:>4}/{size} {errors.size:>5}/{figures.responses}")


def _print_excess(rows: Sequence[dict[str, Any]]) -> None:
    """How far each first-audio error goes past its stated bound, flagged or not (the bound,
    not the flag, is what must hold)."""
    excess = sorted(((row["first_audio"] - (row["first_audio_bound"] or 0.0)), row["turn"],
                     row["first_audio_bound"], row["first_audio_degraded"]) for row in rows
                    if row["first_audio"] is not None)
    over = [e for e in excess if e[0] > 0]
    print(f"       first audio past its bound: {len(over)}/{len(excess)} (against the send's "
          f"end); worst: " + ", ".join(
        f"{turn} +{e:.1f} (bound {bound}{', flagged' if flagged else ''})"
        for e, turn, bound, flagged in excess[-8:]))


def flag_breakdown(rows: Sequence[dict[str, Any]], *,
                   tolerance_ms: float = FIRST_AUDIO_TOLERANCE_MS) -> str:
    """Which figure carries each flagged response: its first-audio stamp's bound alone (over
    ``tolerance_ms``), its other timing figures (``timing_degraded``: per figure, each figure
    whose own bound is over its tolerance is counted; judged per stamp, the stamps' bounds), or
    both; and how far the first-audio bounds of the flagged go."""
    first = [row for row in rows if row["first_audio_degraded"] and not row["timing_degraded"]]
    timing = [row for row in rows if row["timing_degraded"] and not row["first_audio_degraded"]]
    both = [row for row in rows if row["timing_degraded"] and row["first_audio_degraded"]]
    bounds = np.asarray([row["first_audio_bound"] or 0.0 for row in first + both], dtype=float)
    spread = (f"first-audio bound p50 {np.percentile(bounds, 50):.2f} / p90 "
              f"{np.percentile(bounds, 90):.2f} / max {bounds.max():.2f} ms vs {tolerance_ms:g}"
              if bounds.size else "no first-audio bound over its tolerance")
    stall = np.asarray([row["stamp_bound"] or 0.0 for row in timing + both], dtype=float)
    stall_spread = f"; stamp bound max p50 {np.percentile(stall, 50):.1f} ms" if stall.size else ""
    figures: dict[str, int] = {}
    for row in timing + both:
        for name in row.get("figures_over", ()):
            figures[name] = figures.get(name, 0) + 1
    by_figure = ("; figures over their tolerance: " + ", ".join(
        f"{name} {count}" for name, count in sorted(figures.items()))) if figures else ""
    return (f"flagged by: first audio only {len(first)}, timing figures only {len(timing)}, "
            f"both {len(both)}; {spread}{stall_spread}{by_figure}")


def judge_kept(bundles: Sequence[Path]) -> None:
    """The benchmark's figures of kept bundles (``--keep``) as their files judge them now
    (after ``voice-evaluator rescore`` with the code to compare): flagged and silently wrong."""
    print(f"{'bundle':>40} {'flagged':>8} {'silent':>7} {'responses':>9}")
    for bundle in bundles:
        rows = [row for trial in sorted(bundle.glob("trial-*")) for row in _trial_rows(trial)]
        figures = load_figures(rows)
        print(f"{bundle.name:>40} {figures.flagged_fraction:>8.1%} "
              f"{len(figures.silently_wrong):>7} {figures.responses:>9}")
        for line in figures.silently_wrong[:5]:
            print(f"       silently wrong: {line}")
        print(f"       {flag_breakdown(rows)}")


def _check_ramp(ramp: float | None) -> None:
    if not ramp:
        return
    import inspect

    import voicelab

    if "ramp_seconds" not in inspect.signature(voicelab.arun).parameters and \
            "ramp_seconds" not in {f.name for f in dataclasses.fields(voicelab.RunOptions)}:
        raise SystemExit("--ramp: this voicelab has no ramp_seconds (load profiles) yet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="*", default=[50, 100, 200],
                        help="concurrent trials of each case (default: 50 100 200)")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes (1: in-process, the library's default)")
    parser.add_argument("--event-loop", choices=["auto", "asyncio", "uvloop"], default="auto",
                        help="voicelab's event loop (VOICELAB_EVENT_LOOP); the product's "
                             "stays asyncio's")
    parser.add_argument("--busy", type=int, default=0, metavar="K",
                        help="spin K busy processes beside the benchmark")
    parser.add_argument("--ramp", type=float, default=None, metavar="SECONDS",
                        help="start the trials evenly over SECONDS (voicelab's ramp_seconds)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each size")
    parser.add_argument("--listening", type=int, default=0, metavar="N",
                        help="also N concurrent trials of the listening line (server_vad, "
                             "bench_runner.py's case: a barge-in, stop latency)")
    parser.add_argument("--untuned", action="store_true",
                        help="run the trials in an untuned process, as a library call in a "
                             "notebook does (default: tuned, as the command line runs them)")
    parser.add_argument("--verbose", action="store_true",
                        help="list every silently wrong figure")
    parser.add_argument("--workdir", default="/dev/shm" if Path("/dev/shm").is_dir() else None)
    parser.add_argument("--keep", metavar="DIR", type=Path,
                        help="keep each case's bundle in DIR (to rescore and --judge again)")
    parser.add_argument("--judge", metavar="BUNDLE", type=Path, nargs="+",
                        help="run nothing: print the figures of kept bundles as judged now")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(_case_here(json.loads(args.case)), default=str))
        return
    if args.judge:
        judge_kept(args.judge)
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    _check_ramp(args.ramp)
    print(f"machine: {_machine()}; busy processes: {args.busy}; workers: {args.workers}; "
          f"ramp: {args.ramp or 'none'}; {'untuned' if args.untuned else 'tuned'} process")
    print(f"{'N':>4} {'loop':>8} {'flagged':>8} {'unflagged |error| ms':>20} {'silent':>7} "
          f"{'CPU ms/tr':>9} {'peak':>5} {'wall s':>6} {'passed':>8} {'unflagged':>11}")
    print(f"{'':>22} {'p50':>5} {'p99':>6} {'max':>6}")
    env = {**os.environ, "VOICELAB_EVENT_LOOP": args.event_loop}
    process, uri = _start_fake(PACED_FAKE)
    try:
        with busy_processes(args.busy):
            for size in args.sizes:
                for _ in range(args.repeat):
                    case = {"root": args.workdir, "executor": "local",
                            "workers": args.workers, "trials": size, "concurrency": size,
                            "overrides": _paced_overrides(uri), "ramp_seconds": args.ramp,
                            "keep": str(args.keep.resolve()) if args.keep else None,
                            "untuned": args.untuned}
                    result = _run_case(case, script=__file__, env=env)
                    figures = load_figures(result["responses"])
                    print(_row(size, result, figures), flush=True)
                    if figures.without_truth:
                        print(f"       {figures.without_truth} response(s) without truth (the "
                              f"fake's frame log does not match their chunks): left out")
                    for line in figures.silently_wrong[:None if args.verbose else 5]:
                        print(f"       silently wrong: {line}")
                    print(f"       {flag_breakdown(result['responses'])}")
                    if args.verbose:
                        _print_excess(result["responses"])
        if args.listening:
            with busy_processes(args.busy):
                for _ in range(args.repeat):
                    case = {"root": args.workdir, "listening": True, "trials": args.listening,
                            "keep": str(args.keep.resolve()) if args.keep else None,
                            "untuned": args.untuned}
                    for line in _listening_row(_run_case(case, script=__file__, env=env)):
                        print(line, flush=True)
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    main()
