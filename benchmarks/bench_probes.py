"""Selectivity probes and echo against the fake product's behaviours: rates and timings.

    python benchmarks/bench_probes.py [--trials 5]

For each fake behaviour (stops on any sound; stops only for speech over 700 ms and lets short
utterances pass; ignores everything; with and without echo cancellation) and each probe
(backchannel "mm-hmm" 0.8 s into the opening, a door 0.8 s into it, an interruption 0.8 s into
it, a speakerphone echo at 20 dB return loss), ``--trials`` seeded trials run concurrently on a
live line (``server_vad``, real time). Printed: the selectivity rates from run-report.json with
their Wilson intervals, ``stop_ms`` (the frame carrying the probe to the end of the product's
audible speech), the fake's own account of when it stopped sending speech (``server_timing
.speech_end_ns`` of the cancelled response, on the shared monotonic clock) minus the probe's
frame, self-interruptions and the opening's double talk. Nothing is asserted: timings depend on
the machine's load.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import voicelab  # noqa: E402
from voicelab.artifacts import read_json  # noqa: E402

EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
DOOR = ROOT / "datasets" / "environments" / "door-close.wav"
CLOSING = {"response": "Please record the plan and save the reminder at four."}
BASE = ["pace_audio=true", "endpoint.settings.turn_detection=server_vad",
        "endpoint.settings.opening_text=Hello! Tell me your daily plan and the reminder you "
        "want saved, with the time, please.",
        "endpoint.settings.reply_text=Your daily plan is recorded and the reminder saved.",
        "endpoint.settings.complete_after_turns=2"]
BEHAVIOURS = {
    "any sound": ["endpoint.settings.stop_on_speech_ms=0"],
    "speech > 700 ms": ["endpoint.settings.stop_on_speech_ms=700",
                        "endpoint.settings.min_turn_ms=700"],
    "ignores all": ["endpoint.settings.stop_on_speech_ms=null"],
}


def script(*turns: dict) -> str:
    return f"script.turns={json.dumps([*turns, CLOSING, CLOSING])}"


def environment(folder: Path, **fields: object) -> str:
    path = folder / f"environment-{len(list(folder.glob('environment-*')))}.yaml"
    path.write_text(yaml.safe_dump({"name": "bench", **fields}))
    return f"environment_path={path}"


def run(folder: Path, trials: int, overrides: list[str]) -> tuple[dict, list[dict], Path]:
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=trials,
        artifacts_dir=folder,
        overrides=[*BASE, f"concurrency={trials}", *overrides]))
    report = read_json(outcome.bundle_path / "run-report.json")
    metrics = [read_json(outcome.bundle_path / f"trial-{i:03d}" / "voice-metrics.json")
               for i in range(1, trials + 1)]
    return report, metrics, outcome.bundle_path


def product_stop_truth_ms(bundle: Path, trials: int) -> list[float]:
    """The fake's own send time of its last speech sample in each cancelled response, minus the
    send time of the frame that carried the probe (both on the shared monotonic clock)."""
    found = []
    for index in range(1, trials + 1):
        folder = bundle / f"trial-{index:03d}"
        events = [json.loads(line) for line in
                  (folder / "voice-events.jsonl").read_text().splitlines()]
        start = next(e for e in events if e["event_type"] == "trial.started")
        clock_start = start["attributes"].get("clock_start_ns")
        probe = next((e for e in events if e["event_type"] == "probe.started"), None)
        raw = read_json(folder / "raw-endpoint-events.json")
        done = [r for r in raw.get("events", []) if isinstance(r.get("raw"), dict)
                and r["raw"].get("type") == "response.done"
                and r["raw"].get("response", {}).get("status") == "cancelled"]
        if probe is None or not done or clock_start is None:
            continue
        end_ns = done[0]["raw"].get("server_timing", {}).get("speech_end_ns")
        if end_ns is None:
            continue
        sent_ns = clock_start + probe["monotonic_offset_ns"] \
            - int(probe["attributes"]["frame_lead_ms"] * 1e6)
        found.append((end_ns - sent_ns) / 1e6)
    return found


def describe(values: list[float]) -> str:
    if not values:
        return "-"
    data = np.asarray(values)
    return (f"p50 {np.percentile(data, 50):.0f}  p95 {np.percentile(data, 95):.0f}  "
            f"max {data.max():.0f} ms (n={data.size})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="voicelab-bench-probes-"))
    probes = {
        "backchannel": [script({"response": "mm-hmm", "kind": "backchannel",
                                "interrupt_after_seconds": 0.8})],
        "noise": [script(), environment(folder, noise_probes=[
            {"sound": str(DOOR), "volume": 0.8, "on_reply": 1, "after_seconds": 0.8}])],
        "interruption": [script({"response": "Wait, one thing first, about the reminder time.",
                                 "kind": "interruption", "interrupt_after_seconds": 0.8})],
    }
    print(f"{args.trials} trials per cell, concurrently; probes 0.8 s into the opening")
    for kind, overrides in probes.items():
        for behaviour, settings in BEHAVIOURS.items():
            report, metrics, bundle = run(folder / f"{kind}-{behaviour}".replace(" ", "_")
                                          .replace(">", "gt"), args.trials,
                                          [*overrides, *settings])
            for rate in report.get("selectivity", []):
                print(f"{kind:12s} {behaviour:16s} {rate['name']:30s} "
                      f"{rate['errors']}/{rate['probes']} = {rate['estimate']:.0%} "
                      f"[{rate['low']:.0%}, {rate['high']:.0%}]")
            stops = [p["stop_ms"] for m in metrics for p in m["probes"]
                     if p["stop_ms"] is not None]
            print(f"{'':29s} stop_ms (voicelab): {describe(stops)}")
            truth = product_stop_truth_ms(bundle, args.trials)
            if truth:
                print(f"{'':29s} fake's last speech sample sent: {describe(truth)}")
            talk = [m["turns"][0]["double_talk_ms"] for m in metrics
                    if m["turns"] and m["turns"][0]["double_talk_ms"] is not None]
            print(f"{'':29s} opening double_talk_ms: {describe(talk)}")
    echo = environment(folder, echo={"delay_ms": 60, "echo_return_loss_db": 20,
                                     "rir": {"rt60_ms": 250}})
    for label, value in (("with echo cancellation", "true"), ("without", "false")):
        _, metrics, _ = run(folder / f"echo-{value}", args.trials,
                            [script(), echo, f"endpoint.settings.echo_cancellation={value}",
                             "scenario.eval_spec.limits.max_time_seconds=25"])
        found = [s for m in metrics for s in m["self_interruptions"]]
        stopped = [s["after_product_speech_ms"] for s in found
                   if s["kind"] == "stopped" and s["after_product_speech_ms"] is not None]
        print(f"echo {label:24s} trials with a self-interruption: "
              f"{sum(bool(m['self_interruptions']) for m in metrics)}/{len(metrics)}; "
              f"stopped after {describe(stopped)}; "
              f"answered {sum(s['kind'] == 'answered' for s in found)}")
    print(f"bundles: {folder}")


if __name__ == "__main__":
    main()
