"""Runs whose artifacts live in Google Cloud Storage (``gs://``, through gcsfs) and Azure Blob
Storage (``az://``, through adlfs), each against a server started here on 127.0.0.1:

- ``gs``: gcp-storage-emulator (a GCS JSON-API server) reached the way gcsfs documents for
  emulators: ``STORAGE_EMULATOR_HOST`` and anonymous credentials (``FSSPEC_GCS_TOKEN=anon``,
  fsspec's configuration);
- ``az``: voicelab's Azure Blob service double, which checks every request's SharedKey
  signature, reached through ``AZURE_STORAGE_CONNECTION_STRING`` as a user's shell would.

The flow is the S3 tests' (test_remote_store.py), kept short: a run, ``latest``,
``load_frames`` and a resume in each store, and one ``report`` reading a run from each.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import pytest

import voicelab
from voicelab.analysis import load_frames, read_trial_audio
from voicelab.artifacts import TRIAL_FILES
from voicelab.endpoints import pick_free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
BUCKET = "voicelab-runs"


@dataclass
class Store:
    """A store's root URL (``gs://voicelab-runs``), the CLI's environment and a file system of
    this process on the same server."""

    root: str
    env: dict[str, str]
    fs: Any
    #: the Azure Blob service double (None for the emulator of another store)
    server: Any = None

    def path(self, relative: str) -> str:
        return f"{BUCKET}/{relative}"

    def text(self, relative: str) -> str:
        self.fs.invalidate_cache()
        return bytes(self.fs.cat_file(self.path(relative))).decode()

    def names(self, relative: str) -> set[str]:
        self.fs.invalidate_cache()
        return {p.rpartition("/")[2] for p in self.fs.find(self.path(relative))}

    def versions(self, relative: str) -> dict[str, Any]:
        """Each object's identity of content and write (an object rewritten gets a new one)."""
        self.fs.invalidate_cache()
        found = self.fs.find(self.path(relative), detail=True)
        versions = {path: (info.get("generation") or info.get("etag"), info["size"])
                    for path, info in found.items()}
        assert versions and all(version for version, _ in versions.values())
        return versions


def _needs(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs {module} (pip install 'voicelab[{extra}]')")


@contextlib.contextmanager
def _gcs() -> Iterator[Store]:
    _needs("gcsfs", "gcs")
    _needs("gcp_storage_emulator", "dev")
    from gcp_storage_emulator.server import create_server

    port = pick_free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    settings = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}", "FSSPEC_GCS_TOKEN": "anon",
                # gcsfs's default file system asks a gRPC control API for each bucket's
                # layout first; the emulator (like other GCS emulators) speaks JSON over HTTP
                # only, and every call would wait out that API's retries
                "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in settings.items():
                patch.setenv(name, value)
            patch.setitem(fsspec.config.conf, "gcs", {"token": "anon"})
            import gcsfs.core

            chosen = {scheme: fsspec.get_filesystem_class(scheme) for scheme in ("gs", "gcs")}
            for scheme in chosen:  # gcsfs imported earlier chose its class already
                fsspec.register_implementation(scheme, gcsfs.core.GCSFileSystem, clobber=True)
            try:
                fs = gcsfs.core.GCSFileSystem(token="anon", skip_instance_cache=True)
                yield Store(f"gs://{BUCKET}", {**os.environ, **settings}, fs)
            finally:
                for scheme, chosen_class in chosen.items():
                    fsspec.register_implementation(scheme, chosen_class, clobber=True)
    finally:
        server.stop()


@contextlib.contextmanager
def _azure() -> Iterator[Store]:
    _needs("adlfs", "azure-storage")
    from voicelab.doubles.azure_blob import AzureBlobServer

    with AzureBlobServer(containers=(BUCKET,)) as server:
        settings = {"AZURE_STORAGE_CONNECTION_STRING": server.connection_string}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in settings.items():
                patch.setenv(name, value)
            fs = fsspec.filesystem("az", skip_instance_cache=True)
            yield Store(f"az://{BUCKET}", {**os.environ, **settings}, fs, server)
        # every request the clients made was signed with the account key and understood
        assert server.rejected_signatures == 0
        assert {r.operation for r in server.requests if r.status == 501} == set()


@pytest.fixture(scope="module")
def gs_store() -> Iterator[Store]:
    with _gcs() as opened:
        yield opened


@pytest.fixture(scope="module")
def az_store() -> Iterator[Store]:
    with _azure() as opened:
        yield opened


@pytest.fixture(params=["gs", "az"])
def store(request: pytest.FixtureRequest) -> Store:
    opened: Store = request.getfixturevalue(f"{request.param}_store")
    return opened


def cli(env: dict[str, str], *args: str, cwd: Path, timeout: float = 180
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)


def test_run_latest_frames_and_resume_in_the_store(store, tmp_path):
    root = store.root
    result = cli(store.env, "run", str(EXAMPLE), "--trials", "2", "--concurrency", "2",
                 "--artifacts-dir", f"{root}/runs", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    run_id = store.text("runs/LATEST").strip()
    assert f"bundle: {root}/runs/{run_id}" in result.stdout
    for trial in ("trial-001", "trial-002"):
        assert store.names(f"runs/{run_id}/{trial}") == set(TRIAL_FILES)
    assert "evaluator.log" in store.names(f"runs/{run_id}")
    assert f'"bundle_path": "{root}/runs/{run_id}"' in store.text(f"runs/{run_id}/run-report.json")
    assert list(tmp_path.iterdir()) == []  # nothing local: no folder named after a scheme

    frames = load_frames(f"{root}/runs/latest")
    assert list(frames.trials["trial_id"]) == ["trial-001", "trial-002"]
    assert set(frames.runs["run_id"]) == {run_id} and len(frames.turns) >= 2
    samples, rate = read_trial_audio(frames.trial_dir(trial_id="trial-002"))  # fetched now
    assert rate == 24_000 and samples.size > 0

    # a trial cut short (its report, written last, never arrived) and one more planned; the
    # resume runs in this process (the CLI's --resume is the same call, tested with S3)
    kept = store.versions(f"runs/{run_id}/trial-001")
    store.fs.rm_file(store.path(f"runs/{run_id}/trial-002/trial-report.json"))
    resumed = asyncio.run(voicelab.arun(voicelab.load_run(EXAMPLE), voicelab.RunOptions(
        trials=3,
        resume=f"{root}/runs/latest")))
    assert resumed.exit_code == 0 and resumed.report.run_id == run_id
    assert resumed.location == f"{root}/runs/{run_id}"
    assert store.versions(f"runs/{run_id}/trial-001") == kept  # untouched
    for trial in ("trial-002", "trial-003"):
        assert store.names(f"runs/{run_id}/{trial}") == set(TRIAL_FILES)
        assert '"exit_reason": "endpoint_completion"' in store.text(
            f"runs/{run_id}/{trial}/trial-report.json")
    report = store.text(f"runs/{run_id}/run-report.json")
    assert '"status": "complete"' in report and '"executed_trials": 3' in report
    assert "resumed: 2 of 3 planned trial(s) to run" in store.text(f"runs/{run_id}/evaluator.log")
    if store.server is not None:  # the account key (a secret) is in no object of the run
        key = store.server.account_key.encode()
        names = store.server.blob_names(BUCKET, f"runs/{run_id}/")
        assert len(names) > 10
        assert not [name for name in names if key in (store.server.blob(BUCKET, name) or b"")]


@pytest.mark.slow  # the report notebook's kernel: ~11 s, as the S3 report test
def test_one_report_reads_runs_from_both_stores_and_writes_to_one(gs_store, az_store, tmp_path):
    loaded = voicelab.load_run(EXAMPLE)
    run_ids = {}
    for opened in (gs_store, az_store):
        outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=1,
            artifacts_dir=f"{opened.root}/report")))
        assert outcome.exit_code == 0
        run_ids[opened.root] = outcome.report.run_id
    env = {**gs_store.env, **az_store.env}
    page = cli(env, "report", f"{gs_store.root}/report/latest", f"{az_store.root}/report/latest",
               "--output", f"{az_store.root}/pages/report.html", cwd=tmp_path, timeout=300)
    assert page.returncode == 0, page.stdout + page.stderr
    assert f"report: {az_store.root}/pages/report.html" in page.stdout
    html = az_store.text("pages/report.html")
    assert all(run_id in html for run_id in run_ids.values())
    assert 'src="data:audio/ogg;base64,T2dnUw' in html  # the audio was fetched for the page
    assert list(tmp_path.iterdir()) == []


def test_a_missing_bucket_or_a_wrong_key_is_a_configuration_error_in_one_line(store, tmp_path):
    scheme = store.root.partition("://")[0]
    refusals = [(store.env, f"{scheme}://no-such-bucket/runs")]
    if store.server is not None:  # Azure: the connection string's key is not the account's
        wrong = store.env["AZURE_STORAGE_CONNECTION_STRING"].replace(
            store.server.account_key, base64.b64encode(b"another key" * 3).decode())
        refusals.append(({**store.env, "AZURE_STORAGE_CONNECTION_STRING": wrong},
                         f"{store.root}/refused"))
    for env, url in refusals:
        result = cli(env, "run", str(EXAMPLE), "--artifacts-dir", url, cwd=tmp_path, timeout=60)
        assert result.returncode == 2, result.stdout + result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"--artifacts-dir: cannot write to the store folder {url}" \
            in lines[0]
        assert "AccountKey" not in lines[0] and "<?xml" not in lines[0]
        if url.endswith("/refused"):  # the store's own code, not its whole XML reply
            assert lines[0].endswith("(AuthenticationFailed)"), lines[0]
        else:  # gcsfs: a bare FileNotFoundError(url); adlfs: the service's words and code
            assert lines[0].endswith(("(ContainerNotFound)", "/b/no-such-bucket/o)")), lines[0]
            assert "no such bucket or container" in lines[0] or store.server is not None
    if store.server is not None:
        assert store.server.blob_names(BUCKET, "refused") == []
        store.server.rejected_signatures = 0  # those were meant to be refused


def test_a_store_that_denies_the_trial_uploads_fails_the_run_and_keeps_the_evidence(az_store):
    """Azure accepts the write probe and LATEST but denies the trial objects (a role without
    write permission on that prefix): exit 4, the store's reason in one line, nothing lost."""
    server = az_store.server
    server.deny_writes_containing = "/trial-"
    try:
        outcome = asyncio.run(voicelab.arun(voicelab.load_run(EXAMPLE), voicelab.RunOptions(
            trials=1,
            artifacts_dir=f"{az_store.root}/denied")))
    finally:
        server.deny_writes_containing = None
    try:
        assert outcome.exit_code == 4
        [problem] = outcome.write_errors
        assert problem.startswith(f"could not publish to {az_store.root}/denied: ")
        assert "not authorized to perform this operation using this permission. " \
            "(AuthorizationPermissionMismatch); the evidence is kept in " in problem
        assert "<?xml" not in problem and "\n" not in problem
        kept = outcome.bundle_path / "trial-001"
        assert {p.name for p in kept.iterdir()} >= set(TRIAL_FILES)
        assert not [n for n in server.blob_names(BUCKET, "denied/") if "/trial-" in n]
    finally:
        shutil.rmtree(outcome.bundle_path, ignore_errors=True)
