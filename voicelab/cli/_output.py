"""What every command's output shares: the program name, and paths shown relative to the
working directory (messages stay short and a CI log stays readable); a reader that leaves
early (``| head``) ends nothing with an error."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

PROG = "voice-evaluator"


def relative(text: str) -> str:
    cwd = os.getcwd().rstrip("/") + "/"
    return text.replace(cwd, "")


class ReaderMayLeave:
    """Standard output that a reader may close early (``voice-evaluator run ... | head -1``).

    Once the reader has gone, what is still to be printed is dropped without a word, as Unix
    tools stay quiet on a closed pipe; the command itself goes on to its end (a run still
    writes its whole bundle) and exits with its own code, which ``set -o pipefail`` reports.
    The file descriptor is pointed at /dev/null, so the interpreter's last flush is quiet too.
    """

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.reader_gone = False

    def _gone(self) -> None:
        self.reader_gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass  # not a file descriptor (captured output): nothing to flush later

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def quiet_when_reader_leaves() -> Iterator[None]:
    """``sys.stdout`` as :class:`ReaderMayLeave` for the duration of a command."""
    original = sys.stdout
    guarded = ReaderMayLeave(original)
    sys.stdout = guarded
    try:
        yield
        guarded.flush()
    finally:
        if sys.stdout is guarded:
            sys.stdout = original
