"""Bundles written by an earlier voicelab: read, and re-scored to the same bytes.

``tests/fixtures/bundle-2.0`` was written by the voicelab that wrote schema 2.0 (a run with turn
taking by commit: a barge-in into the opening, a stalled reply, input transcripts; a run with
listening turn taking over a telephony line both ways). Re-scoring it reproduces every file it
rewrites, byte for byte, but the schema version, in the current layout: the user's channel,
``technician.wav`` in 2.0, is ``user.wav``. The additions: voice-metrics.json gains the
``talk`` member (who talked how much), measured since; every byte before it is the same. And
the ``script_turns_said`` verdict, judged since: the client run's script had a second line
("Save it.") that no product response matched, so it was never said (the persona asked for a
repeat, the product completed the call) and that trial passed in 2.0; re-scored it fails.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import voicelab
from voicelab.analysis import load_frames, read_trial_audio
from voicelab.artifacts import (
    LEGACY_NAMES,
    SCHEMA_VERSION,
    TRIAL_REPORT,
    USER_WAV,
    VOICE_METRICS,
)
from voicelab.runner._rescore_trial import RESCORED_FILES

ROOT = Path(__file__).resolve().parents[2]
BUNDLE_2_0 = ROOT / "tests" / "fixtures" / "bundle-2.0"
RUNS = ("client", "listening")
#: Each member's name in 2.0.
OLD_NAMES = {name: old[0] for name, old in LEGACY_NAMES.items()}


def _same_but_version(old: bytes) -> bytes:
    """A 2.0 document as the current voicelab writes it: only the schema version differs."""
    for separator in (": ", ":"):  # pretty and compact documents
        old = old.replace(f'"schema_version"{separator}"2.0"'.encode(),
                          f'"schema_version"{separator}"{SCHEMA_VERSION}"'.encode())
    return old


def _without_talk(document: bytes) -> bytes:
    """voice-metrics.json without its ``talk`` member (the last one), as it is written."""
    parsed = json.loads(document)
    assert list(parsed)[-1] == "talk", list(parsed)
    del parsed["talk"]
    return json.dumps(parsed, indent=2, ensure_ascii=False).encode() + b"\n"


def _report_as_now(old: bytes) -> dict:
    """A 2.0 trial report as re-scoring writes it: the current version, the renamed members."""
    report = json.loads(old)
    report["schema_version"] = report["interoperability_schema_version"] = SCHEMA_VERSION
    report["voice_event_schema_versions"] = [SCHEMA_VERSION]
    renamed = {old_name: name for name, old_name in OLD_NAMES.items()}
    report["files"] = sorted(renamed.get(name, name) for name in report["files"])
    return report


#: The verdict judged since 2.0, and what it says of each run's trial.
NEW_VERDICT = "script_turns_said"
NEW_VERDICT_STATUS = {"client": "failed", "listening": "passed"}
#: What a trial's pass or failure decides in a run report.
PASS_FIELDS = ("pass_power_k", "pass_at_k", "passed_trials", "pass_rate", "pass_curve",
               "exit_code")


def _without_new_verdict(document: dict) -> dict:
    """A report without the verdict judged since 2.0 (and without what it decided)."""
    document = json.loads(json.dumps(document))
    document["verdicts"] = [v for v in document.get("verdicts", []) if v["name"] != NEW_VERDICT]
    if "verdict_pass_rates" in document:
        document["verdict_pass_rates"] = [v for v in document["verdict_pass_rates"]
                                          if v["name"] != NEW_VERDICT]
    if not document["verdicts"]:
        del document["verdicts"]
    # run report fields added since, at their value for a run they change nothing in
    for name, nothing in (("unjudged_trials", 0), ("measurement_warnings", [])):
        if document.get(name, nothing) == nothing:
            document.pop(name, None)
    return document


def test_a_2_0_bundle_is_read():
    frames = load_frames([BUNDLE_2_0 / run for run in RUNS])
    assert len(frames.trials) == 2 and frames.trials["passed"].all()
    assert len(frames.turns) >= 5 and frames.events["listener_ms"].notna().all()
    # its user channel, under its 2.0 name, and under the name before it
    trial = BUNDLE_2_0 / "client" / "trial-001"
    user, _ = read_trial_audio(trial, channel="user")
    assert user.size and (user == read_trial_audio(trial, channel="technician")[0]).all()


def test_a_2_0_bundle_rescores_to_the_same_bytes_but_the_version(tmp_path):
    result = voicelab.rescore(BUNDLE_2_0, output=tmp_path / "again")
    assert sorted(str(t.trial_dir.relative_to(tmp_path / "again")) for t in result.trials) == \
        ["client/trial-001", "listening/trial-001"]
    assert result.exit_code == 3  # the client trial's unsaid script line
    assert [t.changed_verdicts for t in result.trials] == [[NEW_VERDICT], [NEW_VERDICT]]
    for run in RUNS:
        old, new = BUNDLE_2_0 / run / "trial-001", tmp_path / "again" / run / "trial-001"
        for name in RESCORED_FILES:
            original = (old / OLD_NAMES.get(name, name)).read_bytes()
            again = (new / name).read_bytes()
            if name == TRIAL_REPORT:
                report = json.loads(again)
                said = next(v for v in report["verdicts"] if v["name"] == NEW_VERDICT)
                assert said["status"] == NEW_VERDICT_STATUS[run], (run, said)
                expected = _report_as_now(original)
                if run == "client":
                    assert "turns[1]: 'Save it.'" in said["why"]
                    assert (report["status"], report["passed"]) == ("failed", False)
                    report.update(status=expected["status"], passed=expected["passed"])
                assert _without_new_verdict(report) == _without_new_verdict(expected), run
            elif name == VOICE_METRICS:
                assert _without_talk(again) == _same_but_version(original), run
                talk = json.loads(again)["talk"]
                assert talk["user_talk_ms"] > 0 and talk["product_talk_ms"] > 0, (run, talk)
                assert talk["product_words_per_minute"] > 0, (run, talk)
            elif name == "interoperability.json":
                document = json.loads(again)
                if run == "client":
                    assert document["trial"]["passed"] is False
                    document["trial"]["passed"] = True
                assert json.dumps(_without_new_verdict(document)) == json.dumps(
                    _without_new_verdict(json.loads(_same_but_version(original)))), run
            else:
                assert again == _same_but_version(original), (run, name)
        assert not (new / OLD_NAMES[USER_WAV]).exists()  # renamed, not kept twice
        assert sorted(p.name for p in new.iterdir()) == json.loads(
            (new / TRIAL_REPORT).read_bytes())["files"]
        rescored = json.loads((tmp_path / "again" / run / "run-report.json").read_bytes())
        original_report = json.loads(_same_but_version(
            (BUNDLE_2_0 / run / "run-report.json").read_bytes()))
        if run == "client":
            assert (rescored["exit_code"], rescored["passed_trials"]) == (3, 0)
            assert rescored["trials"][0]["failed_verdicts"] == [NEW_VERDICT]
            rescored.update({key: original_report[key] for key in PASS_FIELDS})
            rescored["trials"] = original_report["trials"]
        assert _without_new_verdict(rescored) == _without_new_verdict(original_report), run


def test_a_2_0_bundle_rescored_in_place_keeps_its_raw_facts(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(BUNDLE_2_0 / "listening", copy)
    raw = ("voice-events.jsonl", "user-sent.wav", "product-received.wav", "user-heard.wav",
           "raw-endpoint-events.json", "resolved-scenario.json")
    before = {name: (copy / "trial-001" / name).read_bytes() for name in raw}
    voicelab.rescore(copy)
    assert {name: (copy / "trial-001" / name).read_bytes() for name in raw} == before
