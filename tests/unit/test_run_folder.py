"""A run folder's life: created or reopened, locked while in use, its report written whole,
``latest`` moved only once the report is on disk, and everything released however the work
ends (a cancellation, which is what a signal becomes, included)."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import stat
from pathlib import Path

import pytest

from voicelab.artifacts import RunFolder, RunReport
from voicelab.errors import ConfigError

RUN_ID = "run-1"


class _PlainWords:
    """A filter of words with nothing to replace (the run's has its secrets)."""

    replacement = "***"
    sensitive_fields: frozenset[str] = frozenset()
    changes_nothing = True
    replaces_literals_only = True

    def text(self, text: str) -> str:
        return text


def _report(**changes: object) -> RunReport:
    document = {"run_id": RUN_ID, "status": "running", "scenario_id": "s", "persona": "p",
                "environment": "quiet", "adapter": "fake", "suite_hash": "sha256:0",
                "bundle_path": "b", "started_at": "2026-01-01T00:00:00Z",
                "ended_at": "2026-01-01T00:00:01Z", "trial_count": 2, "planned_trials": 2,
                "executed_trials": 0, "passed_trials": 0, "pass_at_k": False,
                "pass_power_k": False, "exit_code": 4, **changes}
    return RunReport.model_validate(document)


def _words() -> _PlainWords:
    return _PlainWords()


def test_a_new_folder_is_private_and_locked_until_closed(tmp_path: Path):
    with RunFolder.create(tmp_path, RUN_ID, command="run", report=RunReport) as folder:
        assert folder.path == (tmp_path / RUN_ID).resolve()
        assert stat.S_IMODE(os.stat(folder.path).st_mode) == 0o700
        holder = json.loads((folder.path / ".voicelab.lock").read_text())
        assert holder["command"] == "run" and holder["pid"] == os.getpid()
        assert folder.previous is None
    assert not (folder.path / ".voicelab.lock").exists()
    assert not folder.lock.held


def test_an_unusable_artifacts_folder_is_a_configuration_error_naming_it(tmp_path: Path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ConfigError) as refused:
        RunFolder.create(tmp_path / "file", RUN_ID, command="run", report=RunReport,
                         source=tmp_path / "run.yaml")
    assert refused.value.key == "artifacts_dir"
    assert "cannot create the bundle folder" in refused.value.message


def test_a_folder_is_refused_while_another_writer_holds_it(tmp_path: Path):
    with RunFolder.create(tmp_path, RUN_ID, command="run", report=RunReport) as folder:
        folder.write_report(_report())
        with pytest.raises(ConfigError, match="another voicelab process is writing this "
                                              r"bundle \(pid \d+.*voice-evaluator run"):
            RunFolder.reopen(folder.path, command="run --resume", report=RunReport)
    with RunFolder.reopen(folder.path, command="run --resume", report=RunReport) as again:
        assert again.lock.held


def test_reopening_follows_latest_and_reads_the_report_once(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    with RunFolder.create(tmp_path, RUN_ID, command="run", report=RunReport) as folder:
        folder.finish(_report(status="complete"), link_latest=True)
    opened: list[str] = []
    real_open = os.open

    def counted(path: str | os.PathLike[str], *args: int, **kwargs: int) -> int:
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("os.open", counted)
    with RunFolder.reopen(tmp_path / "latest", command="run --resume",
                          report=RunReport) as again:
        assert again.path == folder.path
        assert again.previous is not None and again.previous.status == "complete"
        assert not again.created
    monkeypatch.undo()
    assert [p for p in opened if p.endswith("run-report.json")] == \
        [str(folder.path / "run-report.json")]


def test_a_folder_without_its_report_is_not_reopened(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"not a run bundle \(no run-report.json\)"):
        RunFolder.reopen(tmp_path / "empty", command="run --resume", report=RunReport)
    assert not (tmp_path / "empty" / ".voicelab.lock").exists()  # released on the way out


def test_latest_moves_only_once_the_final_report_is_on_disk(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    reported_when_moved: list[bool] = []
    real_replace = os.replace

    def watched(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        if Path(target).name == "latest":
            reported_when_moved.append((tmp_path / RUN_ID / "run-report.json").is_file())
        real_replace(source, target)

    monkeypatch.setattr("os.replace", watched)
    with RunFolder.create(tmp_path, RUN_ID, command="run", report=RunReport) as folder:
        assert folder.finish(_report(status="complete"), link_latest=True) == []
    monkeypatch.undo()
    assert reported_when_moved == [True]
    assert (tmp_path / "latest").resolve() == folder.path


def test_a_report_that_cannot_be_written_keeps_latest_where_it_was(tmp_path: Path):
    with RunFolder.create(tmp_path, "run-0", command="run", report=RunReport) as earlier:
        earlier.finish(_report(run_id="run-0", status="complete"), link_latest=True)
    with RunFolder.create(tmp_path, RUN_ID, command="run", report=RunReport) as folder:
        (folder.path / "run-report.json").mkdir()  # nothing can replace a folder
        problems = folder.finish(_report(status="complete"), link_latest=True)
    assert problems and problems[0].startswith("could not write run-report.json")
    assert (tmp_path / "latest").resolve() == earlier.path


def test_a_full_disk_leaves_the_last_report_whole(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch):
    with RunFolder.create(tmp_path, RUN_ID, command="run", report=RunReport) as folder:
        assert folder.write_report(_report()) is None
        written = (folder.path / "run-report.json").read_bytes()

        def no_space(*_: object) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr("os.replace", no_space)
        problem = folder.write_report(_report(status="complete"))
        monkeypatch.undo()
    assert problem == f"could not write run-report.json: {os.strerror(errno.ENOSPC)}"
    assert (folder.path / "run-report.json").read_bytes() == written
    assert [p.name for p in folder.path.iterdir()] == ["run-report.json"]  # no stray temp


def test_a_member_is_never_written_through_a_link(tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    with RunFolder.create(tmp_path, RUN_ID, command="run", report=RunReport) as folder:
        (folder.path / "product.log").symlink_to(outside)
        assert folder.write_member("product.log", b"ours") is None
    assert outside.read_text() == "theirs"
    assert (folder.path / "product.log").read_text() == "ours"
    assert not (folder.path / "product.log").is_symlink()


def test_the_log_keeps_the_runs_records_until_the_folder_closes(tmp_path: Path):
    logger = logging.getLogger("voicelab.test_run_folder")
    with RunFolder.create(tmp_path, RUN_ID, command="run", report=RunReport) as folder:
        folder.start_log(run_id=RUN_ID, words=_words())
        logger.info("inside the run")
    logger.info("after the run")
    text = (folder.path / "evaluator.log").read_text()
    assert "inside the run" in text and "after the run" not in text


def test_a_cancelled_work_still_releases_the_folder(tmp_path: Path):
    """A signal reaches a command as a cancellation of its task: the folder is released and
    the report the work wrote on its way out is on disk."""
    holder: list[RunFolder[RunReport]] = []

    async def work() -> None:
        with RunFolder.create(tmp_path, RUN_ID, command="ingest", report=RunReport) as folder:
            holder.append(folder)
            folder.start_log(run_id=RUN_ID, words=_words())
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                folder.finish(_report(status="interrupted"), link_latest=True)
                raise

    async def main() -> None:
        task = asyncio.create_task(work())
        while not holder:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    [folder] = holder
    assert not (folder.path / ".voicelab.lock").exists()
    report = json.loads((folder.path / "run-report.json").read_text())
    assert report["status"] == "interrupted"
    assert (tmp_path / "latest").resolve() == folder.path
