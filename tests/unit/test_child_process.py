"""Every child process (the scoring process, a local worker, a Dask trial process) is started the
same way and talks over the same channel: it imports the parent's modules, messages carry their
buffers out of band, and its log records reach the parent's loggers."""

from __future__ import annotations

import logging
import os
import pickle
import socket
import threading
from pathlib import Path

import pytest

import voicelab
from voicelab.execution._child import (
    Channel,
    Frame,
    RecordCollector,
    collected,
    ended_how,
    handle_records,
    start_child,
)

ENTRY = '''
import voicelab
from voicelab.execution._child import Channel


def report(fd):
    channel = Channel.of_fd(fd)
    channel.send({"voicelab": voicelab.__file__, "niceness": __import__("os").nice(0)})
    assert channel.receive() == "bye"
'''


@pytest.fixture
def entries(tmp_path: Path, monkeypatch) -> None:
    """A module of child entry points on this process's import path (so on the child's)."""
    folder = tmp_path / "entries"
    folder.mkdir()
    (folder / "child_entries.py").write_text(ENTRY)
    monkeypatch.syspath_prepend(str(folder))


def test_a_child_started_in_a_folder_with_another_voicelab_imports_the_parents(tmp_path: Path,
                                                                               monkeypatch,
                                                                               entries):
    shadow = tmp_path / "voicelab"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the shadowing copy was imported')\n")
    monkeypatch.chdir(tmp_path)
    child = start_child("child_entries:report", niceness=3)
    try:
        said = child.channel.receive()
        child.channel.send("bye")
    finally:
        assert child.wait_ended(30) == 0
        child.channel.close()
    assert os.path.samefile(said["voicelab"], voicelab.__file__)
    assert said["niceness"] == min(19, os.nice(0) + 3)  # lowered before it imported anything


def test_an_entry_point_must_be_a_module_and_a_function():
    for entry in ("child_entries", "child_entries:report()", "os; import x:y", ":report"):
        with pytest.raises(ValueError, match="not an entry point"):
            start_child(entry)


def test_how_a_child_ended_is_said_in_words():
    assert ended_how(0) == "exit code 0" and ended_how(3) == "exit code 3"
    assert ended_how(-9) == "killed by SIGKILL" and ended_how(None) == "still running"


def _pair() -> tuple[Channel, Channel]:
    ours, theirs = socket.socketpair()
    return Channel(ours), Channel(theirs)


def test_the_channel_carries_a_pickle_and_hundreds_of_buffers_in_order():
    """More buffers than one sendmsg takes and more bytes than the socket holds: the receiver
    gets every byte in order (partial sends resume mid-buffer), out of band."""
    sender, receiver = _pair()
    payload = {"chunks": [pickle.PickleBuffer(bytes([n % 251]) * (997 + n)) for n in range(1300)],
               "empty": pickle.PickleBuffer(b""), "name": "call"}
    frame = Frame.of(payload)
    assert len(frame.buffers) == 1301 and frame.data.nbytes < 100_000  # not in the pickle
    thread = threading.Thread(target=sender.send_frame, args=(frame,))
    thread.start()
    received = receiver.receive()
    thread.join()
    assert received["name"] == "call" and bytes(received["empty"]) == b""
    assert [bytes(c) for c in received["chunks"]] == \
        [bytes([n % 251]) * (997 + n) for n in range(1300)]
    sender.close()
    with pytest.raises(EOFError):
        receiver.receive()
    receiver.close()


def test_senders_of_several_threads_never_interleave_their_messages():
    sender, receiver = _pair()
    big = [bytes([n]) * 200_000 for n in range(8)]

    def send(n: int) -> None:
        for _ in range(5):
            sender.send(("message", n, big[n]))

    threads = [threading.Thread(target=send, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    got = [receiver.receive() for _ in range(40)]
    for thread in threads:
        thread.join()
    assert sorted(n for _, n, _ in got) == sorted(list(range(8)) * 5)
    assert all(data == big[n] for _, n, data in got)
    sender.close()
    receiver.close()


def test_a_childs_records_reach_the_parents_loggers(caplog):
    """Collected in the child (only those of the work in this context), pickled without what
    a caller attached, handled by the loggers of the same names here."""
    collector = RecordCollector(logging.INFO)
    package = logging.getLogger("voicelab")
    # a worker's trial service started in this process by an earlier test left its own
    # collector on the package logger: it would collect every record a second time
    others = [h for h in package.handlers if isinstance(h, RecordCollector)]
    for handler in others:
        package.removeHandler(handler)
    package.addHandler(collector)
    level, package.level = package.level, logging.INFO  # as in a child
    try:
        logging.getLogger("voicelab.test").warning("before: not collected")
        with collected() as records:
            logging.getLogger("voicelab.test").info("trial %s done", "trial-001",
                                                    extra={"handle": threading.Lock()})
            try:
                raise ValueError("a secret-free failure")
            except ValueError:
                logging.getLogger("voicelab.test").exception("it failed")
        logging.getLogger("voicelab.test").warning("after: not collected")
    finally:
        package.removeHandler(collector)
        for handler in others:
            package.addHandler(handler)
        package.setLevel(level)
    crossed = pickle.loads(pickle.dumps(records))
    assert [r.getMessage() for r in crossed] == ["trial trial-001 done", "it failed"]
    assert "ValueError: a secret-free failure" in crossed[1].exc_text
    assert crossed[0].process == os.getpid() and not hasattr(crossed[0], "handle")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="voicelab"):
        handle_records(crossed, note="[worker host:1]")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("voicelab.test", logging.INFO, "trial trial-001 done [worker host:1]"),
        ("voicelab.test", logging.ERROR, "it failed [worker host:1]")]
    assert "ValueError" in caplog.text
