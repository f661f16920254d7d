"""Make the shipped "production calls": recorded calls whose callers are known to differ from
the notebooks' simulated ones, for notebooks/sim-vs-real.ipynb and its test.

The calls are made by voicelab itself against the embedded fake product, then mixed to stereo
the way a telephony platform records both legs (caller on channel 0, agent on channel 1, 8 kHz,
FLAC), each with its transcript. The callers differ on purpose from the plain simulated caller
of the notebook: they speak slower (persona speech rate 0.8), pause inside their turns (1.0,
1.4 and 0.8 s), barge in twice a call (0.6 s and 0.4 s into the agent's speech) and call from
a room with a steady hum (the office's hum, louder; no voices in the background: an energy
voice activity detector takes distant voices for the caller, see docs/ingest.md). The agent listens (``server_vad``), waits 1.8 s of silence
before it answers (so a pause is not taken for the end of a turn) and stops 150 ms into a
barge-in. Run from the checkout: ``python datasets/production-calls/make_calls.py``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml

import voicelab
from voicelab.ingest import write_stereo_call

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
CALLS = 6
TURNS = [
    {"response": "I need {pause: 1.0} a daily plan for tomorrow."},
    {"response": "Put the team meeting at nine {pause: 1.4} and lunch at noon.",
     "interrupt_after_seconds": 0.6},
    {"response": "Please record the plan {pause: 0.8} and save the reminder.",
     "interrupt_after_seconds": 0.4},
]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="production-calls-") as scratch:
        folder = Path(scratch)
        persona = yaml.safe_load((EXAMPLES / "persona-workload-neutral-voice.yaml").read_text())
        persona["speech"] = {"rate": 0.8, "rate_jitter": 0.1}
        run = {"scenario_path": str(EXAMPLES / "scenario-workload-neutral-voice.yaml"),
               "data_path": str(EXAMPLES / "data-workload-neutral-voice.yaml"),
               "environment_path": "environment.yaml",
               "persona_path": "persona.yaml", "script_path": "script.yaml",
               "persona_mode": "scripted", "speech_provider": "tone", "trial_seed": 101,
               "pace_audio": True, "concurrency": 3,
               "endpoint": {"adapter": "fake", "settings": {
                   "turn_taking": "server_vad", "complete_after_turns": 3,
                   "vad_silence_ms": 1800, "stop_on_speech_ms": 150}}}
        environment = {"name": "humming room", "impact": 1.0, "base_noise_volume": 0.15,
                       "base_noise": str(HERE.parent / "environments" / "office-hum.wav")}
        for name, document in (("persona.yaml", persona), ("run.yaml", run),
                               ("environment.yaml", environment),
                               ("script.yaml", {"post_script_completion_wait_seconds": 0,
                                                "turns": TURNS})):
            (folder / name).write_text(yaml.safe_dump(document), encoding="utf-8")
        outcome = voicelab.run(folder / "run.yaml", trials=CALLS,
                               artifacts_dir=folder / "artifacts")
        for old in HERE.glob("call-*"):
            old.unlink()
        for trial in sorted(outcome.bundle_path.glob("trial-*")):
            number = int(trial.name.split("-")[1])
            write_stereo_call(trial, HERE / f"call-{number:02d}.flac", sample_rate_hz=8000,
                              transcript=True)
        shutil.rmtree(folder / "artifacts", ignore_errors=True)
    print(f"{CALLS} calls in {HERE}")


if __name__ == "__main__":
    main()
