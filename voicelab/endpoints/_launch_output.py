"""A launched product's output: its two pipes read into lines, kept within a budget, and
matched against ``ready_pattern``.

Both output pipes are read by asyncio protocol callbacks as the data arrives, so the child never
blocks on a full pipe; each line is kept with the evaluator's monotonic clock and its stream
name, in a bounded buffer (``MAX_LOG_BYTES``, ``MAX_LOG_LINES``: the first quarter of each budget
keeps the start of the output, the rest the latest lines, and ``log_text`` says how many lines in
between were dropped). Each line gets at most ``MAX_MATCH_SECONDS`` of matching (the ``regex``
module's timeout): a pattern that backtracks catastrophically fails the launch instead of
hanging the event loop.

``_ProductOutput`` is the part of ``ProductProcess`` that does this; the state it reads is set
by ``ProductProcess.__init__``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..config import LaunchConfig, SecretScrubber

if TYPE_CHECKING:
    import regex

logger = logging.getLogger(__name__)

#: product.log keeps at most this many bytes of output text and this many lines (about 6 MB of
#: memory per product at most); the first quarter of each is the start of the output
MAX_LOG_BYTES = 2 * 1024 * 1024
MAX_LOG_LINES = 20_000
#: a longer line is cut here (the rest is counted, not kept), so a child that never prints a
#: newline cannot grow the buffer
MAX_LINE_BYTES = 4096
_LAST_STDERR_CHARS = 200
#: the most time ``ready_pattern`` may take on one output line (a plain pattern takes
#: microseconds on the longest line kept, ``MAX_LINE_BYTES``)
MAX_MATCH_SECONDS = 0.25
Stream = Literal["stdout", "stderr", "voicelab"]
_STREAMS: dict[int, Stream] = {1: "stdout", 2: "stderr"}


@dataclass(frozen=True, slots=True)
class LogLine:
    """One output line; ``time_ns`` is the evaluator's clock when the line's bytes were read."""

    time_ns: int
    stream: Stream
    text: str


# --- the bounded output buffer --------------------------------------------------------------

class _LineSplitter:
    """Bytes of one pipe -> complete lines, each cut at MAX_LINE_BYTES (the cut counted)."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._cut_bytes = 0

    def feed(self, data: bytes) -> list[tuple[bytes, int]]:
        lines = []
        *complete, rest = data.split(b"\n")
        for piece in complete:
            self._add(piece)
            lines.append(self._take())
        self._add(rest)
        return lines

    def flush(self) -> list[tuple[bytes, int]]:
        return [self._take()] if self._pending or self._cut_bytes else []

    def _add(self, piece: bytes) -> None:
        room = max(MAX_LINE_BYTES - len(self._pending), 0)
        self._pending += piece[:room]
        self._cut_bytes += max(len(piece) - room, 0)

    def _take(self) -> tuple[bytes, int]:
        line, cut = bytes(self._pending), self._cut_bytes
        self._pending.clear()
        self._cut_bytes = 0
        return line, cut


class _OutputLog:
    """The first lines of the output and the latest ones, within a byte and a line budget."""

    def __init__(self, *, max_bytes: int, max_lines: int):
        self.head_lines, self.head_bytes = max(max_lines // 4, 1), max_bytes // 4
        self.tail_lines, self.tail_bytes = max(max_lines - self.head_lines, 1), max_bytes - self.head_bytes
        self.head: list[LogLine] = []
        self.tail: deque[tuple[LogLine, int]] = deque()
        self._head_size = self._tail_size = 0
        self._head_open = True
        self.dropped_lines = self.dropped_bytes = 0

    def append(self, line: LogLine, size: int) -> None:
        if self._head_open:
            if len(self.head) < self.head_lines and self._head_size + size <= self.head_bytes:
                self.head.append(line)
                self._head_size += size
                return
            self._head_open = False  # from here on every line goes to the tail, keeping order
        self.tail.append((line, size))
        self._tail_size += size
        while self.tail and (len(self.tail) > self.tail_lines or self._tail_size > self.tail_bytes):
            _, dropped = self.tail.popleft()
            self._tail_size -= dropped
            self.dropped_lines += 1
            self.dropped_bytes += dropped

    def lines(self) -> list[LogLine]:
        return [*self.head, *(line for line, _ in self.tail)]


class _ProductOutput:
    """The output half of ``ProductProcess``: the pipes' bytes in, ``product.log`` out."""

    launch: LaunchConfig
    _scrubber: SecretScrubber
    _env_secrets: list[str]
    _clock_ns: Callable[[], int]
    _started_ns: int
    _log: _OutputLog
    _splitters: dict[int, _LineSplitter]
    _open_pipes: set[int]
    _ready_regex: regex.Pattern[str]
    _ready: asyncio.Event
    _unready: str | None
    _stalled: asyncio.Event
    _stdout_closed: asyncio.Event
    _pipes_closed: asyncio.Event

    @property
    def lines(self) -> list[LogLine]:
        """The kept output lines (and voicelab's own notes), in arrival order."""
        return self._log.lines()

    @property
    def dropped_lines(self) -> int:
        return self._log.dropped_lines

    def _last_stderr(self) -> str:
        for line in reversed(self._log.lines()):
            if line.stream == "stderr" and line.text.strip():
                text = line.text.strip()
                if len(text) > _LAST_STDERR_CHARS:
                    text = text[:_LAST_STDERR_CHARS] + "..."
                return f"last stderr line: {text}"
        return "no stderr output"

    def log_text(self, scrubber: SecretScrubber | None = None) -> str:
        """The output as ``product.log`` text, ``[+12.345s stdout] line``, secrets masked.

        Seconds count from the start of the process. ``scrubber`` defaults to the one given to
        the constructor (either way extended with the secret env values)."""
        scrubber = self._scrubber if scrubber is None else scrubber.with_values(self._env_secrets)
        log = self._log
        rendered = [self._format(line) for line in log.head]
        if log.dropped_lines:
            rendered.append(
                f"[... {log.dropped_lines} lines ({log.dropped_bytes / 2**20:.1f} MiB) dropped: "
                f"product.log keeps the first {len(log.head)} lines and the latest "
                f"{len(log.tail)} ...]")
        rendered.extend(self._format(line) for line, _ in log.tail)
        return scrubber.scrub_text("".join(text + "\n" for text in rendered))

    def _format(self, line: LogLine) -> str:
        seconds = (line.time_ns - self._started_ns) / 1e9
        return f"[{seconds:+.3f}s {line.stream}] {line.text}"

    def _note(self, text: str) -> None:
        logger.debug("product launch: %s", self._scrubber.scrub_text(text))
        self._log.append(LogLine(self._clock_ns(), "voicelab", text), len(text))

    def _received(self, fd: int, data: bytes) -> None:
        now = self._clock_ns()
        for raw, cut in self._splitters[fd].feed(data):
            self._keep(now, fd, raw, cut)

    def _pipe_closed(self, fd: int) -> None:
        for raw, cut in self._splitters[fd].flush():
            self._keep(self._clock_ns(), fd, raw, cut)
        self._open_pipes.discard(fd)
        if fd == 1:
            self._stdout_closed.set()
        if not self._open_pipes:
            self._pipes_closed.set()

    def _keep(self, now: int, fd: int, raw: bytes, cut: int) -> None:
        text = raw.decode("utf-8", errors="replace").removesuffix("\r")
        if cut:
            text += f" [... {cut} more bytes]"
        stream = _STREAMS[fd]
        self._log.append(LogLine(now, stream, text), len(raw))
        if not self._ready.is_set() and self._unready is None and self._matches(text):
            self._ready.set()

    def _matches(self, text: str) -> bool:
        try:
            return self._ready_regex.search(text, timeout=MAX_MATCH_SECONDS) is not None
        except TimeoutError:
            self._unready = (f"took more than {MAX_MATCH_SECONDS:g} s to match ready_pattern "
                             f"{self.launch.ready_pattern!r} against one output line (a pattern "
                             f"that backtracks catastrophically?)")
            self._stalled.set()
            return False
