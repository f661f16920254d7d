"""Python child processes: how every child of voicelab is started and how it talks to its parent.

The scoring process, a local worker process and a Dask worker's trial process are started the
same way: a plain ``python -P -c`` subprocess on a socket pair (:func:`start_child`), not a
:mod:`multiprocessing` child. Spawning one re-runs the caller's main script unless it is guarded
by ``if __name__ == "__main__"`` (a script calling ``voicelab.run`` need not be), and a Dask
nanny's daemonic worker may not have multiprocessing children at all. A child may run at a
lower priority (``niceness``), set before it imports anything.

Parent and child exchange pickled messages over a :class:`Channel`: each message is a pickle
(protocol 5) whose large buffers (a call's PCM streams) travel out of band, not copied into it;
its header (the pickle's size, the buffers' count and sizes), the pickle and the buffers are
handed to the kernel with as few ``sendmsg`` calls as it takes (the GIL is released during
each) and read back into one buffer. Encoding (:meth:`Frame.of`) and decoding
(:meth:`Frame.load`) are separate from sending and receiving, so a thread that only waits on
the socket does no Python work while an event loop runs beside it.

A child's log records travel back with the result of the work they belong to
(:class:`RecordCollector` in the child, :func:`handle_records` in the parent), so they reach the
run's evaluator.log and console as if logged in the parent.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

#: The header of a message: the pickle's size and the number of out-of-band buffers, followed
#: by each buffer's size.
_HEAD = struct.Struct("<QI")
_SIZE = struct.Struct("<Q")
#: Buffers per ``sendmsg`` (Linux takes up to 1024).
_PARTS_PER_SEND = 512


@dataclass
class Frame:
    """One message: a pickle and its out-of-band buffers (empty ones included)."""

    data: memoryview
    buffers: list[memoryview]

    @classmethod
    def of(cls, value: Any) -> Frame:
        """``value`` pickled (protocol 5), its :class:`pickle.PickleBuffer` s kept out of band."""
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
        return cls(memoryview(data), [buffer.raw() for buffer in buffers])

    def load(self) -> Any:
        return pickle.loads(self.data, buffers=self.buffers)

    def header(self) -> bytes:
        sizes = [view.nbytes for view in self.buffers]
        return _HEAD.pack(self.data.nbytes, len(sizes)) + b"".join(_SIZE.pack(s) for s in sizes)


class Channel:
    """One end of a parent-child socket: whole messages in and out. Sending is thread-safe;
    one thread receives."""

    def __init__(self, sock: socket.socket):
        self._socket = sock
        self._send_lock = threading.Lock()

    @classmethod
    def of_fd(cls, fd: int) -> Channel:
        """The child's end, from the file descriptor its parent passed."""
        return cls(socket.socket(fileno=fd))

    def fileno(self) -> int:
        return self._socket.fileno()

    def send(self, value: Any) -> None:
        self.send_frame(Frame.of(value))

    def send_frame(self, frame: Frame) -> None:
        """Send every part, in order, with as few system calls as the kernel allows."""
        parts = [memoryview(frame.header()), *(p for p in (frame.data, *frame.buffers) if p.nbytes)]
        with self._send_lock:
            at = 0
            while at < len(parts):
                sent = self._socket.sendmsg(parts[at:at + _PARTS_PER_SEND])
                while sent:
                    size = parts[at].nbytes
                    if sent < size:
                        parts[at] = parts[at][sent:]
                        break
                    sent -= size
                    at += 1

    def receive(self) -> Any:
        return self.receive_frame().load()

    def receive_frame(self) -> Frame:
        """The next message, read into one buffer (EOFError when the other end closed)."""
        size, count = _HEAD.unpack(self._read(_HEAD.size))
        sizes = struct.unpack(f"<{count}Q", self._read(_SIZE.size * count)) if count else ()
        view = memoryview(self._read(size + sum(sizes)))
        buffers, at = [], size
        for length in sizes:
            buffers.append(view[at:at + length])
            at += length
        return Frame(view[:size], buffers)

    def _read(self, size: int) -> bytearray:
        data = bytearray(size)
        view = memoryview(data)
        received = 0
        while received < size:
            got = self._socket.recv_into(view[received:])
            if not got:
                raise EOFError("the other end closed the channel")
            received += got
        return data

    def close(self) -> None:
        self._socket.close()


def ended_how(returncode: int | None) -> str:
    """``killed by SIGKILL``, ``exit code 1``, or ``still running`` (``returncode`` None)."""
    if returncode is None:
        return "still running"
    if returncode < 0 and -returncode in signal.valid_signals():
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


@dataclass
class Child:
    """The parent's end of a child: its process and its channel."""

    process: subprocess.Popen[bytes]
    channel: Channel

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ended(self, seconds: float) -> int:
        """Its exit code, killing it when it has not ended within ``seconds``."""
        try:
            return self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def start_child(entry: str, *, niceness: int | None = None,
                drop_environment: Iterable[str] = ()) -> Child:
    """Start ``python -c`` running ``entry`` (``package.module:function``, called with the file
    descriptor of the child's end of the socket).

    The child imports what the parent imports: its import path is the parent's (a process
    started with PYTHONPATH or from a folder of plug-ins finds the same modules), and only that:
    ``-P`` keeps ``python -c`` from putting the working directory first, where another copy of
    a package (a checkout the user stands in) would shadow the parent's. ``niceness`` is added
    to the child's before it imports anything, so even its imports yield the cores."""
    module, _, function = entry.partition(":")
    if not all(part.isidentifier() for part in module.split(".")) or not function.isidentifier():
        raise ValueError(f"not an entry point 'package.module:function': {entry!r}")
    nice = f"os.nice({int(niceness)})\n" if niceness else ""
    command = (f"import os, sys\n{nice}from {module} import {function}\n"
               f"{function}(int(sys.argv[1]))")
    dropped = set(drop_environment)
    environment = {name: value for name, value in os.environ.items() if name not in dropped}
    environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            [sys.executable, "-P", "-c", command, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env=environment, stdin=subprocess.DEVNULL)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return Child(process, Channel(ours))


# --- log records, from the child to the parent ------------------------------------------------

_collecting: contextvars.ContextVar[list[logging.LogRecord] | None] = \
    contextvars.ContextVar("voicelab_child_records", default=None)
_FORMATTER = logging.Formatter()


class RecordCollector(logging.Handler):
    """In a child, on the package logger: the records of the work in progress in this context
    (a call being scored, a trial), to be sent back with its result (:func:`collected`)."""

    def emit(self, record: logging.LogRecord) -> None:
        records = _collecting.get()
        if records is not None:
            records.append(portable(record))


@contextlib.contextmanager
def collected() -> Iterator[list[logging.LogRecord]]:
    """Collect the records logged in this context while the block runs."""
    records: list[logging.LogRecord] = []
    token = _collecting.set(records)
    try:
        yield records
    finally:
        _collecting.reset(token)


def collect_in_this_context() -> list[logging.LogRecord]:
    """Collect the records logged from now on in this context (a task's: it ends with it)."""
    records: list[logging.LogRecord] = []
    _collecting.set(records)
    return records


#: The attributes of a record that cross to the parent (anything else a caller attached may not
#: pickle).
_PORTABLE = ("name", "levelno", "levelname", "pathname", "filename", "module", "lineno",
             "funcName", "created", "msecs", "relativeCreated", "thread", "threadName",
             "processName", "process", "taskName", "stack_info")


def portable(record: logging.LogRecord) -> logging.LogRecord:
    """A copy of ``record`` that pickles: its message formatted, its traceback as text."""
    fields = {name: getattr(record, name, None) for name in _PORTABLE}
    fields["msg"] = record.getMessage()
    fields["args"] = None
    fields["exc_text"] = record.exc_text or (
        _FORMATTER.formatException(record.exc_info) if record.exc_info else None)
    return logging.makeLogRecord(fields)


def handle_records(records: Iterable[logging.LogRecord], *, note: str = "") -> None:
    """A child's records, handled by the parent's loggers of the same names (its handlers: the
    run's evaluator.log, the console); ``note`` is appended to each message."""
    for record in records:
        if note:
            record.msg = f"{record.msg} {note}"
        logging.getLogger(record.name).handle(record)
