"""Bundles are hostile input: every command that reads one (rescore, replay, report, compare,
run --resume) refuses links, devices and oversized or malformed members in one line with exit 2,
never writes through a link, never runs what a bundle names, and stays in bounded memory.

The bundle is the seed suite's (``seed_run``: one real run per test process, conftest.py);
each test damages a copy (``seed_bundle``).
Commands run in-process (``voicelab.cli.main``) where the outcome is a line and a code, and as a
subprocess with a capped address space (``RLIMIT_AS``) where a regression would allocate
gigabytes: it then fails with a MemoryError instead of swapping. ``report`` reads every hostile
bundle too: it checks the bundle at the door (``check_bundle``), before the notebook's imports
and kernel, so a malformed one is refused in one line with nothing written; one that is only
data to it (a launch command, a class path, a run file it names) passes the door.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import BundleLock, check_bundle
from voicelab.cli import main

ROOT = Path(__file__).resolve().parents[2]
#: The seed suite's run file (``seed_suite``, ``seed_run``: conftest.py).
RUN = "run-workload-neutral-voice.yaml"
#: Far above what re-scoring a short bundle needs (~0.7 GB of address space), far below the
#: gigabytes the audited inputs allocated.
ADDRESS_SPACE_BYTES = 2 * 1024 ** 3


def cli(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    code = main([*arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(result: tuple[int, str, str], *words: str) -> str:
    code, _, err = result
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("voice-evaluator: error: "), err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def capped(*arguments: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *arguments], capture_output=True,
                          text=True, timeout=120, preexec_fn=_cap_memory, cwd=cwd)


def refused_capped(completed: subprocess.CompletedProcess[str], *words: str) -> str:
    return refused((completed.returncode, completed.stdout, completed.stderr), *words)


def report_refused(capsys: pytest.CaptureFixture[str], bundle: Path, *words: str) -> str:
    """``report`` refuses the bundle at the door: one line, exit 2, no page and no partially
    executed notebook beside it."""
    page = bundle.parent / "report.html"
    line = refused(cli(capsys, "report", str(bundle), "--output", str(page)), *words)
    assert not page.exists() and not page.with_suffix(".ipynb").exists()
    return line


def report_refused_capped(bundle: Path, *words: str) -> str:
    page = bundle.parent / "report.html"
    line = refused_capped(capped("report", str(bundle), "--output", str(page)), *words)
    assert not page.exists() and not page.with_suffix(".ipynb").exists()
    return line


# --- writes never follow a link ---------------------------------------------------------------

def test_rescore_refuses_a_linked_member_and_leaves_its_target_alone(seed_bundle, tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    member = seed_bundle / "trial-001" / "transcript.md"
    member.unlink()
    member.symlink_to(victim)
    line = refused(cli(capsys, "rescore", str(seed_bundle)), "transcript.md", "a symbolic link")
    assert "regular file" in line
    line = refused(cli(capsys, "rescore", str(seed_bundle), "--output", str(tmp_path / "copy")),
                   "transcript.md")
    report_refused(capsys, seed_bundle, "transcript.md", "a symbolic link")
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "copy").exists()


def test_rescore_refuses_a_linked_trial_folder(seed_bundle, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    shutil.move(seed_bundle / "trial-002", elsewhere)
    (seed_bundle / "trial-002").symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.iterdir())
    refused(cli(capsys, "rescore", str(seed_bundle)), "trial-002", "a symbolic link")
    report_refused(capsys, seed_bundle, "trial-002", "a symbolic link")
    assert sorted(p.name for p in elsewhere.iterdir()) == before


def test_a_member_is_written_by_replacing_the_link_never_through_it(tmp_path):
    from voicelab.artifacts import write_member

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    member = tmp_path / "transcript.md"
    member.symlink_to(victim)
    write_member(member, b"new\n")
    assert victim.read_text() == "precious\n"
    assert not member.is_symlink() and member.read_text() == "new\n"


def test_resume_refuses_a_linked_evaluator_log(seed_suite, seed_bundle, tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (seed_bundle / "evaluator.log").unlink()
    (seed_bundle / "evaluator.log").symlink_to(victim)
    refused(cli(capsys, "run", str(seed_suite / RUN), "--resume", str(seed_bundle), "--quiet"),
            "evaluator.log", "a symbolic link")
    report_refused(capsys, seed_bundle, "evaluator.log", "a symbolic link")
    assert victim.read_text() == "precious\n"


def test_a_bundle_log_is_never_appended_through_a_link(tmp_path):
    from voicelab.artifacts import BundleMemberError, open_member_append

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "evaluator.log").symlink_to(victim)
    with pytest.raises(BundleMemberError, match="symbolic link"):
        open_member_append(tmp_path / "evaluator.log")
    assert victim.read_text() == "precious\n"


# --- output targets ---------------------------------------------------------------------------

@pytest.fixture()
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_output_targets_refuse_a_fifo_a_folder_and_a_link(seed_run, seed_suite, fifo, tmp_path,
                                                          capsys):
    link = tmp_path / "link.xml"
    link.symlink_to(tmp_path / "elsewhere.xml")
    for target, what in ((fifo, "named pipe"), (tmp_path, "folder"), (link, "symbolic link")):
        refused(cli(capsys, "compare", str(seed_run), str(seed_run), "--junit", str(target)),
                str(target), what)
        refused(cli(capsys, "compare", str(seed_run), str(seed_run), "--output", str(target)),
                str(target), what)
        refused(cli(capsys, "compare", str(seed_run), str(seed_run), "--html", str(target)),
                "--html", what)
        refused(cli(capsys, "report", str(seed_run), "--output", str(target)), "--output", what)
    refused(cli(capsys, "run", str(seed_suite / RUN), "--junit", str(fifo), "--quiet",
                "--artifacts-dir", str(tmp_path / "runs")), "--junit", "named pipe")
    assert not (tmp_path / "runs").exists()  # refused before anything ran
    assert fifo.exists() and not fifo.is_file() and not (tmp_path / "elsewhere.xml").exists()


def test_rescore_output_must_be_a_new_path_or_an_empty_folder(seed_bundle, fifo, capsys):
    refused(cli(capsys, "rescore", str(seed_bundle), "--output", str(fifo)), "--output",
            "named pipe")
    assert fifo.exists() and not fifo.is_file()


def test_atomic_replacement_never_replaces_a_device_node(tmp_path):
    from voicelab._atomic import atomic_write
    from voicelab.errors import ConfigError

    with pytest.raises(ConfigError, match="a device"):
        atomic_write(Path("/dev/null"), b"x")
    assert Path("/dev/null").is_char_device()


# --- nothing executable is taken from a bundle ------------------------------------------------

def _recorded_settings(bundle: Path) -> tuple[Path, dict]:
    path = bundle / "trial-001" / "resolved-settings.json"
    return path, json.loads(path.read_text())


def test_replay_never_runs_a_launch_command_a_bundle_names(seed_bundle, tmp_path, capsys):
    marker = tmp_path / "ran"
    for trial in ("trial-001", "trial-002"):
        path = seed_bundle / trial / "resolved-settings.json"
        document = json.loads(path.read_text())
        document["resolved"]["endpoint"]["launch"] = {
            "command": ["/bin/sh", "-c", f"touch {marker}; echo ready"],
            "ready_pattern": "ready", "per": "run"}
        path.write_text(json.dumps(document))
    line = refused(cli(capsys, "replay", str(seed_bundle), "--quiet"), "endpoint.launch",
                   "never runs a command a bundle names")
    assert "--run-file" in line
    # to the report a launch command is data: the page is written and nothing runs
    code, _, err = cli(capsys, "report", str(seed_bundle), "--output", str(tmp_path / "r.html"))
    assert code == 0, err
    assert (tmp_path / "r.html").is_file()
    assert not marker.exists()


def test_replay_never_imports_an_adapter_class_a_bundle_names(seed_bundle, tmp_path, capsys):
    path, document = _recorded_settings(seed_bundle)
    document["resolved"]["endpoint"]["adapter"] = "os.system"
    path.write_text(json.dumps(document))
    refused(cli(capsys, "replay", str(seed_bundle), "--quiet"), "endpoint.adapter", "class path")
    path, document = _recorded_settings(seed_bundle)
    document["resolved"]["endpoint"]["adapter"] = "fake"
    document["resolved"]["outcome_probe"] = {"probe": "evil_module.Probe"}
    path.write_text(json.dumps(document))
    refused(cli(capsys, "replay", str(seed_bundle), "--quiet"), "outcome_probe.probe", "class path")
    check_bundle(seed_bundle)  # data to the report: it passes the door (and imports nothing)
    assert "evil_module" not in sys.modules


def test_resume_never_takes_a_run_file_from_inside_the_bundle(seed_suite, seed_bundle, capsys):
    shutil.copy(seed_suite / RUN, seed_bundle / "evil-run.yaml")
    report = json.loads((seed_bundle / "run-report.json").read_text())
    report["run_file"] = str(seed_bundle / "evil-run.yaml")
    (seed_bundle / "run-report.json").write_text(json.dumps(report))
    refused(cli(capsys, "run", "--resume", str(seed_bundle), "--quiet"), "--resume",
            "never takes its configuration from a bundle")
    check_bundle(seed_bundle)  # data to the report: it passes the door


# --- one writer -------------------------------------------------------------------------------

def test_a_second_writer_is_refused_naming_the_holder(seed_suite, seed_bundle, capsys):
    with BundleLock(seed_bundle, command="run"):
        line = refused(cli(capsys, "run", str(seed_suite / RUN), "--resume", str(seed_bundle),
                           "--quiet"), "another voicelab process", f"pid {os.getpid()}")
        assert "voice-evaluator run" in line
        refused(cli(capsys, "rescore", str(seed_bundle)), "another voicelab process")
    assert not (seed_bundle / ".voicelab.lock").exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(seed_suite, seed_bundle, capsys):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (seed_bundle / ".voicelab.lock").write_text(json.dumps({
        "pid": int(dead.stdout), "host": os.uname().nodename, "command": "run"}))
    code, out, err = cli(capsys, "run", str(seed_suite / RUN), "--resume", str(seed_bundle),
                         "--quiet")
    assert code == 0, err
    assert not (seed_bundle / ".voicelab.lock").exists()


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


# --- what a re-scored run report counts --------------------------------------------------------

def _edit_run_report(bundle: Path, **changes: object) -> None:
    path = bundle / "run-report.json"
    report = json.loads(path.read_text())
    report.update(changes)
    path.write_text(json.dumps(report))


def test_rescoring_an_interrupted_run_exits_4_for_the_trials_that_never_ran(seed_bundle, capsys):
    _edit_run_report(seed_bundle, status="interrupted", exit_code=130, planned_trials=3,
                     trial_count=3,
                     message="1 planned trial(s) did not run because the run was interrupted")
    code, out, err = cli(capsys, "rescore", str(seed_bundle))
    assert code == 4, out + err
    assert "Traceback" not in err
    assert "1 planned trial(s) did not run because the run was interrupted" in out
    report = json.loads((seed_bundle / "run-report.json").read_text())
    assert (report["status"], report["exit_code"]) == ("interrupted", 4)
    assert (report["executed_trials"], report["passed_trials"]) == (2, 2)
    assert report["pass_power_k"] is False


def test_rescore_counts_only_the_trials_it_rescored(seed_bundle, capsys):
    # stale counts are recomputed; a folder without its report is unfinished, never passed
    _edit_run_report(seed_bundle, executed_trials=7, passed_trials=0, pass_power_k=False)
    (seed_bundle / "trial-002" / "trial-report.json").unlink()
    code, out, err = cli(capsys, "rescore", str(seed_bundle))
    assert code == 4, out + err
    assert "1 trial(s) did not finish (no trial-report.json: counted as not executed): " \
        "trial-002" in out
    report = json.loads((seed_bundle / "run-report.json").read_text())
    assert [t["trial_id"] for t in report["trials"]] == ["trial-001"]
    assert (report["executed_trials"], report["passed_trials"]) == (1, 1)
    assert report["pass_power_k"] is False and report["exit_code"] == 4
    assert report["pass_rate"]["n"] == 1
    assert "trial-002" in report["message"]


def test_rescore_of_a_complete_run_recomputes_stale_counts(seed_bundle, capsys):
    _edit_run_report(seed_bundle, executed_trials=7, passed_trials=0, pass_power_k=False,
                     exit_code=3)
    code, out, err = cli(capsys, "rescore", str(seed_bundle))
    assert code == 0, out + err
    report = json.loads((seed_bundle / "run-report.json").read_text())
    assert (report["executed_trials"], report["passed_trials"]) == (2, 2)
    assert report["pass_power_k"] is True and report["exit_code"] == 0


def test_rescoring_a_trial_folder_leaves_its_run_report_alone(seed_bundle, capsys):
    scenario = seed_bundle / "trial-001" / "resolved-scenario.json"
    document = json.loads(scenario.read_text())
    document["resolved"]["eval_spec"]["concise_max_words"] = 1
    scenario.write_text(json.dumps(document))
    before = (seed_bundle / "run-report.json").read_bytes()
    code, out, err = cli(capsys, "rescore", str(seed_bundle / "trial-001"))
    assert code == 3, out + err  # the trial alone now fails its concise verdict
    assert (seed_bundle / "run-report.json").read_bytes() == before  # outside what was re-scored


def test_resume_refuses_tampered_metrics_naming_the_member_and_key(seed_suite, seed_bundle, capsys):
    path = seed_bundle / "trial-001" / "voice-metrics.json"
    metrics = json.loads(path.read_text())
    metrics["turns"][0]["response_latency_ms"] = "fast"
    path.write_text(json.dumps(metrics))
    where = ("voice-metrics.json", "turns[0].response_latency_ms", "valid number")
    refused(cli(capsys, "run", str(seed_suite / RUN), "--resume", str(seed_bundle), "--quiet"),
            *where)
    report_refused(capsys, seed_bundle, *where)
