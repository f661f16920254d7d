"""Addresses on the command line are hostile input too: something that is not a Dask scheduler
at ``--scheduler``, a store endpoint that never answers. Each is one line and exit 2, in bounded
time (the store's own retries would take a minute; a non-Dask peer's bytes read as a frame of
exabytes raised a MemoryError)."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from voicelab.artifacts import _store
from voicelab.cli import main

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"


def serve(answer: bytes | None) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers every connection with ``answer`` (None: says
    nothing, and keeps the connection open)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            held.append(client)
            if answer is not None:
                try:
                    client.sendall(answer)
                except OSError:
                    pass

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        for client in held:
            client.close()


@pytest.fixture()
def http_server() -> Iterator[int]:
    yield from serve(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" + b"\xff" * 64)


@pytest.fixture()
def silent_server() -> Iterator[int]:
    yield from serve(None)


def one_line(capsys: pytest.CaptureFixture[str], code: int) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "MemoryError" not in err, err
    return lines[0]


def test_a_scheduler_address_that_is_no_dask_scheduler_exits_2(http_server, tmp_path, capsys):
    pytest.importorskip("distributed", reason="needs voicelab[dask]")
    suite = tmp_path / "suite"
    shutil.copytree(SEED, suite)
    code = main(["run", str(suite / RUN), "--executor", "dask", "--scheduler",
                 f"tcp://127.0.0.1:{http_server}", "--artifacts-dir", str(tmp_path / "runs"),
                 "--quiet"])
    line = one_line(capsys, code)
    assert "--scheduler" in line and "not a Dask scheduler" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", [
    ["report", "s3://voicelab-runs/run", "--output", "{tmp}/r.html"],
    ["run", str(SEED / RUN), "--resume", "s3://voicelab-runs/runs/latest"],
    ["rescore", "s3://voicelab-runs/run"],
])
def test_a_store_that_never_answers_is_refused_in_bounded_time(silent_server, tmp_path, capsys,
                                                               monkeypatch, command):
    pytest.importorskip("s3fs", reason="needs voicelab[s3]")
    import fsspec

    monkeypatch.setattr(_store, "STORE_ANSWER_SECONDS", 1.0)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setitem(fsspec.config.conf, "s3",
                        {"endpoint_url": f"http://127.0.0.1:{silent_server}"})
    code = main([part.replace("{tmp}", str(tmp_path)) for part in command])
    line = one_line(capsys, code)
    assert "did not answer within 1 s" in line
