"""Simulation against reality on real bundles: two small runs of the embedded fake product, one
plain caller and one who pauses mid-turn ({pause: 1.2}) and barges in (interrupt_after_seconds);
the second stands in for recorded production calls. The measurements agree with what the
scripts planted, and compare_realism names the pauses and the barge-ins, the right way round.
Each run takes about a second (pace_audio: false)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import voicelab
import voicelab.analysis as va
from voicelab.artifacts import read_voice_events

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRIALS = 6
PLAIN = [{"response": "I need a daily plan for tomorrow."},
         {"response": "Put the team meeting at nine and lunch at noon."},
         {"response": "Please record the plan and save the reminder."}]
HESITANT = [{"response": "I need {pause: 1.2} a daily plan for tomorrow."},
            {"response": "Put the team meeting at nine {pause: 1.2} and lunch at noon.",
             "interrupt_after_seconds": 0.6},
            {"response": "Please record the plan and save the reminder.",
             "interrupt_after_seconds": 0.4}]


def run(folder: Path, turns: list[dict]) -> Path:
    folder.mkdir(parents=True)
    script = {"post_script_completion_wait_seconds": 0, "turns": turns}
    config = {"scenario_path": str(EXAMPLES / "scenario-workload-neutral-voice.yaml"),
              "persona_path": str(EXAMPLES / "persona-workload-neutral-voice.yaml"),
              "data_path": str(EXAMPLES / "data-workload-neutral-voice.yaml"),
              "script_path": "script.yaml", "persona_mode": "scripted",
              "speech_provider": "tone", "trial_seed": 3, "pace_audio": False,
              "endpoint": {"adapter": "fake", "settings": {"complete_after_turns": 3}}}
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    (folder / "run.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    outcome = voicelab.run(folder / "run.yaml", voicelab.RunOptions(
        trials=TRIALS,
        artifacts_dir=folder / "out"))
    assert outcome.exit_code == 0
    return Path(outcome.bundle_path)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("realism")
    simulated, real = run(base / "plain", PLAIN), run(base / "hesitant", HESITANT)
    report = real / "run-report.json"  # what an ingest writes
    report.write_text(json.dumps({**json.loads(report.read_text()), "source": "production"}))
    return simulated, real


def test_the_measurements_agree_with_what_the_scripts_planted(bundles):
    simulated, real = bundles
    behaviour = va.caller_behaviour([simulated, real])
    assert list(behaviour.columns) == list(va.BEHAVIOUR_COLUMNS)
    assert set(behaviour["source"].astype(str)) == {"simulation", "production"}
    hesitant = behaviour[behaviour["source"] == "production"]
    plain = behaviour[behaviour["source"] == "simulation"]
    pauses = hesitant[hesitant["metric"] == "pause_ms"]
    # two pauses per call, each where user.turn_started says it is (10 ms frames)
    assert len(pauses) == 2 * TRIALS
    for trial, part in pauses.groupby("trial_id", observed=True):
        events = read_voice_events(real / str(trial) / "voice-events.jsonl")
        planted = [(end - start) / 24.0 for e in events
                   if e["event_type"] == "user.turn_started"
                   for start, end in e["attributes"].get("pauses") or []]
        assert sorted(part["value"]) == pytest.approx(sorted(planted), abs=20)
    assert plain[plain["metric"] == "pause_ms"].empty
    # turn length: the speech extents the runner recorded, pauses included
    turns = plain[plain["metric"] == "user_turn_ms"]
    assert len(turns) == 3 * TRIALS
    first = read_voice_events(simulated / "trial-001" / "voice-events.jsonl")
    recorded = [(e["attributes"]["speech_end_sample"] - e["attributes"]["speech_start_sample"])
                / 24.0 for e in first if e["event_type"] == "user.turn_started"]
    measured = turns[turns["trial_id"] == "trial-001"]["value"].tolist()
    assert measured == pytest.approx(recorded, abs=20)
    # barge-ins: two of the four responses (opening and three replies) of each hesitant call
    rates = hesitant[hesitant["metric"] == "barge_in_rate"]["value"]
    assert rates.tolist() == [0.5] * TRIALS
    assert plain[plain["metric"] == "barge_in_rate"]["value"].tolist() == [0.0] * TRIALS
    assert len(hesitant[hesitant["metric"] == "response_latency_ms"]) == 3 * TRIALS


def test_compare_realism_names_the_pauses_and_the_barge_ins(bundles):
    simulated, real = bundles
    report = va.compare_realism(simulated, real)
    table = report.table.set_index("metric")
    for metric, direction in (("turn_pause_ms", "real callers spend more of a turn pausing"),
                              ("barge_in_rate", "real callers barge in more often")):
        assert table.loc[metric, "differs"], metric
        assert table.loc[metric, "direction"] == direction
        assert table.loc[metric, "cliffs_delta"] > 0.6
    assert table.loc["pause_ms", "direction"] == "only the real calls has pause_ms"
    # the same quiet line on both sides: no environment difference worth a change
    assert not table.loc["speech_to_noise_db", "differs"]
    assert abs(table.loc["speech_to_noise_db", "shift"]) < 1.0
    realism = report.realism.set_index("metric")
    assert "script turns[].interrupt_after_seconds" in realism.loc["barge_in_rate", "change"]
    assert realism.loc["barge_in_rate", "change"].startswith("give it to more turns")
    assert realism.loc["turn_pause_ms", "change"].startswith(
        "add more or longer: script {pause: S} markers")
    summary = report.summary()
    assert "real callers barge in more often" in summary
    assert "real callers spend more of a turn pausing" in summary
