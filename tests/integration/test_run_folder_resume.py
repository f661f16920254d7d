"""``run --resume`` through its run folder: the bundle's report is read once (the lock is taken
first), and the lock is released on every way out, a refused option after the trials were
counted included.

The bundle is made once per module by a real run (the fake product); each test resumes a copy.
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
SEED = ROOT / "tests" / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("suite")
    for path in SEED.glob("*.yaml"):
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture(scope="module")
def original(suite: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    outcome = voicelab.run(suite / RUN, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path_factory.mktemp("runs")))
    assert outcome.exit_code == 0
    return outcome.bundle_path


@pytest.fixture()
def bundle(original: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(original, copy)
    return copy


def test_a_resumed_run_reads_its_report_once(suite: Path, bundle: Path,
                                             monkeypatch: pytest.MonkeyPatch):
    report = str(bundle.resolve() / "run-report.json")
    reads: list[int] = []
    real_open = os.open

    def counted(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        if os.fspath(path) == report and flags & (os.O_WRONLY | os.O_RDWR) == 0:
            reads.append(flags)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr("os.open", counted)
    outcome = voicelab.run(suite / RUN, voicelab.RunOptions(resume=bundle))
    monkeypatch.undo()
    assert outcome.exit_code == 0
    assert outcome.report.executed_trials == 2
    assert len(reads) == 1


def test_a_refusal_after_the_count_releases_the_bundle(suite: Path, bundle: Path):
    with pytest.raises(ConfigError) as refused:
        voicelab.run(suite / RUN, voicelab.RunOptions(resume=bundle, concurrency=0))
    assert refused.value.key == "concurrency"
    assert not (bundle / ".voicelab.lock").exists()
    with RunFolder.reopen(bundle, command="run --resume", report=RunReport) as again:
        assert again.lock.held  # nobody holds it any more


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outcome = voicelab.run_matrix(ROOT / "examples" / "sweep-workload-neutral.yaml", voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path_factory.mktemp("sweeps")))
    assert outcome.exit_code == 0
    return outcome.run_dir


def test_a_resumed_sweep_reads_its_matrix_report_once(sweep: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    report = str(copy.resolve() / "matrix-report.json")
    reads: list[int] = []
    real_open = os.open

    def counted(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        if os.fspath(path) == report and flags & (os.O_WRONLY | os.O_RDWR) == 0:
            reads.append(flags)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr("os.open", counted)
    outcome = voicelab.run_matrix(ROOT / "examples" / "sweep-workload-neutral.yaml", voicelab.RunOptions(
        resume=copy))
    monkeypatch.undo()
    assert outcome.exit_code == 0 and outcome.report.executed_trials == 4
    assert len(reads) == 1
    assert not (copy / ".voicelab.lock").exists()
