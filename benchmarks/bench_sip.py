"""SIP calls at scale: N concurrent phone calls through ``adapter: sip`` against the SIP double.

    python benchmarks/bench_sip.py [--trials 50] [--concurrency 50] [--rounds 1] [--workdir DIR]

One run of ``--trials`` calls, ``--concurrency`` at once, against one SIP product double launched
for the run (``launch.per: run``), each call the double greeting, the caller answering and the
double replying, then hanging up. Reported per round:

* **CPU per trial**: user + system CPU of the command line and everything it started (the double
  and the scoring process included: ``RUSAGE_CHILDREN``), per trial; **peak RSS** of the largest
  of them (the evaluator's process, in practice);
* **the response-latency error** of every reply against the double's truth: its reply's first
  audible sample left at ``speech_start_ns`` (the send stamp of the packet holding it plus its
  place in the packet), minus the caller's last speech sample (the run's ``user.speech_ended``),
  less the adapter's constant conversion delay; calls are matched by their Call-ID (the call's record in
  ``raw-endpoint-events.json``, the double's ``invite_received``);
* **flagged**: responses voicelab itself marks ``timing_degraded`` (or gives no figure); of the
  others, **silently wrong**: an error beyond 20 ms (one RTP packet) plus the response's own
  ``stamp_error_bound_ms``. The issue's target: 50 concurrent calls on 2 cores, at most 10 %
  flagged, none silently wrong.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from voicelab.artifacts import read_json, read_voice_events

TOLERANCE_MS = 20.0
CONVERSION_MS = 3.625
DOUBLE = {"mode": "agent", "greeting": "Hello, this is the Acme agent. How can I help?",
          "reply_text": "Thank you. That is noted.", "hang_up_after_replies": 1, "ring_ms": 20,
          "max_calls": 400}


def write_run(folder: Path) -> Path:
    files: dict[str, Any] = {
        "scenario.yaml": {"id": "sip-bench", "description": "N concurrent SIP calls",
                          "conversation": {"first_speaker": "product"},
                          "eval_spec": {"expected_exit": "endpoint_completion",
                                        "limits": {"max_turns": 4, "max_time_seconds": 60}}},
        "persona.yaml": {"name": "Jordan", "communication_style": "friendly"},
        "script.yaml": {"turns": [{"response": "A table for two tonight, please."}]},
        "run.yaml": {
            "scenario_path": "scenario.yaml", "persona_path": "persona.yaml",
            "script_path": "script.yaml", "persona_mode": "scripted",
            "speech_provider": "tone", "pace_audio": True, "trial_seed": 3,
            "endpoint": {
                "adapter": "sip",
                "settings": {"uri": "sip:agent@127.0.0.1:{port}", "answer_timeout_seconds": 60},
                "launch": {"command": [sys.executable, "-m", "voicelab.doubles.sip", "--port",
                                       "{port}", "--settings", json.dumps(DOUBLE)],
                           "per": "run", "ready_pattern": '"uri"',
                           "ready_timeout_seconds": 60}}},
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    return folder / "run.yaml"


def double_lines(bundle: Path) -> list[dict[str, Any]]:
    lines = []
    for line in (bundle / "product.log").read_text(encoding="utf-8").splitlines():
        if " stdout] " in line and "] {" in line:
            lines.append(json.loads(line.split(" stdout] ", 1)[1]))
    return lines


def responses(bundle: Path) -> list[dict[str, Any]]:
    """Every answered user turn: voicelab's figure, its flags and the double's truth."""
    lines = double_lines(bundle)
    calls = {line["call_id"]: line["call"] for line in lines
             if line.get("event") == "invite_received"}
    sent = {(line["call"], line["reply"]): line for line in lines
            if line.get("event") == "reply_sent"}
    found = []
    for trial in sorted(bundle.glob("trial-*")):
        events = read_voice_events(trial / "voice-events.jsonl")
        start = events[0]["attributes"]["clock_start_ns"]
        metrics = read_json(trial / "voice-metrics.json")
        raw = read_json(trial / "raw-endpoint-events.json")["events"]
        facts = [e["raw"] for e in raw if isinstance(e.get("raw"), dict)
                 and e["raw"].get("sip_event") == "call_facts"]
        call = calls.get(facts[0]["sip"].get("call_id")) if facts else None
        for event in (e for e in events if e["event_type"] == "user.speech_ended"):
            turn = next((t for t in metrics["turns"] if t["turn_id"] == event["turn_id"]), {})
            reply = sent.get((call, int(event["turn_id"].removeprefix("turn-"))))
            measured = turn.get("response_latency_ms")
            truth = None
            if reply is not None and reply.get("speech_start_ns") is not None:
                truth = (reply["speech_start_ns"] - start - event["monotonic_offset_ns"]) / 1e6 \
                    - CONVERSION_MS
            found.append({"measured": measured, "truth": truth,
                          "degraded": bool(turn.get("timing_degraded")),
                          "bound": float(turn.get("stamp_error_bound_ms") or 0.0)})
    return found


def one_round(trials: int, concurrency: int, workdir: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sip-", dir=workdir) as scratch:
        folder = Path(scratch)
        run_file = write_run(folder)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        process = subprocess.run(
            [sys.executable, "-m", "voicelab", "run", str(run_file), "--trials", str(trials),
             "--concurrency", str(concurrency), "--quiet", "--artifacts-dir",
             str(folder / "runs")], capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        bundle = next((folder / "runs").glob("*/run-report.json")).parent.resolve()
        found = responses(bundle)
        if workdir is not None:
            bundle.rename(workdir / bundle.name)
    unflagged = [r for r in found if not r["degraded"] and r["measured"] is not None
                 and r["truth"] is not None]
    errors = [abs(r["measured"] - r["truth"]) for r in unflagged]
    wrong = sum(1 for r, error in zip(unflagged, errors, strict=True)
                if error > TOLERANCE_MS + r["bound"])
    flagged = len(found) - len(unflagged)
    return {"exit_code": process.returncode, "wall_s": round(wall, 1),
            "cpu_per_trial_s": round(cpu / trials, 3),
            "peak_rss_mb": round(after.ru_maxrss / 1024, 1), "responses": len(found),
            "flagged_fraction": round(flagged / len(found), 3) if found else None,
            "unflagged_error_ms": {
                "p50": round(statistics.median(errors), 2) if errors else None,
                "p99": round(float(np.percentile(errors, 99)), 2) if errors else None,
                "max": round(max(errors), 2) if errors else None},
            "silently_wrong": wrong}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="keep each round's bundle here")
    args = parser.parse_args()
    for round_number in range(1, args.rounds + 1):
        print(json.dumps({"round": round_number, "trials": args.trials,
                          "concurrency": args.concurrency,
                          **one_round(args.trials, args.concurrency, args.workdir)}),
              flush=True)


if __name__ == "__main__":
    main()
