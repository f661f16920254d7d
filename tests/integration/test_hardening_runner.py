"""Regression tests for the adversarial audit's runner findings (issue 11): per-trial product
session ids, SIGTERM, a full disk, bounds on trials, unusable artifact folders, long and dotted
ids, product audio floods and failure codes."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import voicelab

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SUITE = ROOT / "examples" / "sweep-workload-neutral.yaml"


def _cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def _bundle(root: Path) -> Path:
    return next(p.parent.resolve() for p in root.glob("*/run-report.json"))


def _trial_report(bundle: Path, index: int = 1) -> dict:
    return json.loads((bundle / f"trial-{index:03d}" / "trial-report.json").read_text())


# --- 2. outcome cross-talk --------------------------------------------------------------------

def test_each_trial_presents_its_own_session_id_and_the_probe_reads_only_that(tmp_path):
    database = tmp_path / "shared-product.sqlite3"
    shared = f"endpoint.settings.database_path={database}"
    honest = _cli("run", str(EXAMPLE), "--trials", "2", "--artifacts-dir", str(tmp_path / "a"),
                  "--set", shared)
    assert honest.returncode == 0, honest.stdout + honest.stderr
    # the same product, now saving nothing: an earlier run's rows must not make it pass
    dishonest = _cli("run", str(EXAMPLE), "--trials", "1", "--artifacts-dir", str(tmp_path / "b"),
                     "--set", shared, "--set", "endpoint.settings.claim_without_tool=true")
    assert dishonest.returncode == 3, dishonest.stdout + dishonest.stderr
    report = _trial_report(_bundle(tmp_path / "b"))
    failed = {v["name"]: v for v in report["verdicts"] if not v["passed"]}
    assert "outcome_follow_up_created" in failed
    assert report["outcome"]["follow_up_created"] is False

    first, second = (_trial_report(_bundle(tmp_path / "a"), i) for i in (1, 2))
    ids = {first["session_id"], second["session_id"], report["session_id"]}
    assert len(ids) == 3
    assert all(i.startswith("planning-session-001-") for i in ids)
    assert first["configured_session_id"] == "planning-session-001"
    # the product saw exactly these ids (evaluator.init carried them), and nothing else
    with sqlite3.connect(database) as db:
        seen = {row[0] for row in db.execute("SELECT session_id FROM sessions")}
    assert seen == ids
    transcript = json.loads((_bundle(tmp_path / "a") / "trial-001" / "transcript.json")
                            .read_text())
    assert transcript["session_id"] == first["session_id"]


# --- 4. SIGTERM, and a summary after Ctrl-C -----------------------------------------------------

def _run_then_signal(tmp_path: Path, number: int) -> tuple[subprocess.Popen, str, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--trials", "4",
         "--artifacts-dir", str(tmp_path),
         # the product opens at once, then takes 30 s to answer the user: a trial in flight
         "--set", "endpoint.settings.reply_latency_ms=[0, 30000]",
         "--set", "endpoint.settings.receive_timeout_seconds=60",
         "--set", "scenario.eval_spec.response_timeout_seconds=60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(tmp_path.glob("*/trial-001")) \
                and not list(tmp_path.glob("*/evaluator.log")):
            time.sleep(0.05)
        # wait until the user has spoken (the product is now silent for 30 s)
        while time.monotonic() < deadline:
            logs = list(tmp_path.glob("*/evaluator.log"))
            if logs and "connected to" in logs[0].read_text():
                break
            time.sleep(0.05)
        time.sleep(1.0)
        process.send_signal(number)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return process, stdout, stderr


@pytest.mark.parametrize(("number", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_keeps_the_evidence_marks_the_report_and_prints_the_summary(tmp_path, number,
                                                                             code):
    process, stdout, stderr = _run_then_signal(tmp_path, number)
    assert process.returncode == code, stdout + stderr
    assert "Traceback" not in stderr
    bundle = _bundle(tmp_path)
    report = json.loads((bundle / "run-report.json").read_text())
    assert report["status"] == "interrupted" and report["exit_code"] == 130
    assert report["executed_trials"] == 1
    trial = _trial_report(bundle)
    assert trial["exit_reason"] == "cancelled" and trial["failures"][0]["kind"] == "cancelled"
    assert (bundle / "trial-001" / "mixed.wav").stat().st_size > 44
    assert f"bundle: {bundle}" in stdout
    assert "trial-001 seed 42: FAIL" in stdout
    assert "3 planned trial(s) did not run" in stdout


# --- 5. a full disk --------------------------------------------------------------------------

def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt && umount /mnt"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs unshare and a tmpfs mount")
def test_a_full_disk_ends_with_exit_4_one_line_and_what_could_be_written(tmp_path):
    """A 400 KiB tmpfs (in a private mount namespace) holds the run report and the small
    documents, not the WAV files: the trial fails to execute, the run still ends."""
    volume, copy = tmp_path / "volume", tmp_path / "copy"
    volume.mkdir()
    copy.mkdir()
    script = (f"mount -t tmpfs -o size=400k tmpfs {volume} && "
              f"{sys.executable} -m voicelab run {EXAMPLE} --trials 2 --concurrency 1 "
              f"--artifacts-dir {volume}; status=$?; cp -r {volume}/. {copy}/; exit $status")
    process = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 4, process.stdout + process.stderr
    assert "Traceback" not in process.stderr and "Logging error" not in process.stderr
    bundle = _bundle(copy)
    report = json.loads((bundle / "run-report.json").read_text())
    assert report["status"] == "complete" and report["exit_code"] == 4
    assert report["executed_trials"] == 2
    for index in (1, 2):  # every trial has its report, whatever it cost
        trial = _trial_report(bundle, index)
        assert trial["execution_status"] == "failed"
        artifacts = [f for f in trial["failures"] if f["kind"] == "artifacts"]
        assert artifacts[0]["code"] == "bundle_write_failed"
        assert "No space left on device" in artifacts[0]["message"]
        # audio removed to make room for the report is said, and is not listed as present
        removed = [f["message"].split(" ")[0] for f in artifacts[1:]]
        assert all(f["code"] == "bundle_file_removed" for f in artifacts[1:])
        assert not set(removed) & set(trial["files"])
        assert sorted(trial["files"]) == sorted(
            p.name for p in (bundle / f"trial-{index:03d}").iterdir())


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs unshare and a tmpfs mount")
def test_a_full_disk_keeps_the_last_good_run_report_whole(tmp_path):
    """A disk too small for the final run report: the report written while the run ran stays
    whole (never truncated in place), exit 4 with one line, and ``latest`` is not moved to a
    run whose final report is missing."""
    volume, copy = tmp_path / "volume", tmp_path / "copy"
    volume.mkdir()
    copy.mkdir()
    script = (f"mount -t tmpfs -o size=100k tmpfs {volume} && "
              f"{sys.executable} -m voicelab run {EXAMPLE} --trials 3 --concurrency 1 "
              f"--artifacts-dir {volume} --quiet; status=$?; cp -r {volume}/. {copy}/; "
              f"exit $status")
    process = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 4, process.stdout + process.stderr
    assert "Traceback" not in process.stderr and "Logging error" not in process.stderr
    failed = [line for line in process.stderr.splitlines()
              if line.startswith("voice-evaluator:")]
    assert failed == ["voice-evaluator: execution failed: could not write run-report.json: "
                      "No space left on device"], process.stderr
    bundle = _bundle(copy)
    report = json.loads((bundle / "run-report.json").read_text())  # whole: it parses
    assert report["status"] == "running"
    assert not (copy / "latest").exists()


def test_a_write_failure_fails_the_trial_not_the_run(tmp_path, monkeypatch):
    """The same path without a tmpfs: every WAV write fails with ENOSPC."""
    from voicelab.artifacts import _bundle as bundle_module

    real = bundle_module._write_file

    def failing(path: Path, content) -> None:
        if Path(path).suffix == ".wav":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, content)

    monkeypatch.setattr(bundle_module, "_write_file", failing)
    # scored on this loop: the patch is not in the scoring process (the tmpfs test above
    # fails the writes of the scoring process for real)
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=3,
        concurrency=2,
        artifacts_dir=tmp_path,
        scoring="loop"))
    assert outcome.exit_code == 4 and outcome.report.status == "complete"
    assert outcome.report.executed_trials == 3
    for index in (1, 2, 3):
        trial = _trial_report(outcome.bundle_path, index)
        assert trial["execution_status"] == "failed" and not trial["passed"]
        assert trial["failures"][-1]["code"] == "bundle_write_failed"
        assert "user.wav" not in trial["files"] and "transcript.json" in trial["files"]


def test_a_broken_trial_is_reported_and_the_others_run(tmp_path, monkeypatch):
    from voicelab.execution import _inline

    real = _inline.run_call

    async def sometimes_broken(plan):
        if plan.index == 2:
            raise RuntimeError("adapter bug")
        return await real(plan)

    monkeypatch.setattr(_inline, "run_call", sometimes_broken)
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=3,
        concurrency=3,
        artifacts_dir=tmp_path))
    assert outcome.exit_code == 4 and outcome.report.executed_trials == 3
    assert [t.report.passed for t in outcome.trials] == [True, False, True]
    broken = _trial_report(outcome.bundle_path, 2)
    assert broken["failures"][0] == {"kind": "runner", "message": "RuntimeError: adapter bug",
                                     "code": None}


# --- 6. bounds on trials; trials started lazily ---------------------------------------------------

@pytest.mark.parametrize("option", [["--trials", "100000000000000000000"], ["--trials", "0"],
                                    ["--concurrency", "5000"]])
def test_absurd_trial_counts_are_refused_with_exit_2(tmp_path, option):
    process = _cli("run", str(EXAMPLE), *option, "--artifacts-dir", str(tmp_path), timeout=60)
    assert process.returncode == 2, process.stdout + process.stderr
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"voice-evaluator: error: CLI: {option[0]}: ")
    assert "Traceback" not in process.stderr and not list(tmp_path.iterdir())


def test_trials_are_started_lazily(tmp_path):
    """100,000 planned trials with concurrency 2: only a handful of tasks ever exist."""
    loaded = voicelab.load_run(EXAMPLE)
    counts: list[int] = []

    async def main() -> None:
        task = asyncio.current_task()

        def done(result, finished, total):
            counts.append(len(asyncio.all_tasks()))
            # ">=", once: with two workers both trials may be counted before either reports
            # (finished jumps from 2 to 4), and a second cancel would cut the cleanup short
            if finished >= 3 and not task.cancelling():
                task.cancel()
            if finished > 40:  # never a runaway through 100,000 trials (and their disk space)
                raise RuntimeError(f"the run went on after its cancellation ({finished} trials)")

        await voicelab.arun(loaded, voicelab.RunOptions(
            trials=100_000,
            concurrency=2,
            artifacts_dir=tmp_path,
            on_trial_done=done))

    from voicelab.runner._run import RunInterrupted

    with pytest.raises(RunInterrupted) as stopped:
        asyncio.run(main())
    assert stopped.value.outcome.report.planned_trials == 100_000
    assert max(counts) < 20


# --- 7. unusable artifact folders, long and dotted ids ----------------------------------------------

def test_an_unusable_artifacts_dir_is_a_configuration_error(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for target in (a_file, a_file / "below", Path("/proc/voicelab-cannot-create")):
        process = _cli("run", str(EXAMPLE), "--artifacts-dir", str(target), timeout=60)
        assert process.returncode == 2, process.stdout + process.stderr
        lines = process.stderr.strip().splitlines()
        assert len(lines) == 1, process.stderr
        assert lines[0].startswith("voice-evaluator: error: CLI: --artifacts-dir: cannot create "
                                   "the bundle folder ")
        assert str(target) in lines[0]


def _suite_with_ids(tmp_path: Path, scenario_id: str, persona_name: str) -> Path:
    for name in ("run-workload-neutral-voice.yaml", "persona-workload-neutral-voice.yaml",
                 "script-workload-neutral-voice.yaml", "data-workload-neutral-voice.yaml",
                 "scenario-workload-neutral-voice.yaml"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    scenario = tmp_path / "scenario-workload-neutral-voice.yaml"
    scenario.write_text(scenario.read_text().replace(
        "id: workload-neutral-voice-exchange", f"id: {json.dumps(scenario_id)}"))
    persona = tmp_path / "persona-workload-neutral-voice.yaml"
    persona.write_text(persona.read_text().replace("name: Jordan",
                                                   f"name: {json.dumps(persona_name)}"))
    suite = tmp_path / "suite.yaml"
    suite.write_text("base: run-workload-neutral-voice.yaml\n"
                     "scenarios: [scenario-workload-neutral-voice.yaml]\n"
                     "personas:\n  - persona: persona-workload-neutral-voice.yaml\n"
                     "    script: script-workload-neutral-voice.yaml\n"
                     "environments: [quiet]\n")
    return suite


def test_a_sweep_with_a_300_character_id_and_dotted_names_completes(tmp_path):
    suite = _suite_with_ids(tmp_path, "s" * 300, "..")
    process = _cli("sweep", str(suite), "--trials", "1", "--artifacts-dir",
                   str(tmp_path / "out"))
    assert process.returncode == 0, process.stdout + process.stderr
    matrix = next((tmp_path / "out").glob("*/matrix-report.json"))
    report = json.loads(matrix.read_text())
    assert report["status"] == "complete" and report["passed_trials"] == 1
    (cell,) = [p for p in matrix.parent.iterdir() if p.is_dir()]
    assert len(cell.name) < 200 and not cell.name.startswith(".")
    assert (cell / "trial-001" / "trial-report.json").is_file()


# --- 8. product audio floods --------------------------------------------------------------------

LONG_REPLY = "record the plan and save the reminder now " * 7  # ~18 s of tone speech


# (a reply longer than max_time_seconds is no flood: it is cut at the limit, and the trial ends
# with max_time: tests/integration/test_time_limits.py)
def test_a_product_flooding_audio_fails_with_audio_flood(tmp_path):
    limits = ["--set", "scenario.eval_spec.limits.product_audio_burst_seconds=5",
              "--set", "scenario.eval_spec.limits.max_product_audio_speed=2"]
    process = _cli("run", str(EXAMPLE), "--artifacts-dir", str(tmp_path),
                   "--set", f"endpoint.settings.opening_text={LONG_REPLY}", *limits)
    assert process.returncode == 4, process.stdout + process.stderr
    bundle = _bundle(tmp_path)
    trial = _trial_report(bundle)
    assert trial["failures"][0]["code"] == "audio_flood"
    # evidence is kept up to the limit, not beyond it
    metrics = json.loads((bundle / "trial-001" / "voice-metrics.json").read_text())
    received = metrics["turns"][0]["output_audio_seconds"]
    assert 0 < received <= 10.5
    events = (bundle / "trial-001" / "voice-events.jsonl").read_text()
    assert '"event_type":"product.audio_flood"' in events


def test_a_whole_reply_sent_at_once_is_not_a_flood(tmp_path):
    # room for the call on the listener's clock: the ~18 s opening, the turn and the reply
    # take about the example's 30 s
    process = _cli("run", str(EXAMPLE), "--artifacts-dir", str(tmp_path),
                   "--set", f"endpoint.settings.opening_text={LONG_REPLY}",
                   "--set", "scenario.eval_spec.limits.max_time_seconds=60")
    assert process.returncode == 0, process.stdout + process.stderr


# --- 9. failure codes ------------------------------------------------------------------------

def test_a_closed_connection_fails_with_the_error_code_not_the_close_code(tmp_path):
    process = _cli("run", str(EXAMPLE), "--artifacts-dir", str(tmp_path),
                   "--set", "endpoint.settings.close_mid_response=2")
    assert process.returncode == 4, process.stdout + process.stderr
    failure = _trial_report(_bundle(tmp_path))["failures"][0]
    assert failure["code"] == "connection_closed"
    assert "1011" in failure["message"]


def test_pipes_and_devices_are_named_as_such_not_as_directories(tmp_path):
    for name in ("run-workload-neutral-voice.yaml", "persona-workload-neutral-voice.yaml",
                 "script-workload-neutral-voice.yaml", "scenario-workload-neutral-voice.yaml"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    pipe = tmp_path / "data-workload-neutral-voice.yaml"
    os.mkfifo(pipe)  # opening it to read would wait for a writer forever
    run = tmp_path / "run-workload-neutral-voice.yaml"
    process = _cli("validate", str(run), timeout=60)
    assert process.returncode == 2, process.stdout + process.stderr
    assert "data_path: expected a file, found a named pipe (FIFO)" in process.stderr
    process = _cli("validate", str(run), "--set", "data_path=/dev/null", timeout=60)
    assert process.returncode == 2 and "found a device: /dev/null" in process.stderr


def _report_on_a_disk_full_until(tmp_path: Path, monkeypatch, files: dict[str, bytes],
                                 until_gone: str) -> tuple[dict, object]:
    """A trial folder holding ``files`` on a disk with no room for the report until
    ``until_gone`` is removed: the report written (and the one returned)."""
    from voicelab.artifacts import TrialReport
    from voicelab.runner import _scoring as scoring_module

    trial_dir = tmp_path / "trial-001"
    trial_dir.mkdir()
    for name, content in files.items():
        (trial_dir / name).write_bytes(content)
    real = scoring_module.write_json

    def full_until_gone(path, document):
        if (trial_dir / until_gone).exists():
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, document)

    monkeypatch.setattr(scoring_module, "write_json", full_until_gone)
    report = TrialReport.model_validate(_trial_report(_bundle_of_a_run(tmp_path)))
    failed = scoring_module.write_unfinished_bundle(
        trial_dir, report, OSError(errno.ENOSPC, "No space left on device", "x.wav"))
    return json.loads((trial_dir / "trial-report.json").read_text()), failed


def test_a_full_disk_gives_up_the_trials_audio_for_its_report(tmp_path, monkeypatch):
    """The report is written once removing the trial's largest audio freed the room it needs;
    the report names what was removed."""
    written, failed = _report_on_a_disk_full_until(
        tmp_path, monkeypatch, {"mixed.wav": b"\0" * 5000, "user-sent.wav": b"\0" * 3000,
                                "transcript.json": b"{}"}, until_gone="mixed.wav")
    assert written == json.loads(failed.model_dump_json())
    codes = [f["code"] for f in written["failures"] if f["kind"] == "artifacts"]
    assert codes == ["bundle_write_failed", "bundle_file_removed"]
    assert written["failures"][-1]["message"].startswith("mixed.wav (5000 bytes) was removed")
    assert sorted(written["files"]) == ["transcript.json", "trial-report.json", "user-sent.wav"]


def _bundle_of_a_run(tmp_path: Path) -> Path:
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path / "runs"))
    return outcome.bundle_path


def test_a_report_that_does_not_fit_after_the_audio_takes_the_room_of_other_files(
        tmp_path, monkeypatch):
    """No audio made it to disk but the event log did (the files are written side by side, so
    which ones land is a race): the event log makes room, so the trial keeps its report."""
    written, _ = _report_on_a_disk_full_until(
        tmp_path, monkeypatch, {"voice-events.jsonl": b"{}\n" * 5000, "transcript.md": b"hello"},
        until_gone="voice-events.jsonl")
    assert written["failures"][-1]["message"].startswith(
        "voice-events.jsonl (15000 bytes) was removed")
    assert sorted(written["files"]) == ["transcript.md", "trial-report.json"]
