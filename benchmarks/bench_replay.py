"""Replay: how faithful and how fast. A run of the office-noise example (two user turns, the
first a barge-in 1 s into the opening) is replayed against the same fake product and against a
slower build (``reply_latency_ms``); printed, not asserted.

Faithfulness: trials whose verdicts and exit reason are the same, trials whose user audio (every
turn as the product received it, and the whole user-sent.wav) is byte-identical. Turn taking:
the smallest gap between the end of a reply's playback and the start of the next (non-barge-in)
user turn, on the listener timeline (negative would mean the user talked over the product).
Timing: wall seconds of the run and of each replay, and compare's median response latency.

    python benchmarks/bench_replay.py [--trials 20] [--slower-ms 600] [--listening]

``--listening``: server_vad turn taking on a live line (real time; two plain user turns), where
the gap includes the listener's reply-end hangover.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import voicelab  # noqa: E402
from voicelab.analysis import compare  # noqa: E402
from voicelab.artifacts import read_json, read_voice_events  # noqa: E402
from voicelab.personas._replay import read_recorded_trial  # noqa: E402

OFFICE = ROOT / "examples" / "run-office-noise.yaml"
TWO_TURNS = ['script.turns=[{"response": "Wait, one thing first.", "keywords": ["daily plan"], '
             '"interrupt_after_seconds": 1.0}, {"response": "Please record the plan and save '
             'the reminder.", "keywords": ["else", "plan"]}]',
             "endpoint.settings.audio_pacing=realtime", "endpoint.settings.pacing_speed=4",
             "endpoint.settings.complete_after_turns=2"]
LISTENING = ["pace_audio=true", "endpoint.settings.turn_detection=server_vad",
             "endpoint.settings.opening_text=Hello, your plan please?",
             "endpoint.settings.reply_text=Your daily plan is recorded and the reminder saved.",
             "endpoint.settings.complete_after_turns=2", "concurrency=4",
             'script.turns=[{"response": "Plan the week."}, {"response": "Save it."}]']


def _verdicts(trial: Path) -> tuple:
    report = read_json(trial / "trial-report.json")
    return report["exit_reason"], [(v["name"], v["passed"]) for v in report["verdicts"]]


def _turns(trial: Path) -> list[tuple[str, bytes]]:
    return [(t.turn_id, t.audio.to_bytes()) for t in read_recorded_trial(trial).turns]


def _smallest_gap_ms(trial: Path) -> float | None:
    events = read_voice_events(trial / "voice-events.jsonl")
    replies = {t["turn_id"]: t for t in read_json(trial / "voice-metrics.json")["turns"]}
    barge_ins = {e["turn_id"] for e in events if e["event_type"] == "user.barge_in"}
    gaps = []
    seen = set()
    for event in events:
        turn = event["turn_id"]
        if event["event_type"] != "user.audio_chunk" or not turn or turn in seen:
            continue
        seen.add(turn)
        previous = f"turn-{int(turn.split('-')[1]) - 1:03d}"
        if turn not in barge_ins and replies.get(previous, {}).get("playback_end_ms") is not None:
            gaps.append(event["listener_offset_ns"] / 1e6 - replies[previous]["playback_end_ms"])
    return min(gaps) if gaps else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--slower-ms", type=float, default=600.0)
    parser.add_argument("--listening", action="store_true")
    args = parser.parse_args()
    overrides = LISTENING if args.listening else TWO_TURNS
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        original = voicelab.run(OFFICE, voicelab.RunOptions(
            trials=args.trials,
            overrides=overrides,
            artifacts_dir=Path(folder) / "original")).bundle_path
        print(f"original run: {args.trials} trials in {time.perf_counter() - started:.1f} s")
        for name, changes in (("same product", []), (
                f"+{args.slower_ms:g} ms reply latency",
                [f"endpoint.settings.reply_latency_ms={args.slower_ms}"])):
            started = time.perf_counter()
            replayed = voicelab.replay(original, artifacts_dir=Path(folder) / "replays",
                                       overrides=changes).bundle_path
            seconds = time.perf_counter() - started
            pairs = list(zip(sorted(original.glob("trial-*")), sorted(replayed.glob("trial-*")),
                             strict=True))
            same_verdicts = sum(_verdicts(a) == _verdicts(b) for a, b in pairs)
            same_turns = sum(_turns(a) == _turns(b) for a, b in pairs)
            same_stream = sum((a / "user-sent.wav").read_bytes() == (b / "user-sent.wav")
                              .read_bytes() for a, b in pairs)
            gaps = [g for _, b in pairs if (g := _smallest_gap_ms(b)) is not None]
            latency = compare(original, replayed).metric("response_latency_ms", "median")
            print(f"replay, {name}: {seconds:.1f} s; verdicts and exit reason equal in "
                  f"{same_verdicts}/{len(pairs)}; user turns byte-identical in "
                  f"{same_turns}/{len(pairs)}, user-sent.wav in {same_stream}/{len(pairs)}; "
                  f"smallest gap reply end -> next user turn {min(gaps):.3f} ms; median "
                  f"response latency {latency.baseline:.1f} -> {latency.candidate:.1f} ms")


if __name__ == "__main__":
    main()
