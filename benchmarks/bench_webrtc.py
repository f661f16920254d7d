"""WebRTC throughput and accuracy: N concurrent calls through ``adapter: webrtc``.

    python benchmarks/bench_webrtc.py [--trials 20] [--concurrency 20] [--rounds 1] [--workers 1]

One run of ``--trials`` calls, ``--concurrency`` at once, against one WebRTC bot double launched
for the run (``launch.per: run``: aiortc on both sides, smallwebrtc signalling, Opus, RTVI), each
call the bot greeting, the user answering and the bot replying (with a 400 ms pause inside the
reply: dead air) and hanging up. Reported per round (``_calls.py``, shared with ``bench_sip.py``):

* **CPU per trial**: the user + system CPU of the command line and everything it started (the
  bot double and the scoring process included: ``RUSAGE_CHILDREN``), per trial; **peak RSS** of
  the largest of them;
* **the response-latency error** of every reply against the bot's truth: its first speech
  sample's RTP send stamp minus the user's last speech sample sent (the run's
  ``user.speech_ended``), matched to the bot's call by the session the adapter records
  (``raw-endpoint-events.json``, ``webrtc.session``: the bot's ``pc_id``);
* **flagged**: responses voicelab itself marks ``timing_degraded`` (or gives no figure); of the
  others, **silently wrong**: an error beyond 20 ms plus the response's own
  ``stamp_error_bound_ms``; **dead air** against the bot's own account of the reply it sent.
  The issue's target: 20 concurrent calls on 2 cores, at most 10 % flagged; also each trial's
  exit reason, and every response's error against the truth, flagged or not (how far off the
  flagged ones really were);
* **how the product's audio was stamped**: each trial's ``arrival_stamps`` (``kernel_stream``:
  the kernel's receive stamps, its audio not charged the loop's lag) and the packets the loop
  stamped instead, over all trials (``read_stamped_packets`` + ``loop_stamped_packets`` of the
  call's facts: charged the loop's lag).

Measured figures: docs/adapters/webrtc.md ("Throughput").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from _calls import double_lines, responses, run_calls, summary, write_call_run

from voicelab.artifacts import read_json, read_voice_events

BOT = {"greeting": "Hello! How can I help you today?", "reply_text": "Sure, that is booked.",
       "hang_up_after_replies": 1, "reply_pause_ms": 400}


def write_run(folder: Path) -> Path:
    run = _write_run(folder)
    # the bot hangs up once its reply's last packet left; the user, once it heard the reply
    # end: on a loaded machine the hang-up comes after, and the trial would end
    # script_exhaustion (a race of the scenario, not a measurement)
    script = folder / "script.yaml"
    script.write_text(json.dumps({**json.loads(script.read_text(encoding="utf-8")),
                                  "post_script_completion_wait_seconds": 5.0}),
                      encoding="utf-8")
    return run


def _write_run(folder: Path) -> Path:
    return write_call_run(folder, scenario_id="webrtc-bench", endpoint={
        "adapter": "webrtc",
        "settings": {"url": "http://127.0.0.1:{port}", "ice_host_addresses": ["127.0.0.1"],
                     "connect_timeout_seconds": 30},
        "launch": {"command": [sys.executable, "-m", "voicelab.doubles.webrtc", "--port",
                               "{port}", "--settings", json.dumps(BOT)],
                   "per": "run", "ready_pattern": '"url"', "ready_timeout_seconds": 30}})


def found_responses(bundle: Path) -> list[dict[str, Any]]:
    """Every answered user turn, matched to the bot's call by the session (``pc_id``)."""
    lines = double_lines(bundle)
    calls = {line["call_id"]: line["call"] for line in lines
             if line.get("event") == "call_started"}
    sent = {(line["call"], line["reply"]): line for line in lines
            if line.get("event") == "reply_sent"}

    def call_of(raw: list[dict[str, Any]]) -> Any:
        sessions = [e["raw"]["webrtc"]["session"] for e in raw
                    if isinstance(e.get("raw"), dict) and "webrtc" in e["raw"]]
        return calls.get(sessions[0]) if sessions else None

    return responses(bundle, call_of=call_of, replies=sent)


def stamp_facts(bundle: Path) -> dict[str, Any]:
    """How each trial's product audio was stamped, and the packets the loop stamped."""
    sources: Counter[str] = Counter()
    loop_stamped = 0
    for trial in sorted(bundle.glob("trial-*")):
        connected = next((e for e in read_voice_events(trial / "voice-events.jsonl")
                          if e["event_type"] == "session.connected"), None)
        sources[(connected or {}).get("attributes", {}).get("arrival_stamps") or "loop"] += 1
        for event in read_json(trial / "raw-endpoint-events.json")["events"]:
            raw = event.get("raw")
            if isinstance(raw, dict) and "webrtc" in raw:
                connection = raw["webrtc"].get("connection") or {}
                loop_stamped += int(connection.get("read_stamped_packets", 0)) + \
                    int(connection.get("loop_stamped_packets", 0))
    return {"arrival_stamps": dict(sources), "loop_stamped_packets": loop_stamped}


def one_round(trials: int, concurrency: int, workdir: Path | None,
              workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-webrtc-", dir=workdir) as scratch:
        folder = Path(scratch)
        extra = ["--executor", "local", "--workers", str(workers)] if workers > 1 else []
        result = run_calls(write_run(folder), trials=trials, concurrency=concurrency,
                           artifacts=folder / "runs", extra=extra, timeout_s=900)
        found = found_responses(result.bundle)
        stamps = stamp_facts(result.bundle)
        exits = Counter(read_json(report)["exit_reason"]
                        for report in sorted(result.bundle.glob("trial-*/trial-report.json")))
        if workdir is not None:  # keep the bundle to look at
            result.bundle.rename(workdir / result.bundle.name)
    every = [abs(r["measured"] - r["truth"]) for r in found
             if r["measured"] is not None and r["truth"] is not None]
    return {**summary(found, result, trials=trials), "exit_reasons": dict(exits), **stamps,
            "flagged_or_not_error_ms": {"p50": round(statistics.median(every), 2),
                                        "max": round(max(every), 2)} if every else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="keep each round's bundle here")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes the calls are spread over (1: one event loop)")
    args = parser.parse_args()
    for round_number in range(1, args.rounds + 1):
        print(json.dumps({"round": round_number, "trials": args.trials,
                          "concurrency": args.concurrency, "workers": args.workers,
                          **one_round(args.trials, args.concurrency, args.workdir,
                                      args.workers)}),
              flush=True)


if __name__ == "__main__":
    main()
