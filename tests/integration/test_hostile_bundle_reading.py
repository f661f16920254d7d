"""Bundles are hostile input, read within bounds: every command that reads one (rescore,
replay, report, compare, run --resume) refuses oversized, deep, shifted or malformed members and
endless plans in one line with exit 2, names the record it refused, and stays in bounded memory
(the capped runs of _hostile_bundle.py). Links, writes, executables and the lock:
test_hostile_bundles.py.

The bundle is the seed suite's (``seed_run``: one real run per test process, conftest.py);
each test damages a copy (``seed_bundle``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _hostile_bundle import (
    RUN,
    capped,
    cli,
    refused,
    refused_capped,
    report_refused,
    report_refused_capped,
)

import voicelab
from voicelab.artifacts import check_bundle

# --- bounded reading --------------------------------------------------------------------------

def test_resume_of_an_endless_plan_is_refused_before_counting(seed_suite, seed_bundle):
    report = json.loads((seed_bundle / "run-report.json").read_text())
    report["planned_trials"] = report["trial_count"] = 10 ** 15
    (seed_bundle / "run-report.json").write_text(json.dumps(report))
    completed = capped("run", "--resume", str(seed_bundle), "--quiet", cwd=seed_suite)
    refused_capped(completed, "run-report.json", "planned_trials", "100,000")
    check_bundle(seed_bundle)  # a report shows the count, it never counts to it


def test_a_long_count_of_planned_trials_lets_a_signal_stop_it(seed_suite, seed_bundle):
    from voicelab.execution._resume import aresume_point

    report = json.loads((seed_bundle / "run-report.json").read_text())
    report["planned_trials"] = report["trial_count"] = 100_000
    (seed_bundle / "run-report.json").write_text(json.dumps(report))
    loaded = voicelab.load_run(seed_suite / RUN)

    async def count_and_cancel() -> None:
        task = asyncio.create_task(aresume_point(seed_bundle, loaded))
        for _ in range(3):  # the count lets the loop run: a signal handler would run here
            await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(count_and_cancel())


def _shift_events(path: Path, *, by_ns: int, fields: tuple[str, ...] = (
        "monotonic_offset_ns", "listener_offset_ns")) -> None:
    lines = []
    for number, line in enumerate(path.read_text().splitlines()):
        record = json.loads(line)
        for name in fields if number else ():  # the trial's start stays where it was
            record[name] += by_ns
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("fields", [("monotonic_offset_ns", "listener_offset_ns"),
                                    ("listener_offset_ns",)])
def test_event_stamps_shifted_by_hours_are_refused_within_bounded_memory(seed_bundle, fields):
    _shift_events(seed_bundle / "trial-002" / "voice-events.jsonl", by_ns=5 * 3600 * 10 ** 9,
                  fields=fields)
    refused_capped(capped("rescore", str(seed_bundle)), "voice-events.jsonl", "line 2",
                   fields[0], "at most 3,600 s")
    report_refused_capped(seed_bundle, "voice-events.jsonl", "line 2", fields[0], "at most 3,600 s")


def test_stamps_of_10_to_the_30_are_refused(seed_bundle, capsys):
    _shift_events(seed_bundle / "trial-001" / "voice-events.jsonl", by_ns=10 ** 30)
    refused(cli(capsys, "rescore", str(seed_bundle)), "voice-events.jsonl", "monotonic_offset_ns")
    report_refused(capsys, seed_bundle, "voice-events.jsonl", "monotonic_offset_ns")


def test_a_sample_count_beyond_the_stream_is_refused(seed_bundle, capsys):
    path = seed_bundle / "trial-001" / "voice-events.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    chunk = next(r for r in records if r["pcm"])
    chunk["pcm"]["byte_count"] = 10 ** 12
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    refused(cli(capsys, "rescore", str(seed_bundle)), "voice-events.jsonl", "pcm.byte_count")
    report_refused(capsys, seed_bundle, "voice-events.jsonl", "pcm.byte_count")


def test_a_sparse_2_gb_report_and_a_link_to_dev_zero_are_never_read_whole(seed_bundle, tmp_path):
    report = seed_bundle / "trial-001" / "trial-report.json"
    with report.open("r+b") as handle:
        handle.truncate(2 * 1024 ** 3)
    refused_capped(capped("rescore", str(seed_bundle)), "trial-report.json", "file too large")
    report_refused_capped(seed_bundle, "trial-report.json", "file too large")
    report.unlink()
    report.symlink_to("/dev/zero")
    refused_capped(capped("compare", str(seed_bundle), str(seed_bundle)), "trial-report.json",
                   "a symbolic link")
    report_refused_capped(seed_bundle, "trial-report.json", "a symbolic link")


def test_report_never_embeds_a_wav_linked_from_outside(seed_bundle, tmp_path, capsys):
    outside = tmp_path / "secret.wav"
    shutil.copy(seed_bundle / "trial-001" / "mixed.wav", outside)
    (seed_bundle / "trial-001" / "mixed.wav").unlink()
    (seed_bundle / "trial-001" / "mixed.wav").symlink_to(outside)
    refused(cli(capsys, "report", str(seed_bundle), "--output", str(tmp_path / "r.html")),
            "mixed.wav", "a symbolic link")
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("member", ["trial-001/trial-report.json", "run-report.json",
                                    "trial-001/resolved-scenario.json"])
def test_json_nested_100k_deep_exits_2(seed_bundle, member, capsys):
    (seed_bundle / member).write_text("[" * 100_000 + "]" * 100_000)
    refused(cli(capsys, "rescore", str(seed_bundle)), member.rpartition("/")[2], "nested")
    report_refused(capsys, seed_bundle, member.rpartition("/")[2], "nested")


def test_a_number_of_5000_digits_exits_2(seed_bundle, capsys):
    path = seed_bundle / "trial-001" / "trial-report.json"
    document = json.loads(path.read_text())
    path.write_text(json.dumps(document).replace('"seed": ', '"seed": ' + "9" * 5000 + ", "
                                                 '"was": ', 1))
    refused(cli(capsys, "rescore", str(seed_bundle)), "trial-report.json", "number")
    report_refused(capsys, seed_bundle, "trial-report.json", "number")


def test_compare_refuses_a_seed_of_text(seed_bundle, seed_run, capsys):
    path = seed_bundle / "trial-002" / "trial-report.json"
    document = json.loads(path.read_text())
    document["seed"] = "forty-three"
    path.write_text(json.dumps(document))
    refused(cli(capsys, "compare", str(seed_run), str(seed_bundle)), "trial-report.json", "seed",
            "whole number")
    report_refused(capsys, seed_bundle, "trial-report.json", "seed", "whole number")


# --- every record is checked where it is read ---------------------------------------------------

def _rewrite_event(path: Path, line: int, change) -> None:
    lines = path.read_text().splitlines()
    lines[line - 1] = change(json.loads(lines[line - 1]))
    path.write_text("\n".join(lines) + "\n")


def _first_audio_line(path: Path) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), start=1)
                if json.loads(line)["pcm"])


def _without(key: str):
    return lambda record: json.dumps({k: v for k, v in record.items() if k != key})


def _with(key: str, value: object):
    return lambda record: json.dumps({**record, key: value})


#: (what is wrong, the line it is on (0: the first audio chunk's), the change, words of the error)
BAD_RECORDS = [
    ("an empty object", 3, lambda record: "{}", ("contract_version", "missing")),
    ("only a version", 3, lambda record: '{"contract_version": "3.0"}', ("sequence", "missing")),
    ("an array", 3, lambda record: "[]", ("expected a JSON object",)),
    ("no offset", 3, _without("monotonic_offset_ns"), ("monotonic_offset_ns", "missing")),
    ("an offset of text", 3, _with("monotonic_offset_ns", "12"),
     ("monotonic_offset_ns", "whole number")),
    ("a fractional sequence", 3, _with("sequence", 2.5), ("sequence", "whole number")),
    ("a source that is an object", 3, _with("source", {"a": 1}), ("source", "text")),
    ("attributes that are a list", 3, _with("attributes", [1]), ("attributes", "object")),
    ("one line without a listener offset", 3, _without("listener_offset_ns"),
     ("listener_offset_ns", "some records")),
    ("a start time that is no time", 1, _with("timestamp_utc", "yesterday"),
     ("timestamp_utc", "ISO 8601")),
    ("a byte count of true", 0,
     lambda record: json.dumps({**record, "pcm": {**record["pcm"], "byte_count": True}}),
     ("pcm.byte_count", "whole number")),
]


@pytest.mark.parametrize(("line", "change", "words"), [case[1:] for case in BAD_RECORDS],
                         ids=[case[0] for case in BAD_RECORDS])
def test_a_malformed_event_record_is_refused_naming_its_line(seed_bundle, line, change, words,
                                                             capsys):
    from voicelab.analysis import load_frames
    from voicelab.artifacts import BundleMemberError

    path = seed_bundle / "trial-001" / "voice-events.jsonl"
    line = line or _first_audio_line(path)
    _rewrite_event(path, line, change)
    where = ("voice-events.jsonl", f"line {line}:", *words)
    refused(cli(capsys, "rescore", str(seed_bundle)), *where)
    report_refused(capsys, seed_bundle, *where)
    with pytest.raises(BundleMemberError, match=f"voice-events.jsonl: line {line}: {words[0]}"):
        load_frames(seed_bundle)


def test_an_empty_recording_is_malformed_input_not_a_failed_product(seed_bundle, capsys):
    from voicelab.analysis import load_frames
    from voicelab.artifacts import BundleMemberError

    (seed_bundle / "trial-001" / "voice-events.jsonl").write_bytes(b"")
    before = (seed_bundle / "trial-001" / "trial-report.json").read_bytes()
    refused(cli(capsys, "rescore", str(seed_bundle)), "voice-events.jsonl", "no events")
    assert (seed_bundle / "trial-001" / "trial-report.json").read_bytes() == before
    report_refused(capsys, seed_bundle, "voice-events.jsonl", "no events")
    with pytest.raises(BundleMemberError, match="no events"):
        load_frames(seed_bundle)


def test_a_member_name_that_is_not_utf8_is_refused_at_the_door(seed_suite, seed_bundle, capsys):
    with open(os.path.join(os.fsencode(seed_bundle / "trial-001"), b"\xff.json"), "wb") as handle:
        handle.write(b"{}")
    escaped = "trial-001/\\xff.json"
    for command in (["rescore", str(seed_bundle)], ["compare", str(seed_bundle), str(seed_bundle)],
                    ["replay", str(seed_bundle), "--quiet"],
                    ["run", str(seed_suite / RUN), "--resume", str(seed_bundle), "--quiet"]):
        refused(cli(capsys, *command), escaped, "not UTF-8")
    report_refused(capsys, seed_bundle, escaped, "not UTF-8")


def test_report_checks_the_bundle_before_the_notebook_imports(seed_bundle, tmp_path):
    _rewrite_event(seed_bundle / "trial-001" / "voice-events.jsonl", 3, lambda record: "{}")
    heavy = ("pandas", "matplotlib", "papermill", "nbconvert")
    program = ("import sys; from voicelab.cli import main; "
               f"code = main(['report', {str(seed_bundle)!r}, '--output', "
               f"{str(tmp_path / 'r.html')!r}]); "
               f"print(code, [m for m in {heavy!r} if m in sys.modules])")
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True,
                               text=True, timeout=120)
    assert completed.stdout.strip() == "2 []", completed.stdout + completed.stderr
    assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr
    assert "voice-events.jsonl: line 3: contract_version: missing" in completed.stderr
