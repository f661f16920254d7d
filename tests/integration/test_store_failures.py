"""A store that refuses uploads: the run still ends, exits 4, says why, and keeps every file
in its staging folder (a store that accepts a probe but not the bundle: a quota, a policy).
And ``file://``: the local folder, written as without a scheme."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import fsspec
from fsspec.implementations.memory import MemoryFileSystem

import voicelab
from voicelab.artifacts import TRIAL_FILES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


class RefusingMemoryFileSystem(MemoryFileSystem):
    """Small objects (the write probe, LATEST) go in; file uploads are refused."""

    protocol = "refusingmem"
    store: dict = {}
    pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path):  # type: ignore[no-untyped-def] - fsspec's backend hook
        if isinstance(path, str) and path.startswith("refusingmem://"):
            path = "memory://" + path[len("refusingmem://"):]
        return super()._strip_protocol(path)

    def put_file(self, lpath, rpath, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "uploads refused by the test store")


fsspec.register_implementation("refusingmem", RefusingMemoryFileSystem, clobber=True)


def test_a_store_that_refuses_uploads_fails_the_run_and_keeps_the_evidence():
    loaded = voicelab.load_run(EXAMPLE)
    outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=2,
        concurrency=2,
        artifacts_dir="refusingmem://runs")))
    staging = outcome.bundle_path.parent
    try:
        assert outcome.report.passed_trials == 2 and outcome.exit_code == 4
        assert len(outcome.write_errors) == 1
        problem = outcome.write_errors[0]
        assert problem.startswith("could not publish to refusingmem://runs: ")
        assert problem.endswith(f"the evidence is kept in {staging}")
        assert outcome.location == f"refusingmem://runs/{outcome.bundle_path.name}"
        for trial in ("trial-001", "trial-002"):
            assert {p.name for p in (outcome.bundle_path / trial).iterdir()} == set(TRIAL_FILES)
        assert (outcome.bundle_path / "run-report.json").is_file()
        assert not RefusingMemoryFileSystem.store  # not even LATEST: it would name nothing
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        RefusingMemoryFileSystem.store.clear()


def test_a_file_url_is_the_local_folder(tmp_path):
    loaded = voicelab.load_run(EXAMPLE)
    outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=1,
        artifacts_dir=f"file://{tmp_path}")))
    assert outcome.exit_code == 0 and outcome.bundle_path.parent == tmp_path.resolve()
    assert outcome.location == str(outcome.bundle_path)
    assert (tmp_path / "latest").resolve() == outcome.bundle_path
    assert (outcome.bundle_path / "trial-001" / "trial-report.json").is_file()
