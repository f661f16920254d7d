"""Store URLs, the latest pointer and the publisher's order (an in-memory fsspec store that
records every call it receives)."""

from __future__ import annotations

import asyncio
import enum
import json
import shutil
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import voicelab
from voicelab._location import as_local_path, is_url, url_scheme
from voicelab.artifacts import fetch, fetch_missing, local_folder
from voicelab.artifacts._publish import Publisher
from voicelab.artifacts._store import (
    open_location,
    point_latest,
    published_location,
    register_staging,
    resolve_latest,
    resolve_local_latest,
    store_error_reason,
    unregister_staging,
)
from voicelab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


class RecordingMemoryFileSystem(MemoryFileSystem):
    """The in-memory store, plus the order in which objects were put and removed."""

    protocol = "recordingmem"
    store: dict = {}  # its own, not the process's memory:// store
    pseudo_dirs = [""]
    calls: list[tuple[str, str]] = []

    @classmethod
    def _strip_protocol(cls, path):  # type: ignore[no-untyped-def] - fsspec's backend hook
        if isinstance(path, str) and path.startswith("recordingmem://"):
            path = "memory://" + path[len("recordingmem://"):]
        return super()._strip_protocol(path)

    def pipe_file(self, path, value, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(("put", self._strip_protocol(path)))
        return super().pipe_file(path, value, *args, **kwargs)

    def put_file(self, lpath, rpath, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(("put", self._strip_protocol(rpath)))
        return super().put_file(lpath, rpath, *args, **kwargs)

    def get_file(self, rpath, lpath, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(("get", self._strip_protocol(rpath)))
        return super().get_file(rpath, lpath, *args, **kwargs)

    def rm_file(self, path):  # type: ignore[no-untyped-def]
        self.calls.append(("rm", self._strip_protocol(path)))
        return super().rm_file(path)


fsspec.register_implementation("recordingmem", RecordingMemoryFileSystem, clobber=True)


@pytest.fixture
def store():
    """A fresh ``recordingmem://`` store (the memory store is one per process: cleared)."""
    fs = fsspec.filesystem("recordingmem")
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
    RecordingMemoryFileSystem.calls.clear()
    yield fs
    fs.store.clear()


def test_urls_are_told_from_paths():
    assert url_scheme("s3://bucket/runs") == "s3" and is_url("memory://runs")
    assert is_url("GS://bucket") and url_scheme("GS://bucket") == "gs"
    for local in ("artifacts", "/tmp/runs", r"C:\runs", "file:///tmp/runs", Path("s3:/b"), "s3:x"):
        assert not is_url(local), local
    assert as_local_path("file:///tmp/runs") == Path("/tmp/runs")
    assert open_location("file:///tmp/runs") == Path("/tmp/runs")


def test_an_unknown_scheme_is_a_configuration_error():
    with pytest.raises(ConfigError) as raised:
        open_location("nope://bucket/runs", key="artifacts_dir")
    assert raised.value.one_line().startswith("artifacts_dir: unknown storage scheme nope://")


@pytest.mark.parametrize(("url", "package", "extra"), [
    ("gs://bucket/runs", "gcsfs", "gcs"), ("az://container/runs", "adlfs", "azure-storage")])
def test_a_store_without_its_package_names_the_extra_to_install(url, package, extra):
    # in a process of its own where the package cannot be imported (it may be installed here,
    # and fsspec keeps a class it has loaded once)
    probe = (f"import sys; sys.modules[{package!r}] = None\n"
             "from voicelab.artifacts._store import open_location\n"
             "from voicelab.errors import MissingDependencyError\n"
             "try:\n"
             f"    open_location({url!r}, source='CLI', key='--artifacts-dir')\n"
             "except MissingDependencyError as error:\n"
             "    print(error.one_line())\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    assert result.stdout.strip() == (
        f"CLI: --artifacts-dir: the {url.partition(':')[0]}:// artifact store needs the "
        f"{package!r} package: pip install 'voicelab[{extra}]'"), result.stderr


def test_a_store_url_in_the_config_stays_a_url(tmp_path):
    loaded = voicelab.load_run(EXAMPLE, overrides=["artifacts_dir=s3://bucket/runs"])
    assert loaded.run.artifacts_dir == "s3://bucket/runs"
    local = voicelab.load_run(EXAMPLE, overrides=["artifacts_dir=file:///tmp/voicelab-runs"])
    assert local.run.artifacts_dir == Path("/tmp/voicelab-runs")
    relative = voicelab.load_run(EXAMPLE, overrides=["artifacts_dir=some/runs"])
    assert relative.run.artifacts_dir == EXAMPLE.parent / "some" / "runs"


def _trial(folder: Path, *, report: bool = True) -> None:
    folder.mkdir(parents=True)
    for name in ("voice-events.jsonl", "voice-metrics.json", "mixed.wav"):
        (folder / name).write_bytes(name.encode())
    if report:
        (folder / "trial-report.json").write_text('{"schema_version": "2.0"}')


def test_the_publisher_puts_each_trial_report_last_and_the_run_report_after_it(tmp_path,
                                                                                store):
    staging = tmp_path / "staging"
    run = staging / "run-1"
    _trial(run / "trial-001")
    _trial(run / "trial-002", report=False)  # still running
    (run / "run-report.json").write_text("{}")
    (run / "evaluator.log").write_text("log\n")
    (run / ".run-report.json.x.tmp").write_text("a temporary file of an atomic write")
    target = open_location("recordingmem://runs")
    publisher = Publisher(staging, target)
    publisher.sync()
    puts = [path for kind, path in store.calls if kind == "put"]
    assert puts[-2:] == ["/runs/run-1/trial-001/trial-report.json", "/runs/run-1/run-report.json"]
    assert sorted(puts[:-2]) == [f"/runs/run-1/trial-001/{name}" for name in
                                 ("mixed.wav", "voice-events.jsonl", "voice-metrics.json")]
    assert not (run / "trial-001").exists()  # published: off the local disk
    assert (run / "trial-002").exists()  # unfinished and the log: not yet
    store.calls.clear()
    publisher.sync()
    assert store.calls == []  # nothing changed
    publisher.sync(final=True)  # the end of the run: what was cut short goes too, no report
    puts = sorted(path for _, path in store.calls)
    assert puts == ["/runs/run-1/evaluator.log", *(f"/runs/run-1/trial-002/{name}" for name in
                                                   ("mixed.wav", "voice-events.jsonl",
                                                    "voice-metrics.json"))]


def test_finished_trials_of_a_new_run_go_side_by_side_reports_after_every_file(tmp_path,
                                                                              store):
    staging = tmp_path / "staging"
    for index in range(1, 4):
        _trial(staging / "run-1" / f"trial-00{index}")
    Publisher(staging, open_location("recordingmem://runs"), fresh=True).sync()
    puts = [path for kind, path in store.calls if kind == "put"]
    assert len(puts) == 12
    assert sorted(puts[-3:]) == [f"/runs/run-1/trial-00{i}/trial-report.json" for i in (1, 2, 3)]
    assert not any(p.endswith("trial-report.json") for p in puts[:-3])
    assert ("rm", "/runs/run-1/trial-001/trial-report.json") not in store.calls
    assert not list((staging / "run-1").iterdir())


def test_a_republished_trial_loses_its_old_report_first_and_its_stale_objects(tmp_path, store):
    store.pipe_file("/runs/run-1/trial-001/trial-report.json", b'{"old": true}')
    store.pipe_file("/runs/run-1/trial-001/stale.wav", b"from the interrupted attempt")
    store.pipe_file("/runs/run-1/trial-001/mixed.wav", b"old audio")
    RecordingMemoryFileSystem.calls.clear()
    staging = tmp_path / "staging"
    _trial(staging / "run-1" / "trial-001")
    Publisher(staging, open_location("recordingmem://runs")).sync()
    calls = RecordingMemoryFileSystem.calls
    assert calls[0] == ("rm", "/runs/run-1/trial-001/trial-report.json")
    assert calls[-1] == ("put", "/runs/run-1/trial-001/trial-report.json")
    assert sorted(store.find("/runs/run-1/trial-001")) == [
        f"/runs/run-1/trial-001/{name}" for name in
        ("mixed.wav", "trial-report.json", "voice-events.jsonl", "voice-metrics.json")]
    assert store.cat_file("/runs/run-1/trial-001/mixed.wav") == b"mixed.wav"


def test_a_resumed_copy_is_not_published_again(tmp_path, store):
    staging = tmp_path / "staging"
    _trial(staging / "run-1" / "trial-001")
    publisher = Publisher(staging, open_location("recordingmem://runs"))
    publisher.mark_present()
    publisher.sync(final=True)
    assert store.calls == [] and (staging / "run-1" / "trial-001").exists()


def test_latest_in_a_store_and_in_a_local_copy(tmp_path, store):
    root = open_location("recordingmem://runs")
    store.pipe_file("/runs/run-2/run-report.json", b"{}")
    point_latest(root, "run-2")
    assert store.cat_file("/runs/LATEST") == b"run-2\n"
    assert resolve_latest(root.child("latest")).url == "recordingmem://runs/run-2"
    assert resolve_latest(root.child("run-1")).url == "recordingmem://runs/run-1"
    (tmp_path / "run-2").mkdir()
    (tmp_path / "LATEST").write_text("run-2\n")
    assert resolve_local_latest(tmp_path / "latest") == tmp_path / "run-2"
    (tmp_path / "LATEST").write_text("../elsewhere\n")
    with pytest.raises(ConfigError, match="names no run folder"):
        resolve_local_latest(tmp_path / "latest")


def test_a_mirror_fetches_what_it_left_out_when_asked(tmp_path, store):
    store.pipe_file("/runs/run-1/run-report.json", json.dumps({"schema_version": "2.0"}).encode())
    store.pipe_file("/runs/run-1/trial-001/trial-report.json", b"{}")
    store.pipe_file("/runs/run-1/trial-001/mixed.wav", b"RIFF")
    local = fetch(open_location("recordingmem://runs/run-1"), tmp_path / "run-1",
                  names={"run-report.json", "trial-report.json"})
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()) == [
        ".voicelab-origin", "run-report.json", "trial-001/trial-report.json"]
    assert fetch_missing(local / "trial-001" / "mixed.wav")
    assert (local / "trial-001" / "mixed.wav").read_bytes() == b"RIFF"
    assert not fetch_missing(local / "trial-001" / "product.wav")
    with local_folder("recordingmem://runs/run-1") as copy:
        assert (copy / "trial-001" / "mixed.wav").is_file()
        kept = copy
    assert not kept.exists()
    with pytest.raises(ConfigError, match="no such run directory"):
        fetch(open_location("recordingmem://runs/run-9"), tmp_path / "run-9")


def test_staged_folders_are_reported_by_their_store_url(tmp_path):
    register_staging(tmp_path, "s3://bucket/runs")
    try:
        assert published_location(tmp_path / "run-1") == "s3://bucket/runs/run-1"
        assert published_location(tmp_path) == "s3://bucket/runs"
    finally:
        unregister_staging(tmp_path)
    assert published_location(tmp_path / "run-1") == str(tmp_path / "run-1")


def test_a_store_run_keeps_synthesized_speech_in_the_user_cache(tmp_path, monkeypatch, store):
    from voicelab.execution._staging import open_stage

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    stage = open_stage(open_location("recordingmem://runs"), resume=None, latest="run-1",
                       source=None)
    try:
        link = stage.staging / ".speech-cache"
        assert link.is_symlink() and link.resolve() == tmp_path / "cache" / "voicelab" / \
            "speech-cache"
        assert not store.exists("/runs/.voicelab-write-check")  # the probe was removed
        stage.publisher.sync()
        assert not store.exists("/runs/LATEST")  # no run folder yet: LATEST would name nothing
        (stage.staging / "run-1").mkdir()
        (stage.staging / "run-1" / "run-report.json").write_text("{}")
        stage.publisher.sync()
        assert store.cat_file("/runs/LATEST") == b"run-1\n"
        assert [path for _, path in store.calls][-2:] == ["/runs/run-1/run-report.json",
                                                          "/runs/LATEST"]
    finally:
        unregister_staging(stage.staging)
        shutil.rmtree(stage.staging)
    assert (tmp_path / "cache" / "voicelab" / "speech-cache").is_dir()  # the cache outlives it


def test_a_store_url_in_a_suite_stays_a_url(tmp_path):
    from voicelab.config import load_suite

    suite = tmp_path / "suite.yaml"
    suite.write_text(f"base: {EXAMPLE}\nartifacts_dir: gs://bucket/sweeps\n")
    assert load_suite(suite).suite.artifacts_dir == "gs://bucket/sweeps"
    suite.write_text(f"base: {EXAMPLE}\nartifacts_dir: sweeps\n")
    assert load_suite(suite).suite.artifacts_dir == tmp_path / "sweeps"


def test_a_trial_in_a_store_reads_as_a_local_one(tmp_path, store):
    from voicelab.artifacts import read_json, read_trial

    documents = {"trial-report.json": {"schema_version": "2.0", "passed": True},
                 "voice-metrics.json": {"schema_version": "2.0", "turns": []}}
    for name, document in documents.items():
        store.pipe_file(f"/runs/run-1/trial-001/{name}", json.dumps(document).encode())
    event = {"contract_version": "2.0", "sequence": 0, "event_type": "trial.started",
             "timestamp_utc": "2026-12-01T07:32:44.384772Z", "monotonic_offset_ns": 0,
             "listener_offset_ns": 0, "source": "runner", "direction": "internal"}
    store.pipe_file("/runs/run-1/trial-001/voice-events.jsonl",
                    json.dumps(event).encode() + b"\n")
    store.pipe_file("/runs/run-1/trial-001/mixed.wav", b"RIFF")
    trial = read_trial("recordingmem://runs/run-1/trial-001")
    assert trial["trial-report.json"] == documents["trial-report.json"]
    assert trial["voice-metrics.json"] == documents["voice-metrics.json"]
    assert trial["voice-events.jsonl"] == [event]  # every record checked, none altered
    fetched = sorted(path.rpartition("/")[2] for kind, path in store.calls if kind == "get")
    assert fetched == ["trial-report.json", "voice-events.jsonl", "voice-metrics.json"]  # no WAV
    assert read_json("recordingmem://runs/run-1/trial-001/trial-report.json")["passed"]
    store.pipe_file("/runs/run-1/newer.json", b'{"schema_version": "9.0"}')
    with pytest.raises(ConfigError, match="newer than this voicelab reads"):
        read_json("recordingmem://runs/run-1/newer.json")


def test_the_last_publish_is_finished_when_a_ctrl_c_lands_during_it():
    """A cancellation during the final publish waits for it (the store must not keep a
    "running" report), then goes on."""
    import threading

    from voicelab.execution._staging import _to_the_end

    started, release, published = threading.Event(), threading.Event(), threading.Event()

    def publish() -> str:
        started.set()
        release.wait(30)
        published.set()
        return "done"

    async def main() -> None:
        task = asyncio.ensure_future(_to_the_end(asyncio.to_thread(publish)))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()  # the cancellation waits for the publish
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert published.is_set()
        assert await _to_the_end(asyncio.to_thread(lambda: "again")) == "again"

    asyncio.run(main())


class _ErrorCode(enum.Enum):
    BLOB_NOT_FOUND = "BlobNotFound"


class _ServiceRefusal(Exception):
    """Shaped like azure-core's HttpResponseError: the service's code beside a multi-line text."""

    def __init__(self, text: str, error_code: object):
        super().__init__(text)
        self.error_code = error_code


@pytest.mark.parametrize(("error", "reason"), [
    (_ServiceRefusal("The blob does not exist.\nErrorCode:BlobNotFound\n<xml/>",
                     _ErrorCode.BLOB_NOT_FOUND), "The blob does not exist. (BlobNotFound)"),
    (_ServiceRefusal("Refused", "AuthenticationFailed"), "Refused (AuthenticationFailed)"),
    (_ServiceRefusal("BlobNotFound: gone", "BlobNotFound"), "BlobNotFound: gone"),
    (_ServiceRefusal("Refused", 403), "Refused"),
    (RuntimeError("  plain   failure \nmore"), "plain failure"),
])
def test_a_store_error_is_one_line_with_the_service_code(error: BaseException, reason: str) -> None:
    assert store_error_reason(error) == reason
