"""Servers shared by the integration tests: an S3-compatible store (moto's server mode) and a
real Dask cluster (the ``dask scheduler`` and ``dask worker`` CLIs), both on 127.0.0.1; and
one real run of the seed suite per test process, of which each test gets a copy
(``seed_bundle``); the SIP doubles and the raw callers that drive them (``sip_doubles``,
``sip_callers``: ``_sip_double_caller.py``).

A test module that needs its Dask workers in another environment (store credentials, a home
of their own) overrides the ``dask_worker_env`` fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _sip_double_caller import Caller, Doubles

ROOT = Path(__file__).resolve().parents[2]
#: The bucket the ``s3`` fixture creates.
S3_BUCKET = "voicelab-runs"


@dataclass
class S3:
    endpoint: str
    env: dict[str, str]
    fs: Any
    bucket: str = S3_BUCKET

    def json(self, path: str) -> dict[str, Any]:
        self.fs.invalidate_cache()
        return json.loads(self.fs.cat_file(f"{self.bucket}/{path}"))  # type: ignore[no-any-return]

    def names(self, path: str) -> set[str]:
        self.fs.invalidate_cache()
        return {p.rpartition("/")[2] for p in self.fs.find(f"{self.bucket}/{path}")}


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    """moto's S3 server on 127.0.0.1 with one bucket. Subprocesses reach it through ``env``
    (AWS credentials, the endpoint in ``FSSPEC_S3_ENDPOINT_URL``: fsspec's configuration); this
    process through the same credentials and ``fsspec.config.conf``."""
    pytest.importorskip("s3fs", reason="the s3:// store tests need s3fs (pip install "
                                       "'voicelab[s3]')")
    moto_server = pytest.importorskip("moto.server", reason="the S3 server double is moto's "
                                                            "(pip install 'moto[server]')")
    import fsspec

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1"}
    env = {**os.environ, **credentials, "FSSPEC_S3_ENDPOINT_URL": endpoint}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in credentials.items():
            patch.setenv(name, value)
        patch.setitem(fsspec.config.conf, "s3", {"endpoint_url": endpoint})
        fs = fsspec.filesystem("s3", endpoint_url=endpoint, skip_instance_cache=True)
        fs.mkdir(S3_BUCKET)
        try:
            yield S3(endpoint, env, fs)
        finally:
            # moto keeps its buckets in this process, across servers: the next module's
            # server starts empty
            urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset",
                                                          method="POST"), timeout=30).close()
            server.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def dask_worker_env() -> dict[str, str]:
    """The environment of the Dask workers (and scheduler): this one, importing this voicelab."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _client(distributed, address: str):
    """A client of the scheduler at ``address``; a scheduler still starting on a busy machine
    may close the first connection during its handshake: tried again, for a minute at most."""
    for attempt in range(6):
        try:
            return distributed.Client(address, timeout=60)
        except (OSError, distributed.comm.CommClosedError):
            if attempt == 5:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


@pytest.fixture
def dask_cluster(tmp_path: Path, dask_worker_env: dict[str, str]
                 ) -> Iterator[tuple[str, dict[str, int]]]:
    """A scheduler and two workers (no nanny: the worker is the process we may kill), each
    running up to two trials at once. Yields the address and {worker address: pid}."""
    distributed = pytest.importorskip("distributed")
    address = f"tcp://127.0.0.1:{free_port()}"
    dask = [sys.executable, "-m", "dask"]
    scratch = tmp_path / "dask-scratch"
    processes = [subprocess.Popen(
        [*dask, "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
         "--no-dashboard"], env=dask_worker_env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)]
    try:
        for name in ("w1", "w2"):
            processes.append(subprocess.Popen(
                [*dask, "worker", address, "--name", name, "--nthreads", "2", "--no-nanny",
                 "--no-dashboard", "--host", "127.0.0.1", "--local-directory", str(scratch)],
                env=dask_worker_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with _client(distributed, address) as client:
            client.wait_for_workers(2, timeout=90)
            pids = client.run(os.getpid)
        yield address, pids
    finally:  # the workers first: a worker whose scheduler is gone waits to reconnect
        for group in (processes[1:], processes[:1]):
            for process in group:
                process.terminate()
            for process in group:
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)


def _interrupt_after_first_trial(command: Sequence[str], artifacts: Path, *,
                                env: Mapping[str, str] | None = None, cwd: Path | None = None,
                                wait_seconds: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (a run writing below ``artifacts``) and send it SIGINT once its first
    trial's report is written; the finished process (its output, its exit code)."""
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=None if env is None else dict(env), cwd=cwd)
    try:
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline and not list(
                artifacts.glob("*/trial-001/trial-report.json")):
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=wait_seconds)
    finally:
        if process.poll() is None:
            process.kill()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture(scope="session")
def interrupt_after_first_trial():
    """``interrupt_after_first_trial(command, artifacts, env=, cwd=, wait_seconds=)``: run a
    command and SIGINT it once its first trial is written (the finished process)."""
    return _interrupt_after_first_trial


#: The fake product, but on even trials its reply names none of the scenario's expected topics:
#: a run of it has a trial that passes and one that fails.
EVEN_TRIALS_FAIL = '''
from voicelab.doubles.product import FakeProductEndpoint


class EvenTrialsFail(FakeProductEndpoint):
    """The fake product; on even trials its reply names none of the expected topics."""

    def build_product(self, behaviour, context):
        if context.trial_index % 2 == 0:
            behaviour = behaviour.model_copy(update={"reply_text": "Goodbye."})
        return super().build_product(behaviour, context)
'''


@pytest.fixture(scope="session")
def alternating_suite() -> Any:
    """``make(folder, module)``: the seed example's files copied into ``folder`` with the
    product above in ``module.py`` beside them; returns the ``--set`` that selects it."""
    import shutil

    def make(folder: Path, module: str) -> str:
        for path in (ROOT / "examples").glob("*workload-neutral-voice.yaml"):
            shutil.copy(path, folder / path.name)
        (folder / f"{module}.py").write_text(EVEN_TRIALS_FAIL)
        return f"endpoint.adapter={module}.EvenTrialsFail"

    return make


#: The seed suite (the workload-neutral example as the tests pin it) and its run file.
SEED = ROOT / "tests" / "fixtures" / "seed"
SEED_RUN = "run-workload-neutral-voice.yaml"


@pytest.fixture(scope="session")
def seed_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed suite's files copied into a folder of their own (the run file is
    ``seed_suite / SEED_RUN``); tests read it and never change it."""
    folder = tmp_path_factory.mktemp("seed-suite")
    for path in SEED.glob("*.yaml"):
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture(scope="session")
def seed_run(seed_suite: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle of one real two-trial run of the seed suite (the fake product), made once per
    test process: a module needing a bundle to damage, resume or re-score shares it (with
    ``--dist loadfile`` each worker runs it at most once). Read it, never change it: a test
    that writes takes ``seed_bundle``."""
    import voicelab

    outcome = voicelab.run(seed_suite / SEED_RUN, voicelab.RunOptions(
        trials=2, artifacts_dir=tmp_path_factory.mktemp("seed-runs")))
    assert outcome.exit_code == 0
    return outcome.bundle_path


@pytest.fixture()
def seed_bundle(seed_run: Path, tmp_path: Path) -> Path:
    """A fresh copy of ``seed_run`` for this test alone."""
    copy = tmp_path / "bundle"
    shutil.copytree(seed_run, copy)
    return copy


@pytest.fixture(scope="module")
def sip_doubles() -> Iterator[Doubles]:
    """A module's SIP doubles (``_sip_double_caller.Doubles``): one per settings, on one loop
    thread, stopped after the module."""
    from _sip_double_caller import serve_doubles

    yield from serve_doubles()


@pytest.fixture
def sip_callers() -> Iterator[Callable[..., Caller]]:
    """``sip_callers(port, transport="udp")``: a raw SIP/RTP caller of a double
    (``_sip_double_caller.Caller``), closed after the test."""
    from _sip_double_caller import make_callers

    yield from make_callers()
