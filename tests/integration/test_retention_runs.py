"""A run's ``retention:``: audio kept for the trials that did not pass (or none), the
conversation's words redacted in every file written while verdicts are decided on the full
words; readers cope with a bundle without audio, and rescore and replay refuse it in one line.

Runs against the embedded fake product, unpaced; a small adapter (beside the run file) makes
every even trial fail: its reply says none of the scenario's expected topics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.analysis import load_frames, plot_timeline, retention_note, turn_audio_html
from voicelab.artifacts import RunReport, TrialReport, read_json
from voicelab.runner import RunOutcome

ROOT = Path(__file__).resolve().parents[2]
RUN = "run-workload-neutral-voice.yaml"
EMAIL = "jane.planted@example.com"
PHONE = "555-867-5309"
SAID = f"Please record the plan and save the reminder. Mail me at {EMAIL} or call {PHONE}."

@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, alternating_suite) -> Path:
    folder = tmp_path_factory.mktemp("suite")
    alternating_suite(folder, "alternating_product")
    script = folder / "script-workload-neutral-voice.yaml"
    script.write_text(script.read_text().replace(
        "Please record the plan and save the reminder.", SAID))
    return folder


def _run(suite: Path, out: Path, *overrides: str) -> RunOutcome:
    return voicelab.run(suite / RUN, voicelab.RunOptions(
        trials=2,
        artifacts_dir=out,
        overrides=[
        "endpoint.adapter=alternating_product.EvenTrialsFail", *overrides]))


def _wavs(trial_dir: Path) -> list[str]:
    return sorted(p.name for p in trial_dir.glob("*.wav"))


@pytest.fixture(scope="module")
def failed_only(suite: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    outcome = _run(suite, tmp_path_factory.mktemp("failed"), "retention.audio=failed")
    return outcome.bundle_path


def test_audio_is_kept_only_for_the_trial_that_did_not_pass(failed_only):
    passed = TrialReport.model_validate(read_json(failed_only / "trial-001" / "trial-report.json"))
    failed = TrialReport.model_validate(read_json(failed_only / "trial-002" / "trial-report.json"))
    assert passed.status == "passed" and failed.status == "failed"
    assert "expected_topics" in [v.name for v in failed.verdicts if not v.passed]

    assert _wavs(failed_only / "trial-001") == []
    assert passed.retention is not None and passed.retention.audio == "dropped"
    assert passed.retention.dropped_files == ["mixed.wav", "product-received.wav",
                                              "product.wav", "user-sent.wav", "user.wav"]
    assert passed.retention.audio_policy == "failed"
    assert passed.retention.transcripts == "full"
    # the report lists only what exists
    assert passed.files == sorted(p.name for p in (failed_only / "trial-001").iterdir())

    assert _wavs(failed_only / "trial-002") == ["mixed.wav", "product-received.wav",
                                                "product.wav", "user-sent.wav", "user.wav"]
    assert failed.retention is not None and failed.retention.audio == "kept"
    assert failed.retention.dropped_files == []
    assert set(_wavs(failed_only / "trial-002")) <= set(failed.files)

    run = RunReport.model_validate(read_json(failed_only / "run-report.json"))
    assert run.retention is not None
    assert (run.retention.audio, run.retention.audio_dropped_trials,
            run.retention.audio_kept_trials) == ("failed", 1, 1)
    settings = read_json(failed_only / "trial-001" / "resolved-settings.json")
    assert settings["resolved"]["retention"] == {"audio": "failed", "transcripts": "full",
                                                 "access": "owner"}


def test_readers_cope_with_a_bundle_without_audio(failed_only, tmp_path):
    frames = load_frames([failed_only])
    trials = frames.trials.set_index("trial_id")
    assert list(trials["audio_retained"]) == [False, True]
    assert len(frames.turns) > 0
    assert retention_note(failed_only / "trial-001") == "audio not retained (retention: failed)"
    assert retention_note(failed_only / "trial-002") is None
    shown = turn_audio_html(frames, frames.turns.head(4)).data
    assert "audio not retained (retention: failed)" in shown and "<audio" in shown
    plot_timeline(frames, trial_id="trial-001")  # the waveforms are missing, the rest is drawn

    from voicelab.analysis import write_report

    page = write_report([failed_only], output_path=tmp_path / "report.html")
    assert Path(page).is_file()


def test_rescore_and_replay_of_a_trial_without_its_audio_exit_2_in_one_line(failed_only,
                                                                             tmp_path):
    for command in (["rescore", str(failed_only), "--output", str(tmp_path / "again")],
                    ["replay", str(failed_only), "--artifacts-dir", str(tmp_path / "replays")]):
        done = subprocess.run([sys.executable, "-m", "voicelab", *command],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert str(failed_only / "trial-001") in lines[0]
        assert "audio not retained (retention: failed)" in lines[0]
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "again").exists()  # refused before anything was copied


def test_no_audio_at_all_and_redacted_words_with_the_same_verdicts(suite, tmp_path):
    full = _run(suite, tmp_path / "full")
    redacted = _run(suite, tmp_path / "redacted", "retention.audio=none",
                    "retention.transcripts=redacted")
    for trial in ("trial-001", "trial-002"):
        assert _wavs(redacted.bundle_path / trial) == []
        report = TrialReport.model_validate(
            read_json(redacted.bundle_path / trial / "trial-report.json"))
        assert report.retention is not None
        assert (report.retention.audio, report.retention.transcripts) == ("dropped", "redacted")
        before = read_json(full.bundle_path / trial / "trial-report.json")
        assert [(v.name, v.status) for v in report.verdicts] == \
            [(v["name"], v["status"]) for v in before["verdicts"]]
        # the full run kept the words (the planted strings reach the files without retention)
        assert EMAIL in (full.bundle_path / trial / "transcript.md").read_text()
    run = RunReport.model_validate(read_json(redacted.bundle_path / "run-report.json"))
    assert run.retention is not None and run.retention.audio_dropped_trials == 2
    assert [t.status for t in run.trials] == ["passed", "failed"]
    written = [p for p in redacted.bundle_path.rglob("*") if p.is_file()]
    assert len(written) > 20
    for path in written:
        text = path.read_bytes().decode("utf-8", errors="replace")
        assert EMAIL not in text and PHONE not in text, path
    transcript = read_json(redacted.bundle_path / "trial-001" / "transcript.json")
    said = [t["text"] for t in transcript["turns"] if t["role"] == "user"]
    assert said == ["Please record the plan and save the reminder. Mail me at [REDACTED] or "
                    "call [REDACTED]."]
    events = [json.loads(line) for line in
              (redacted.bundle_path / "trial-001" / "voice-events.jsonl").read_text().splitlines()]
    assert said[0] in [e["attributes"].get("text") for e in events
                       if e["event_type"] == "user.turn_started"]
    # the frames and the report read a bundle without any audio
    frames = load_frames([redacted.bundle_path])
    assert not frames.trials["audio_retained"].any()
    assert frames.trials["transcripts_redacted"].all()
