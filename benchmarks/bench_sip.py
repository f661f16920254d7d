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
import sys
import tempfile
from pathlib import Path
from typing import Any

from _calls import double_lines, responses, run_calls, summary, write_call_run

CONVERSION_MS = 3.625
DOUBLE = {"mode": "agent", "greeting": "Hello, this is the Acme agent. How can I help?",
          "reply_text": "Thank you. That is noted.", "hang_up_after_replies": 1, "ring_ms": 20,
          "max_calls": 400}


def write_run(folder: Path) -> Path:
    return write_call_run(folder, scenario_id="sip-bench", endpoint={
        "adapter": "sip",
        "settings": {"uri": "sip:agent@127.0.0.1:{port}", "answer_timeout_seconds": 60},
        "launch": {"command": [sys.executable, "-m", "voicelab.doubles.sip", "--port",
                               "{port}", "--settings", json.dumps(DOUBLE)],
                   "per": "run", "ready_pattern": '"uri"', "ready_timeout_seconds": 60}})


def found_responses(bundle: Path) -> list[dict[str, Any]]:
    """Every answered user turn, matched to the double's call by its Call-ID (the call's
    record in ``raw-endpoint-events.json``, the double's ``invite_received``)."""
    lines = double_lines(bundle)
    calls = {line["call_id"]: line["call"] for line in lines
             if line.get("event") == "invite_received"}
    sent = {(line["call"], line["reply"]): line for line in lines
            if line.get("event") == "reply_sent"}

    def call_of(raw: list[dict[str, Any]]) -> Any:
        facts = [e["raw"] for e in raw if isinstance(e.get("raw"), dict)
                 and e["raw"].get("sip_event") == "call_facts"]
        return calls.get(facts[0]["sip"].get("call_id")) if facts else None

    return responses(bundle, call_of=call_of, replies=sent, conversion_ms=CONVERSION_MS)


def one_round(trials: int, concurrency: int, workdir: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sip-", dir=workdir) as scratch:
        folder = Path(scratch)
        result = run_calls(write_run(folder), trials=trials, concurrency=concurrency,
                           artifacts=folder / "runs")
        found = found_responses(result.bundle)
        if workdir is not None:
            result.bundle.rename(workdir / result.bundle.name)
    return summary(found, result, trials=trials)


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
