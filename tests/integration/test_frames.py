"""load_frames on real bundles written by the runner (clean, faulted, judged, matrix runs)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import voicelab
from voicelab.analysis import Frames, calibration, load_frames, save_labels
from voicelab.analysis._labels import label_rows
from voicelab.artifacts import ArtifactVersionError
from voicelab.doubles.openai import JudgePolicy, ModelCall, OpenAIServer
from voicelab.errors import ConfigError
from voicelab.runner import RunOutcome

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SUITE = ROOT / "examples" / "sweep-workload-neutral.yaml"


def run_example(artifacts: Path, *overrides: str, trials: int = 1) -> RunOutcome:
    loaded = voicelab.load_run(EXAMPLE, overrides=list(overrides))
    return asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=trials,
        artifacts_dir=artifacts)))


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[RunOutcome, Frames]:
    outcome = run_example(tmp_path_factory.mktemp("clean"), trials=3)
    return outcome, load_frames(outcome.bundle_path)


def test_trials_frame_has_one_typed_row_per_trial(clean):
    outcome, frames = clean
    trials = frames.trials
    assert list(trials["trial_id"]) == ["trial-001", "trial-002", "trial-003"]
    assert list(trials["seed"]) == [42, 43, 44]
    assert (trials["run_id"] == outcome.report.run_id).all()
    assert trials["cell"].isna().all() and trials["matrix_id"].isna().all()
    for column in ("run_id", "trial_id", "scenario_id", "persona", "environment", "exit_reason",
                   "execution_status"):
        assert isinstance(trials[column].dtype, pd.CategoricalDtype), column
    assert trials["passed"].dtype == bool and trials["passed"].all()
    assert str(trials["started_at"].dtype) == "datetime64[ns, UTC]"
    summary = {s.trial_id: s for s in outcome.report.trials}
    for row in trials.itertuples():
        assert row.first_audio_latency_ms_p50 == summary[row.trial_id].first_audio_latency_ms_p50
        assert Path(row.path) == outcome.bundle_path / row.trial_id
        assert (Path(row.path) / "mixed.wav").is_file()
    assert frames.runs["passed_trials"].tolist() == [3]
    assert frames.trial_dir(trial_id="trial-002") == outcome.bundle_path / "trial-002"


def test_turns_frame_flattens_every_voice_metric(clean):
    outcome, frames = clean
    turns = frames.turns
    expected = []
    for trial in ("trial-001", "trial-002", "trial-003"):
        document = json.loads((outcome.bundle_path / trial / "voice-metrics.json").read_text())
        expected.extend((trial, turn) for turn in document["turns"])
    assert len(turns) == len(expected) == 6
    for (trial, turn), row in zip(expected, turns.itertuples(index=False), strict=True):
        assert row.trial_id == trial and row.turn_id == turn["turn_id"]
        for key, value in turn.items():
            if isinstance(value, dict):
                for inner, inner_value in value.items():
                    assert getattr(row, f"{key}_{inner}") == inner_value, (key, inner)
            elif value is None and key in ("input", "output"):  # flattened columns are NA
                assert pd.isna(getattr(row, f"{key}_duration_seconds")), key
            elif value is None and key == "speech":  # no speech metrics anywhere: no column
                assert "speech" not in turns.columns
            elif value is None:
                assert pd.isna(getattr(row, key)), key
            else:
                assert getattr(row, key) == value, key
    opening = turns[turns["turn_id"] == "turn-000"]
    assert opening["input_duration_seconds"].isna().all()  # the opening answers no user turn
    assert opening["user_start_ms"].isna().all()
    assert str(turns["input_byte_count"].dtype) == "Int64"
    assert turns["output_possible_truncation"].dtype == bool
    reply = turns[turns["turn_id"] == "turn-001"]
    assert (reply["user_commit_ms"] > reply["user_start_ms"]).all()
    assert (reply["playback_start_ms"] > reply["user_commit_ms"]).all()


def test_events_frame_is_the_timeline_on_both_clocks(clean):
    outcome, frames = clean
    events = frames.events
    records = read_lines(outcome.bundle_path / "trial-002" / "voice-events.jsonl")
    mine = events[events["trial_id"] == "trial-002"]
    assert len(mine) == len(records)
    assert mine["sequence"].tolist() == [r["sequence"] for r in records]
    assert mine["event_type"].astype(str).tolist() == [r["event_type"] for r in records]
    np.testing.assert_allclose(mine["listener_ms"], [r["listener_offset_ns"] / 1e6
                                                     for r in records], rtol=0, atol=1e-9)
    # the listener clock is real time plus the virtual advances recorded before each event
    advanced = 0
    for record in records:
        assert record["listener_offset_ns"] == record["monotonic_offset_ns"] + advanced
        if record["event_type"] == "timeline.virtual_advance":
            advanced += record["attributes"]["advance_ns"]
    np.testing.assert_allclose(mine["offset_ms"], [r["offset_ms"] for r in records], atol=5e-4)
    recorded = pd.DatetimeIndex(pd.to_datetime([r["timestamp_utc"] for r in records], utc=True))
    # timestamps are rebuilt from one wall time per trial; the strings carry microseconds
    assert np.abs(pd.DatetimeIndex(mine["timestamp_utc"]).asi8 - recorded.asi8).max() <= 1000
    chunks = mine[mine["event_type"] == "product.audio_chunk"]
    assert (chunks["pcm_byte_count"] > 0).all() and (chunks["pcm_duration_ms"] > 0).all()
    assert mine[mine["event_type"] == "trial.started"]["pcm_byte_count"].isna().all()
    calls = mine[mine["event_type"] == "product.tool_call"]
    assert calls["attributes"].iloc[0]["name"] == "save_reminder"
    first_user = mine[mine["event_type"] == "user.audio_chunk"]["listener_ms"].min()
    turn = frames.turns[(frames.turns["trial_id"] == "trial-002")
                        & (frames.turns["turn_id"] == "turn-001")]
    assert turn["user_start_ms"].iloc[0] == pytest.approx(first_user)


def test_verdicts_are_long_format(clean):
    _, frames = clean
    verdicts = frames.verdicts
    assert len(verdicts) == 18  # 3 trials x 6 verdicts
    assert set(verdicts["name"].astype(str)) == {
        "expected_topics", "expected_exit", "concise", "outcome_follow_up_created",
        "outcome_report_fields_complete", "script_turns_said"}
    assert verdicts["passed"].all() and verdicts["critical"].dtype == bool
    assert frames.judges.empty
    assert set(calibration.JUDGE_RESULT_COLUMNS) <= set(frames.judges.columns)


def test_stall_shows_as_playback_stall_and_dead_air(tmp_path):
    outcome = run_example(tmp_path, "endpoint.settings.stall_ms=1500",
                          "endpoint.settings.stall_after_seconds=0.5",
                          "endpoint.settings.stall_on_response=2")
    frames = load_frames(outcome.bundle_path)
    opening, reply = (frames.turns[frames.turns["turn_id"] == t].iloc[0]
                      for t in ("turn-000", "turn-001"))
    assert opening["playback_stall_ms"] == 0
    # 0.5 s of audio arrives at once, then nothing for 1.5 s: the listener waits ~1.0 s
    assert reply["playback_stall_ms"] == pytest.approx(1000, abs=80)
    assert reply["dead_air_ms"] >= 950
    assert frames.trials["playback_stall_ms_max"].iloc[0] == reply["playback_stall_ms"]


def test_clipping_shows_in_the_output_signal_columns(tmp_path):
    clipped = load_frames(run_example(tmp_path / "clip", "endpoint.settings.clip=true")
                          .bundle_path)
    assert (clipped.turns["output_clipped_sample_ratio"] > 0.01).all()
    clean = load_frames(run_example(tmp_path / "clean").bundle_path)
    assert (clean.turns["output_clipped_sample_ratio"] == 0).all()


def test_barge_in_shows_in_turns_and_events(tmp_path):
    outcome = run_example(
        tmp_path, 'script.turns=[{"response": "Wait, one thing first.", "keywords": '
        '["daily plan"], "interrupt_after_seconds": 1.0}]',
        "endpoint.settings.audio_pacing=realtime", "endpoint.settings.pacing_speed=4")
    frames = load_frames(outcome.bundle_path)
    opening = frames.turns[frames.turns["turn_id"] == "turn-000"].iloc[0]
    assert bool(opening["interrupted"]) and opening["status"] == "cancelled"
    assert opening["interruption_stop_latency_ms"] >= 0
    barge = frames.events[frames.events["event_type"] == "user.barge_in"]
    assert len(barge) == 1
    assert opening["playback_start_ms"] < barge["listener_ms"].iloc[0]


def test_execution_failure_is_a_row_not_an_error(tmp_path):
    outcome = run_example(tmp_path, "endpoint.settings.close_mid_response=2")
    trial = load_frames(outcome.bundle_path).trials.iloc[0]
    assert trial["execution_status"] == "failed"
    assert trial["exit_reason"] == "connection_closed"
    assert trial["failure_kinds"] == "endpoint" and trial["failure_count"] == 1
    assert isinstance(trial["failure_message"], str)


def _fail_politeness(call: ModelCall) -> str | None:
    return "fail" if "Be polite" in call.text else None


def test_judges_frame_joins_human_labels(tmp_path):
    with OpenAIServer(JudgePolicy(rules=[_fail_politeness])) as server:
        outcome = run_example(
            tmp_path, f"providers.openai.base_url={server.base_url}",
            "providers.openai.api_key=sk-test", "providers.openai.model=judge-model",
            "quality_evaluation.provider=openai",
            'quality_evaluation.custom_judges=[{"name": "polite", "criteria": "Be polite"}, '
            '{"name": "on_topic", "criteria": "Stay on the daily plan"}]', trials=2)
    frames = load_frames(outcome.bundle_path)
    judges = frames.judges
    assert len(judges) == 4 and "sent" not in judges.columns
    by_name = judges.groupby("name", observed=True)["passed"].all()
    assert not by_name["polite"] and by_name["on_topic"]
    assert (judges["kind"] == "custom_judge").all() and judges["label"].notna().all()
    assert frames.trials["failed_judges"].eq("polite").all()
    labels = save_labels(tmp_path / "labels.csv", pd.concat([
        label_rows(run_id=outcome.report.run_id, trial_id=trial, annotator="ana",
                   labels={"polite": "pass", "on_topic": "pass"})
        for trial in ("trial-001", "trial-002")]))
    joined = calibration.join_labels(labels, judges)
    assert len(joined) == 4
    report = calibration.calibrate(joined, criterion="polite")
    assert (report.tp, report.fn) == (0, 2)  # humans said pass, the judge said fail


def test_matrix_run_has_cells(tmp_path):
    outcome = asyncio.run(voicelab.arun_matrix(SUITE, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path)))
    frames = load_frames(outcome.run_dir)
    cells = {cell.cell_id for cell in outcome.report.cells}
    assert set(frames.trials["cell"].astype(str)) == cells and len(frames.trials) == 4
    assert (frames.trials["matrix_id"] == outcome.report.run_id).all()
    assert set(frames.turns["cell"].astype(str)) == cells
    assert set(frames.events["cell"].astype(str)) == cells
    grouped = frames.trials.groupby(["persona", "environment"], observed=True).size()
    assert grouped.tolist() == [1, 1, 1, 1]
    # the artifacts root (with its `latest` link) finds the same trials once
    again = load_frames(tmp_path)
    assert len(again.trials) == 4


def test_paths_trial_folders_and_events_switch(clean, tmp_path):
    outcome, frames = clean
    other = run_example(tmp_path)
    both = load_frames([outcome.bundle_path, other.bundle_path])
    assert len(both.trials) == 4 and both.trials["run_id"].nunique() == 2
    single = load_frames(outcome.bundle_path / "trial-003")
    assert single.trials["trial_id"].tolist() == ["trial-003"]
    assert single.trials["run_id"].iloc[0] == outcome.report.run_id
    light = load_frames(outcome.bundle_path, events=False)
    assert light.events.empty and "user_start_ms" not in light.turns.columns
    assert len(light.turns) == len(frames.turns)
    assert list(light.events.columns) == list(frames.events.columns)


def test_refuses_newer_schema_and_missing_paths(clean, tmp_path):
    outcome, _ = clean
    copy = tmp_path / "copy"
    shutil.copytree(outcome.bundle_path / "trial-001", copy / "trial-001")
    report_path = copy / "trial-001" / "trial-report.json"
    report = json.loads(report_path.read_text())
    report["schema_version"] = "4.0"
    report_path.write_text(json.dumps(report))
    with pytest.raises(ArtifactVersionError, match="newer"):
        load_frames(copy)
    with pytest.raises(ConfigError, match="no such run directory"):
        load_frames(tmp_path / "missing")
