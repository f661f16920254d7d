"""``run --resume`` through its run folder: the bundle's report is read once (the lock is taken
first), and the lock is released on every way out, a refused option after the trials were
counted included.

The bundle is the seed suite's (``seed_run``: one real run per test process, conftest.py);
each test resumes a copy (``seed_bundle``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import RunFolder, RunReport
from voicelab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "examples" / "sweep-workload-neutral.yaml"
#: The seed suite's run file (``seed_suite``, ``seed_run``: conftest.py).
RUN = "run-workload-neutral-voice.yaml"


def reads_of(path: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The flags of every opening of ``path`` for reading from now on (``os.open`` watched)."""
    reads: list[int] = []
    real_open = os.open

    def counted(opened: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        if os.fspath(opened) == path and flags & (os.O_WRONLY | os.O_RDWR) == 0:
            reads.append(flags)
        return real_open(opened, flags, *args, **kwargs)

    monkeypatch.setattr("os.open", counted)
    return reads


def test_a_resumed_run_reads_its_report_once(seed_suite: Path, seed_bundle: Path,
                                             monkeypatch: pytest.MonkeyPatch):
    report = str(seed_bundle.resolve() / "run-report.json")
    reads = reads_of(report, monkeypatch)
    outcome = voicelab.run(seed_suite / RUN, voicelab.RunOptions(resume=seed_bundle))
    monkeypatch.undo()
    assert outcome.exit_code == 0
    assert outcome.report.executed_trials == 2
    assert len(reads) == 1


def test_a_refusal_after_the_count_releases_the_bundle(seed_suite: Path, seed_bundle: Path):
    with pytest.raises(ConfigError) as refused:
        voicelab.run(seed_suite / RUN, voicelab.RunOptions(resume=seed_bundle, concurrency=0))
    assert refused.value.key == "concurrency"
    assert not (seed_bundle / ".voicelab.lock").exists()
    with RunFolder.reopen(seed_bundle, command="run --resume", report=RunReport) as again:
        assert again.lock.held  # nobody holds it any more


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outcome = voicelab.run_matrix(SWEEP, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path_factory.mktemp("sweeps")))
    assert outcome.exit_code == 0
    return outcome.run_dir


def test_a_resumed_sweep_reads_its_matrix_report_once(sweep: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    report = str(copy.resolve() / "matrix-report.json")
    reads = reads_of(report, monkeypatch)
    outcome = voicelab.run_matrix(SWEEP, voicelab.RunOptions(resume=copy))
    monkeypatch.undo()
    assert outcome.exit_code == 0 and outcome.report.executed_trials == 4
    assert len(reads) == 1
    assert not (copy / ".voicelab.lock").exists()
