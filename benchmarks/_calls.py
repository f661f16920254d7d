"""What the call benchmarks (``bench_sip.py``, ``bench_webrtc.py``) share: the run file of one
call to a launched double, running it under the command line with its CPU and memory, the
double's JSON lines (its truth, kept in ``product.log``), and the summary of voicelab's figures
against that truth (flagged, unflagged error, silently wrong)."""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voicelab.artifacts import read_json, read_voice_events

#: one RTP packet: an error beyond it (and the response's own stated bound) is silently wrong
TOLERANCE_MS = 20.0


def write_call_run(folder: Path, *, scenario_id: str, endpoint: dict[str, Any]) -> Path:
    """A run file (JSON is YAML) for one call: the product greets, the caller answers, the
    product replies and hangs up; ``endpoint`` is the run's ``endpoint:`` block."""
    files: dict[str, Any] = {
        "scenario.yaml": {"id": scenario_id, "description": "N concurrent calls",
                          "conversation": {"first_speaker": "product"},
                          "eval_spec": {"expected_exit": "endpoint_completion",
                                        "limits": {"max_turns": 4, "max_time_seconds": 60}}},
        "persona.yaml": {"name": "Jordan", "communication_style": "friendly"},
        "script.yaml": {"turns": [{"response": "A table for two tonight, please."}]},
        "run.yaml": {
            "scenario_path": "scenario.yaml", "persona_path": "persona.yaml",
            "script_path": "script.yaml", "persona_mode": "scripted",
            "speech_provider": "tone", "pace_audio": True, "trial_seed": 3,
            "endpoint": endpoint},
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    return folder / "run.yaml"


def double_lines(folder: Path) -> list[dict[str, Any]]:
    """The JSON lines the launched double printed (``product.log`` of a bundle or trial)."""
    lines = []
    for line in (folder / "product.log").read_text(encoding="utf-8").splitlines():
        if " stdout] " in line and "] {" in line:
            lines.append(json.loads(line.split(" stdout] ", 1)[1]))
    return lines


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    wall_s: float
    cpu_s: float
    #: the largest resident set of the command line's processes (the evaluator's, in practice)
    peak_rss_mb: float
    bundle: Path


#: How often the command line's processes' own peaks are read while it runs.
PEAK_SAMPLE_SECONDS = 0.05


def _own_peak_kib(pid: int) -> int | None:
    """``VmHWM`` of ``/proc/<pid>/status``: the process's own high-water mark since exec (Linux's
    ``ru_maxrss`` also carries the peak of the process that forked it: this benchmark's)."""
    try:
        text = Path(f"/proc/{pid}/status").read_bytes()[:65536]
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(b"VmHWM:") and line.split()[1:2] and line.split()[1].isdigit():
            return int(line.split()[1])
    return None


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (``/proc/<pid>/task/<tid>/children``)."""
    found, queue = [], [pid]
    while queue and len(found) < 10_000:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                queue += [int(child) for child in task.read_text().split()]
            except (OSError, ValueError):
                continue
    return found


def _sampled_peak_kib(process: subprocess.Popen[str], stop: threading.Event,
                      peaks: dict[int, int]) -> None:
    """Each process's own peak, read until ``stop`` (a peak only rises, so a process that
    exits keeps its last reading; only growth in its last interval can be missed)."""
    while not stop.is_set():
        for pid in _descendants(process.pid):
            peak = _own_peak_kib(pid)
            if peak is not None:
                peaks[pid] = max(peaks.get(pid, 0), peak)
        stop.wait(PEAK_SAMPLE_SECONDS)


def run_calls(run_file: Path, *, trials: int, concurrency: int, artifacts: Path,
              extra: list[str] | None = None, timeout_s: float = 1800) -> RunResult:
    """``voicelab run`` as a subprocess, with the CPU of everything it started and the
    largest of its processes' own peaks (``ru_maxrss`` where there is no ``/proc``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    peaks: dict[int, int] = {}
    stop = threading.Event()
    with subprocess.Popen(
            [sys.executable, "-m", "voicelab", "run", str(run_file), "--trials", str(trials),
             "--concurrency", str(concurrency), "--quiet", "--artifacts-dir", str(artifacts),
             *(extra or [])], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True) as process:
        sampler = threading.Thread(target=_sampled_peak_kib, args=(process, stop, peaks),
                                   daemon=True)
        sampler.start()
        try:
            process.communicate(timeout=timeout_s)
        finally:
            stop.set()
            sampler.join()
            if process.poll() is None:
                process.kill()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    bundle = next(artifacts.glob("*/run-report.json")).parent.resolve()
    peak_kib = max(peaks.values()) if peaks else after.ru_maxrss
    return RunResult(process.returncode, wall, cpu, peak_kib / 1024, bundle)


def responses(bundle: Path, *, call_of: Callable[[list[dict[str, Any]]], Any],
              replies: dict[tuple[Any, int], dict[str, Any]],
              conversion_ms: float = 0.0) -> list[dict[str, Any]]:
    """Every answered user turn: voicelab's figures, its flags and the double's truth.

    ``call_of`` names a trial's call from its raw endpoint events; ``replies`` holds the
    double's ``reply_sent`` lines by (call, reply number): ``speech_start_ns`` (its first
    audible sample's send stamp) and, when it logs it, ``dead_air_ms``."""
    found = []
    for trial in sorted(bundle.glob("trial-*")):
        events = read_voice_events(trial / "voice-events.jsonl")
        start = events[0]["attributes"]["clock_start_ns"]
        metrics = read_json(trial / "voice-metrics.json")
        call = call_of(read_json(trial / "raw-endpoint-events.json")["events"])
        for event in (e for e in events if e["event_type"] == "user.speech_ended"):
            turn = next((t for t in metrics["turns"] if t["turn_id"] == event["turn_id"]), {})
            reply = replies.get((call, int(event["turn_id"].removeprefix("turn-"))))
            truth = None
            if reply is not None and reply.get("speech_start_ns") is not None:
                truth = (reply["speech_start_ns"] - start - event["monotonic_offset_ns"]) / 1e6 \
                    - conversion_ms
            found.append({"measured": turn.get("response_latency_ms"), "truth": truth,
                          "degraded": bool(turn.get("timing_degraded")),
                          "bound": float(turn.get("stamp_error_bound_ms") or 0.0),
                          "dead_air": turn.get("dead_air_ms"),
                          "dead_air_truth": reply.get("dead_air_ms") if reply else None})
    return found


def _spread(values: list[float]) -> dict[str, float | None]:
    return {"p50": round(statistics.median(values), 2) if values else None,
            "p99": round(float(np.percentile(values, 99)), 2) if values else None,
            "max": round(max(values), 2) if values else None}


def summary(found: list[dict[str, Any]], result: RunResult, *, trials: int) -> dict[str, Any]:
    """A round's figures: CPU per trial, peak RSS, the flagged fraction (voicelab marked the
    response ``timing_degraded`` or gave no figure), the unflagged responses' error against
    the truth, how many of those are silently wrong (beyond one packet plus their stated
    bound), and dead air against the double's own account where it gives one."""
    unflagged = [r for r in found if not r["degraded"] and r["measured"] is not None
                 and r["truth"] is not None]
    errors = [abs(r["measured"] - r["truth"]) for r in unflagged]
    wrong = sum(1 for r, error in zip(unflagged, errors, strict=True)
                if error > TOLERANCE_MS + r["bound"])
    dead_air = [abs(r["dead_air"] - r["dead_air_truth"]) for r in unflagged
                if r["dead_air"] is not None and r["dead_air_truth"] is not None]
    return {"exit_code": result.exit_code, "wall_s": round(result.wall_s, 1),
            "cpu_per_trial_s": round(result.cpu_s / trials, 3),
            "peak_rss_mb": round(result.peak_rss_mb, 1), "responses": len(found),
            "flagged_fraction": round((len(found) - len(unflagged)) / len(found), 3)
            if found else None,
            "unflagged_error_ms": _spread(errors), "silently_wrong": wrong,
            **({"dead_air_error_ms": _spread(dead_air)} if dead_air else {})}
