"""Bundles are hostile input: every command that reads one (rescore, replay, report, compare,
run --resume) never writes through a link or into a device, never runs or imports what a bundle
names, lets one writer in at a time, and counts in a re-scored run report only what it
re-scored. Reading within bounds: test_hostile_bundle_reading.py.

The bundle is the seed suite's (``seed_run``: one real run per test process, conftest.py);
each test damages a copy (``seed_bundle``). How commands run and refuse: _hostile_bundle.py.
``report`` reads every hostile bundle too: it checks the bundle at the door (``check_bundle``),
before the notebook's imports and kernel, so a malformed one is refused in one line with nothing
written; one that is only data to it (a launch command, a class path, a run file it names)
passes the door.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _hostile_bundle import RUN, cli, refused, report_refused

from voicelab.artifacts import BundleLock, check_bundle

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
