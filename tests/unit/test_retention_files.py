"""``retained_files``: which audio a trial keeps, how its words are redacted, what its report
says; the PII patterns; the run report's account; the readers' note."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voicelab.artifacts import (
    JudgeResult,
    Transcript,
    TranscriptTurn,
    TrialReport,
    audio_not_retained,
    encode_trial_files,
    require_retained_audio,
    write_json,
)
from voicelab.audio import PcmAudio
from voicelab.config import Redaction, RetentionConfig, SecretScrubber
from voicelab.errors import ConfigError
from voicelab.runner import retained_files
from voicelab.runner._retention import run_retention
from voicelab.scoring import transcript_redactor

EMAIL = "jane.planted@example.com"
PHONE = "+1 (555) 867-5309"
ACCOUNT = "ACC-77812"  # a sensitive field's value: no pattern matches it
SECRET = "s3cret-token-value-91"
SAID = f"Write to {EMAIL} or call {PHONE}; my account is {ACCOUNT}."
WAVS = ["mixed.wav", "product-received.wav", "product.wav", "user-sent.wav", "user.wav"]


def _report(status: str = "passed", **fields: Any) -> TrialReport:
    return TrialReport(
        trial=1, trial_id="trial-001", seed=42, session_id="session-001-20261202T110459Z-t001",
        scenario_id="x", persona="p", environment="quiet", adapter="fake",
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736", execution_status="succeeded",
        exit_reason="endpoint_completion", passed=status == "passed", status=status,
        started_at="2026-12-02T11:04:59.443Z", ended_at="2026-12-02T11:05:01.000Z",
        duration_seconds=1.5, **fields)


def _event(kind: str, attributes: dict[str, Any]) -> dict[str, Any]:
    return {"contract_version": "3.0", "event_id": "123e4567-e89b-12d3-a456-426614174000",
            "session_id": "session-001-20261202T110459Z-t001", "turn_id": "turn-001",
            "timestamp_utc": "2026-12-02T11:04:59.443245Z", "event_type": kind,
            "attributes": attributes}


def _files() -> list[Any]:
    transcript = Transcript(session_id="session-001", turns=[
        TranscriptTurn(turn_id="turn-001", index=0, role="user", text=SAID,
                       heard_as=f"right {EMAIL}"),
        TranscriptTurn(turn_id="turn-001", index=1, role="assistant",
                       text=f"I saved {PHONE} at 16:00 on 2026-12-02.")])
    events = [_event("user.turn_started", {"text": SAID, "speech_start_sample": 960,
                                           "trigger": "planning prompt"}),
              _event("product.audio_chunk", {"chunk_index": 5551234567}),
              _event("product.transcript", {"text": f"noted {EMAIL}"}),
              _event("product.tool_call", {"name": "save", "arguments_json": json.dumps(
                  {"account": ACCOUNT, "note": SAID})})]
    audio = {name: PcmAudio(np.zeros(240, dtype=np.int16)) for name in WAVS}
    return encode_trial_files(
        encoded={"voice-events.jsonl": b"".join(
            json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in events)},
        texts={"transcript.md": f"# x \u2014 trial-001 (seed 5551234567)\n\n- User: {SAID}\n",
               "product.log": f"heard {SAID} token={SECRET}\n"},
        audio=audio,
        documents={
            "transcript.json": transcript,
            "voice-metrics.json": {"schema_version": "3.0", "turns": [
                {"turn_id": "turn-001", "transcript": f"call {PHONE}", "byte_count": 386400,
                 "transcript_source": "wire"}]},
            "interoperability.json": {"schema_version": "3.0", "session_id": "session-001",
                                      "transcript": [{"text": SAID, "turn_id": "turn-001"}],
                                      "tool_calls": [{"arguments": {"account": ACCOUNT}}],
                                      "trial": {"seed": 5551234567}},
            "tool-calls.json": {"schema_version": "3.0", "tool_calls": [
                {"name": "save", "arguments": {"account": ACCOUNT, "note": SAID}}]},
            "raw-endpoint-events.json": {"schema_version": "3.0", "adapter": "fake", "events": [
                {"sequence": 1, "type": "transcript_final", "raw": {"text": SAID}},
                {"sequence": 2, "type": "audio_delta", "raw": {"delta": "AAAA5551234567"}}]},
            "persona-session.json": {"schema_version": "3.0", "messages": [SAID]},
            "resolved-script.json": {"schema_version": "3.0", "kind": "script",
                                     "resolved": {"turns": [{"response": SAID}]}},
            "resolved-data.json": {"schema_version": "3.0", "kind": "data",
                                   "resolved": {"customer": {"account": ACCOUNT}}},
            "resolved-scenario.json": {"schema_version": "3.0", "kind": "scenario",
                                       "resolved": {"id": "x", "description": "a plan"}},
        })


def _text(files: list[Any], name: str) -> str:
    content = dict(files)[name]
    return b"".join(bytes(part) for part in content).decode()


# --- audio ------------------------------------------------------------------------------------

def test_the_defaults_keep_every_file_and_say_nothing():
    files = _files()
    report = _report()
    kept, same = retained_files(files, report, RetentionConfig())
    assert kept == files and same is report and same.retention is None
    # a trial report that kept everything is written as before the field existed
    assert "retention" not in json.loads(report.model_dump_json())


@pytest.mark.parametrize(("policy", "status", "kept"), [
    ("failed", "passed", False), ("failed", "failed", True),
    ("failed", "inconclusive", True), ("none", "failed", False), ("none", "passed", False)])
def test_audio_is_kept_by_the_trials_status(policy, status, kept):
    files = _files()
    out, report = retained_files(files, _report(status), RetentionConfig(audio=policy))
    names = [name for name, _ in out]
    assert all((name in names) == kept for name in WAVS)
    assert [n for n in names if n not in WAVS] == [n for n, _ in files if n not in WAVS]
    assert report.retention is not None
    assert report.retention.audio == ("kept" if kept else "dropped")
    assert report.retention.dropped_files == ([] if kept else WAVS)
    assert report.retention.audio_policy == policy
    assert report.retention.transcripts == "full"
    # the words stay as they were said
    assert dict(out)["transcript.md"] == dict(files)["transcript.md"]
    assert _text(out, "voice-events.jsonl") == _text(files, "voice-events.jsonl")


def test_any_wav_of_the_trial_is_audio():
    files = [*_files(), ("user-heard.wav", PcmAudio(np.zeros(10, dtype=np.int16))),
             ("user-clean.wav", PcmAudio(np.zeros(10, dtype=np.int16)))]
    out, report = retained_files(files, _report(), RetentionConfig(audio="none"))
    assert not [name for name, _ in out if name.endswith(".wav")]
    assert report.retention is not None
    assert report.retention.dropped_files == sorted([*WAVS, "user-heard.wav", "user-clean.wav"])


# --- words ------------------------------------------------------------------------------------

def _redacted(**rules: Any) -> tuple[list[Any], TrialReport]:
    judge = JudgeResult(name="tone", status="passed", passed=True, critical=False,
                        sent={"transcript": [{"text": SAID}]}, kind="custom_judge")
    redactor = transcript_redactor(Redaction(**rules), scrubber=SecretScrubber([SECRET]))
    return retained_files(_files(), _report(judges=[judge]),
                          RetentionConfig(transcripts="redacted"), redactor=redactor)


def test_every_text_file_is_redacted():
    out, report = _redacted(sensitive_fields=["account"])
    # the run data too: one rule for every text of the bundle
    data = json.loads(_text(out, "resolved-data.json"))
    assert data["resolved"] == {"customer": {"account": "[REDACTED]"}}
    for name, content in out:
        if isinstance(content, PcmAudio):
            continue
        text = _text(out, name)
        for planted in (EMAIL, PHONE, "867-5309", ACCOUNT, SECRET):
            assert planted not in text, (name, planted)
    judge_sent = json.dumps(report.judges[0].sent)
    assert EMAIL not in judge_sent and "[REDACTED]" in judge_sent
    assert report.retention is not None and report.retention.transcripts == "redacted"
    assert report.retention.audio == "kept"  # audio: all
    transcript = json.loads(_text(out, "transcript.json"))
    assert transcript["turns"][0]["text"] == \
        "Write to [REDACTED] or call [REDACTED]; my account is [REDACTED]."
    assert transcript["turns"][0]["heard_as"] == "right [REDACTED]"
    # what is not PII stays: ids, stamps, clock times, dates, numbers outside the words
    assert transcript["turns"][1]["text"] == "I saved [REDACTED] at 16:00 on 2026-12-02."
    events = [json.loads(line) for line in _text(out, "voice-events.jsonl").splitlines()]
    assert [e["event_id"] for e in events] == ["123e4567-e89b-12d3-a456-426614174000"] * 4
    assert events[0]["attributes"]["speech_start_sample"] == 960
    assert events[0]["attributes"]["trigger"] == "planning prompt"
    assert events[1]["attributes"]["chunk_index"] == 5551234567
    assert events[2]["attributes"]["text"] == "noted [REDACTED]"
    # a text file is text: a number that looks like a phone number goes, even in a title
    assert _text(out, "transcript.md").startswith("# x \u2014 trial-001 (seed [REDACTED])\n")
    metrics = json.loads(_text(out, "voice-metrics.json"))
    assert metrics["turns"][0] == {"turn_id": "turn-001", "transcript": "call [REDACTED]",
                                   "byte_count": 386400, "transcript_source": "wire"}
    raw = json.loads(_text(out, "raw-endpoint-events.json"))
    assert raw["events"][1]["raw"] == {"delta": "AAAA5551234567"}  # audio is not words
    assert "token=***" in _text(out, "product.log")
    scenario = _text(out, "resolved-scenario.json")
    assert scenario == _text(_files(), "resolved-scenario.json")  # nothing to redact: as it was


def test_a_file_nobody_listed_is_redacted_by_its_kind():
    """The rule is by kind (JSON, JSON lines, text), not a list of names: a member added later
    is covered without anyone naming it."""
    extra = [("future-document.json", (json.dumps({"note": SAID, "n": 5551234567}).encode(),)),
             ("future-events.jsonl", (json.dumps({"said": SAID}).encode() + b"\n",)),
             ("call-notes.txt", (f"caller said {SAID}".encode(),))]
    redactor = transcript_redactor(Redaction(sensitive_fields=["account"]),
                                   scrubber=SecretScrubber([SECRET]))
    out, _ = retained_files([*_files(), *extra], _report(),
                            RetentionConfig(transcripts="redacted"), redactor=redactor)
    for name, _ in extra:
        text = _text(out, name)
        assert EMAIL not in text and PHONE not in text and ACCOUNT not in text, name
    assert json.loads(_text(out, "future-document.json"))["n"] == 5551234567  # a number


def test_the_report_is_redacted_too():
    """Verdict explanations, observed values, failures and the outcome hold words as well."""
    from voicelab.artifacts import ExecutionFailure, Verdict

    report = _report("failed", verdicts=[Verdict(
        name="entities_heard", passed=False, critical=True, status="failed",
        why=f"the product heard {PHONE} instead", observed={"phone": PHONE},
        expected=EMAIL)], failures=[ExecutionFailure(
            kind="endpoint", message=f"product error: unknown caller {EMAIL}")],
        outcome={"callback": PHONE, "account": 5551234567})
    redactor = transcript_redactor(Redaction(sensitive_fields=["account"]),
                                   scrubber=SecretScrubber([SECRET]))
    _, redacted = retained_files(_files(), report, RetentionConfig(transcripts="redacted"),
                                 redactor=redactor)
    text = redacted.model_dump_json()
    assert EMAIL not in text and PHONE not in text and "5551234567" not in text
    assert redacted.verdicts[0].why == "the product heard [REDACTED] instead"
    assert redacted.outcome == {"callback": "[REDACTED]", "account": "[REDACTED]"}
    assert redacted.seed == 42 and redacted.status == "failed"


def test_a_full_run_keeps_the_words_and_masks_its_secrets_everywhere():
    files = _files()
    extra = [("future-document.json", (json.dumps({"echo": f"token {SECRET}"}).encode(),))]
    report = _report(failures=[], outcome={"echoed": SECRET})
    out, same = retained_files([*files, *extra], report, RetentionConfig(),
                               redactor=transcript_redactor(
                                   Redaction(), scrubber=SecretScrubber([SECRET])).__class__(
                                   Redaction(), scrubber=SecretScrubber([SECRET])))
    assert same.retention is None and same.outcome == {"echoed": "***"}
    assert json.loads(_text(out, "future-document.json")) == {"echo": "token ***"}
    assert "token=***" in _text(out, "product.log")
    assert EMAIL in _text(out, "transcript.md")  # the words: kept as they were said
    # a file with no secret in it is the very bytes it was
    assert dict(out)["transcript.json"] == dict(files)["transcript.json"]


def test_the_configured_replacement_and_patterns_are_the_judges():
    out, _ = _redacted(patterns=[r"\bplan\w*"], replacement="<gone>")
    turns = json.loads(_text(out, "transcript.json"))["turns"]
    assert turns[0]["text"] == f"Write to <gone> or call <gone>; my account is {ACCOUNT}."
    script = json.loads(_text(out, "resolved-script.json"))
    assert script["resolved"]["turns"][0]["response"] == turns[0]["text"]


def test_a_redacted_trial_can_drop_its_audio_too():
    out, report = retained_files(_files(), _report("passed"),
                                 RetentionConfig(audio="failed", transcripts="redacted"))
    assert not [name for name, _ in out if name.endswith(".wav")]
    assert EMAIL not in _text(out, "transcript.json")
    assert report.retention is not None and report.retention.audio == "dropped"


@pytest.mark.parametrize(("text", "expected"), [
    ("mail a.b-c+d@mail.example.co.uk now", "mail [REDACTED] now"),
    ("call 555 867 5309.", "call [REDACTED]."),
    ("call (555) 867-5309", "call [REDACTED]"),
    ("card 4111 1111 1111 1111", "card [REDACTED]"),
    ("ssn 123-45-6789", "ssn [REDACTED]"),
    ("on 2026-12-02 at 16:00", "on 2026-12-02 at 16:00"),
    ("turn-001 of trial-002, 42 items, 123456", "turn-001 of trial-002, 42 items, 123456"),
    ("2026-12-02T11:04:59.443245Z", "2026-12-02T11:04:59.443245Z"),
    ("session-001-20261202T110459Z", "session-001-20261202T110459Z"),
])
def test_the_pii_patterns(text, expected):
    assert transcript_redactor().text(text) == expected


# --- the run report and the readers -----------------------------------------------------------

def test_the_run_report_counts_the_trials_whose_audio_was_dropped():
    retention = RetentionConfig(audio="failed")
    reports = [retained_files(_files(), _report(status), retention)[1]
               for status in ("passed", "failed", "passed", "inconclusive")]
    summary = run_retention(retention, reports)
    assert summary is not None
    assert (summary.audio, summary.transcripts, summary.audio_dropped_trials,
            summary.audio_kept_trials) == ("failed", "full", 2, 2)
    assert run_retention(RetentionConfig(), reports) is None


def test_a_trial_without_its_audio_is_refused_in_one_line(tmp_path: Path):
    _, report = retained_files(_files(), _report(), RetentionConfig(audio="none"))
    trial = tmp_path / "trial-001"
    trial.mkdir()
    write_json(trial / "trial-report.json", report)
    with pytest.raises(ConfigError) as raised:
        require_retained_audio(trial, purpose="re-scored")
    assert str(raised.value) == \
        f"{trial}: the trial cannot be re-scored: audio not retained (retention: none)"
    (trial / "user-sent.wav").write_bytes(b"")  # its audio is there: nothing to refuse
    require_retained_audio(trial, purpose="re-scored")


@pytest.mark.parametrize(("retention", "note"), [
    (None, None), ("dropped", None), ({"audio": "kept"}, None),
    ({"audio": "dropped", "audio_policy": "failed"}, "audio not retained (retention: failed)"),
    ({"audio": "dropped", "audio_policy": "\x1b[31m evil"}, "audio not retained (retention: ?)"),
])
def test_the_note_quotes_only_known_values(retention, note):
    assert audio_not_retained({"retention": retention}) == note


def test_a_wrong_value_is_refused_naming_the_key():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="audio"):
        RetentionConfig.model_validate({"audio": "some"})
    with pytest.raises(ValidationError, match="extra"):
        RetentionConfig.model_validate({"video": "all"})
