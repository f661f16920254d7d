"""Ingest against the truth: calls voicelab made against the fake product, mixed to stereo and
ingested; their metrics compared with the run's own, turn by turn. Also ingest's speed, and a
healthy and a broken product's calls judged by a run file's timing verdict.

    python benchmarks/bench_ingest.py [--trials 10] [--barge-ins 4] [--load 2]

``--load N`` keeps N busy processes beside everything (a loaded machine).
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path

import numpy as np

import voicelab
from voicelab.artifacts import read_json
from voicelab.ingest import ChannelMap, IngestOptions, ingest, write_stereo_call

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ('script.turns=[{"response": "I would like to plan my day."}, '
          '{"response": "Please record the plan {pause: 0.9} and save the reminder."}, '
          '{"response": "Thank you, that is all."}]')
PLAIN = ["speech_provider=espeak", SCRIPT, "endpoint.settings.complete_after_turns=3",
         "scenario.eval_spec.outcome_spec={}", "scenario.expected_topics=[]",
         "scenario.eval_spec.expected_exit=null"]
BARGE_IN = ["speech_provider=espeak",
            'script.turns=[{"response": "Wait, one thing first please.", '
            '"interrupt_after_seconds": 1.0}, {"response": "Save the reminder."}]',
            "endpoint.settings.complete_after_turns=2", "endpoint.settings.stop_on_speech_ms=300",
            "endpoint.settings.opening_text=Hello! Tell me your daily plan and the reminder you "
            "want saved, with the time and every detail, please.",
            "scenario.eval_spec.outcome_spec={}", "scenario.expected_topics=[]",
            "scenario.eval_spec.expected_exit=null"]


def _busy() -> None:
    while True:
        sum(i * i for i in range(10_000))


def _turns(trial: Path) -> dict[str, dict]:
    return {t["turn_id"]: t for t in read_json(trial / "voice-metrics.json")["turns"]}


def _stats(label: str, errors: list[float], unit: str = "ms") -> None:
    if not errors:
        print(f"{label}: none")
        return
    values = np.abs(np.asarray(errors))
    print(f"{label}: n={values.size} |p50| {np.percentile(values, 50):.1f} |p95| "
          f"{np.percentile(values, 95):.1f} max {values.max():.1f} {unit}")


def _ingested(run: Path, work: Path, *, rate: int = 8000) -> tuple[list[Path], Path, float]:
    trials = sorted(run.glob("trial-*"))
    calls = [write_stereo_call(t, work / "calls" / f"{t.name}.flac", sample_rate_hz=rate,
                               channels=ChannelMap(user=0, agent=1)) for t in trials]
    started = time.perf_counter()
    outcome = ingest(calls, artifacts_dir=work / "production",
                     options=IngestOptions(link_latest=False))
    return trials, outcome.bundle_path, time.perf_counter() - started


def accuracy(example: str, trials: int, work: Path) -> None:
    run = voicelab.run(ROOT / "examples" / example, voicelab.RunOptions(
        trials=trials,
        overrides=PLAIN,
        artifacts_dir=work / "runs")).bundle_path
    truths, ingested, seconds = _ingested(run, work)
    latency, structure, ratio = [], 0, []
    audio_seconds = 0.0
    for truth_dir in truths:
        call_dir = ingested / truth_dir.name
        truth, found = _turns(truth_dir), _turns(call_dir)
        structure += sorted(truth) != sorted(found)
        for turn_id, turn in truth.items():
            if turn_id in found and turn["response_latency_ms"] is not None \
                    and found[turn_id]["response_latency_ms"] is not None:
                latency.append(found[turn_id]["response_latency_ms"] - turn["response_latency_ms"])
        talk, measured = (read_json(d / "voice-metrics.json")["talk"] for d in (truth_dir, call_dir))
        ratio.append(100 * (measured["talk_ratio"] - talk["talk_ratio"]) / talk["talk_ratio"])
        audio_seconds += read_json(call_dir / "call.json")["duration_seconds"]
    print(f"{example}: {len(truths)} calls, {structure} with other turns than the run's")
    _stats("  response latency error", latency)
    _stats("  talk ratio error", ratio, unit="%")
    print(f"  ingest: {seconds:.2f} s for {audio_seconds:.0f} s of calls "
          f"({audio_seconds / seconds:.1f}x real time; no transcripts, so both legs' words are "
          f"recognized when pocketsphinx is installed)")


def barge_ins(trials: int, work: Path) -> None:
    run = voicelab.run(ROOT / "examples" / "run-listening.yaml", voicelab.RunOptions(
        trials=trials,
        overrides=BARGE_IN,
        concurrency=2,
        artifacts_dir=work / "listening")).bundle_path
    truths, ingested, _ = _ingested(run, work / "l")
    stop, after, found_count = [], [], 0
    for truth_dir in truths:
        truth = _turns(truth_dir)["turn-000"]
        found = _turns(ingested / truth_dir.name).get("turn-000", {})
        found_count += bool(found.get("interrupted"))
        if found.get("interrupted") and truth["interrupted"]:
            stop.append(found["interruption_stop_latency_ms"] - truth["interruption_stop_latency_ms"])
            after.append(found["barge_in_after_speech_ms"] - truth["barge_in_after_speech_ms"])
    print(f"barge-ins: {found_count}/{len(truths)} found")
    _stats("  stop latency error", stop)
    _stats("  barge-in point error", after)


def healthy_and_broken(work: Path) -> None:
    """A product answering in time and one answering after 2.5 s, both ingested and judged by a
    run file that bounds the first audio at 2 s."""
    work.mkdir(parents=True, exist_ok=True)
    run_file = work / "judge.yaml"
    run_file.write_text((ROOT / "examples" / "run-workload-neutral-voice.yaml").read_text()
                        .replace("scenario_path: ", f"scenario_path: {ROOT / 'examples'}/")
                        .replace("persona_path: ", f"persona_path: {ROOT / 'examples'}/")
                        .replace("data_path: ", f"data_path: {ROOT / 'examples'}/")
                        .replace("script_path: ", f"script_path: {ROOT / 'examples'}/"))
    judged = ["scenario.eval_spec.outcome_spec={}", "scenario.eval_spec.expected_exit=null",
              "scenario.expected_topics=[]", "scenario.eval_spec.max_first_audio_latency_ms=2000"]
    for name, latency in (("healthy", 0), ("broken", 2500)):
        run = voicelab.run(ROOT / "examples" / "run-workload-neutral-voice.yaml", voicelab.RunOptions(
            trials=5,
            overrides=[*PLAIN, f"endpoint.settings.reply_latency_ms={latency}"],
            artifacts_dir=work / name)).bundle_path
        calls = [write_stereo_call(t, work / f"{name}-calls" / f"{t.name}.wav")
                 for t in sorted(run.glob("trial-*"))]
        outcome = ingest(calls, artifacts_dir=work / f"{name}-production", run_file=run_file,
                         overrides=judged)
        failed = sorted({v for t in outcome.trials for v in t.summary.failed_verdicts})
        print(f"{name} product ({latency} ms): exit {outcome.exit_code}, "
              f"{outcome.report.passed_trials}/{outcome.report.trial_count} calls passed, "
              f"failed verdicts {failed or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--barge-ins", type=int, default=4)
    parser.add_argument("--load", type=int, default=0)
    parser.add_argument("--only", choices=("accuracy", "barge-ins", "judged"), default=None)
    args = parser.parse_args()
    busy = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for process in busy:
        process.start()
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as scratch:
        work = Path(scratch)
        if args.only in (None, "accuracy"):
            accuracy("run-workload-neutral-voice.yaml", args.trials, work / "quiet")
            accuracy("run-office-noise.yaml", args.trials, work / "office")
        if args.only in (None, "barge-ins"):
            barge_ins(args.barge_ins, work / "barge")
        if args.only in (None, "judged"):
            healthy_and_broken(work / "judged")
    for process in busy:
        process.terminate()


if __name__ == "__main__":
    main()
