"""Launching the product: start its process, wait for its ready line, keep its output, stop it.

``ProductProcess`` runs ``endpoint.launch.command`` without a shell, in a session (process group)
of its own, stdin closed. Both output pipes are read by asyncio protocol callbacks as the data
arrives, so the child never blocks on a full pipe; each line is kept with the evaluator's
monotonic clock and its stream name, in a bounded buffer (``MAX_LOG_BYTES``, ``MAX_LOG_LINES``:
the first quarter of each budget keeps the start of the output, the rest the latest lines, and
``log_text`` says how many lines in between were dropped).

The product is ready once a line of its stdout or stderr (uvicorn logs to stderr) matches
``ready_pattern`` and then, when its address is on this machine (``{port}``, or a loopback
``uri``/``url`` in the endpoint settings), once it listens there (a server that prints its ready
line before it binds would refuse the first connection: it is waited for, within
``ready_timeout_seconds``; the kernel's list of listening sockets is read, so no connection is
spent on the check). Each line gets
at most ``MAX_MATCH_SECONDS`` of matching (the ``regex`` module's timeout): a pattern that
backtracks catastrophically fails the launch instead of hanging the event loop.

``stop()`` stops the whole family: the group, and every process that left it (a child that
called ``setsid()`` or ``setpgid()``, a double-forked daemon), found in ``/proc`` by descent
and by the ``VOICELAB_LAUNCH_ID`` marker in their environment (:mod:`._process_tree`), when
the product is ready and again when it is stopped. It sends SIGTERM to all of them, waits
``stop_grace_seconds`` for every one to exit, then sends SIGKILL. A cancelled ``start()`` or
``stop()`` (Ctrl-C) still stops the family: the sequence runs on, shielded, and a second
cancellation sends SIGKILL at once. POSIX only (the processes that left the group: Linux).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import time
import uuid
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

from ..config import (
    LaunchConfig,
    SecretScrubber,
    command_secret_values,
    is_secret_env_var,
    is_secret_name,
)
from ..errors import ConfigError
from ._process_tree import LAUNCH_MARKER, ProcessTree
from ._protocol import EndpointError

__all__ = ["MAX_LOG_BYTES", "MAX_LOG_LINES", "MAX_LINE_BYTES", "LogLine", "ProductProcess",
           "check_launch", "fill_placeholders", "pick_free_port", "uses_port"]

logger = logging.getLogger(__name__)

#: product.log keeps at most this many bytes of output text and this many lines (about 6 MB of
#: memory per product at most); the first quarter of each is the start of the output
MAX_LOG_BYTES = 2 * 1024 * 1024
MAX_LOG_LINES = 20_000
#: a longer line is cut here (the rest is counted, not kept), so a child that never prints a
#: newline cannot grow the buffer
MAX_LINE_BYTES = 4096
#: after the process exits: how long its last output may take to arrive (a ready line printed
#: just before exiting still counts), and how long stop() waits for pipes a stray process holds
_DRAIN_SECONDS = 2.0
_POLL_SECONDS = 0.05
_LAST_STDERR_CHARS = 200
#: the most time ``ready_pattern`` may take on one output line (a plain pattern takes
#: microseconds on the longest line kept, ``MAX_LINE_BYTES``)
MAX_MATCH_SECONDS = 0.25
#: between connection attempts while the product binds its port
_CONNECT_RETRY_SECONDS = 0.05
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_URL_KEYS = ("uri", "url", "base_url")
_DEFAULT_PORTS = {"ws": 80, "http": 80, "wss": 443, "https": 443}

Stream = Literal["stdout", "stderr", "voicelab"]
_STREAMS: dict[int, Stream] = {1: "stdout", 2: "stderr"}


@dataclass(frozen=True, slots=True)
class LogLine:
    """One output line; ``time_ns`` is the evaluator's clock when the line's bytes were read."""

    time_ns: int
    stream: Stream
    text: str


# --- the port placeholder -------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{\{port\}\}|\{port\}")
_recent_ports: deque[int] = deque(maxlen=256)


def uses_port(value: object) -> bool:
    """True when a string anywhere in ``value`` holds ``{port}`` (``{{port}}`` is an escape)."""
    if isinstance(value, str):
        return any(match.group(0) == "{port}" for match in _PLACEHOLDER.finditer(value))
    if isinstance(value, Mapping):
        return any(uses_port(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(uses_port(item) for item in value)
    return False


def fill_placeholders(value: object, port: int | None) -> Any:
    """A copy of ``value`` with ``{port}`` replaced by ``port`` in every string of any nested
    mapping or list (keys untouched) and ``{{port}}`` by a literal ``{port}``."""
    if isinstance(value, str):
        def substitute(match: re.Match[str]) -> str:
            if match.group(0) != "{port}":
                return "{port}"
            if port is None:
                raise ValueError("'{port}' needs a port to fill in")
            return str(port)

        return _PLACEHOLDER.sub(substitute, value)
    if isinstance(value, Mapping):
        return {key: fill_placeholders(item, port) for key, item in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(item, port) for item in value]
    if isinstance(value, tuple):
        return tuple(fill_placeholders(item, port) for item in value)
    return value


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing is bound to on ``host`` now, not handed out recently by this process
    (so concurrent launches do not get the same one). Another program may still take it before
    the product binds it: the product then fails to start, and says why on stderr."""
    for _ in range(64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        if port not in _recent_ports:
            _recent_ports.append(port)
            return port
    raise EndpointError(f"found no free TCP port on {host}", code="launch_failed")


def check_launch(launch: LaunchConfig, settings: Mapping[str, object] | None = None) -> None:
    """Refuse endpoint settings that use ``{port}`` when the product is never told the port."""
    if uses_port(settings or {}) and not (uses_port(launch.command) or uses_port(launch.env)):
        raise ConfigError("endpoint.settings use '{port}' but neither the command nor an env "
                          "value passes it to the product", key="endpoint.launch.command")


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


# --- the process ----------------------------------------------------------------------------

class _Protocol(asyncio.SubprocessProtocol):
    # a weak reference: the child watcher keeps the transport (and so this protocol) alive
    # while the process runs, and a dropped ProductProcess must still reach its __del__
    def __init__(self, owner: ProductProcess):
        self._owner = weakref.ref(owner)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if (owner := self._owner()) is not None:
            owner._received(fd, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if (owner := self._owner()) is not None:
            owner._pipe_closed(fd)

    def process_exited(self) -> None:
        if (owner := self._owner()) is not None:
            owner._exited.set()


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "is still running"
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-returncode).name}"
        return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _group_has_live_members(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg also reaches zombies, which only their parent (or init) can remove: where /proc
    # shows process states, a group of zombies counts as gone
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return True
    for pid in entries:
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue
        state, _, pgrp = stat[stat.rindex(b")") + 2:].split()[:3]
        if int(pgrp) == pgid and state not in (b"Z", b"X"):
            return True
    return False


class ProductProcess:
    """The product as a child process: ``await start()`` ... ``await stop()``, or ``async with``.

    The constructor does no I/O and raises ``ConfigError`` for settings that use ``{port}``
    without the product being told it. ``base_dir`` is what a relative ``cwd`` is relative to
    (the run file's folder). ``settings`` are the endpoint settings to fill with the port
    (read them back from ``.settings`` after ``start()``). ``scrubber`` masks secrets in error
    messages and ``log_text``; env values under secret-like names are added to it.
    """

    #: the child process, once started (a class default: ``__del__`` reads it even when the
    #: constructor raised before setting it)
    _transport: asyncio.SubprocessTransport | None = None

    def __init__(self, launch: LaunchConfig, *, settings: Mapping[str, object] | None = None,
                 base_dir: Path | None = None, scrubber: SecretScrubber | None = None,
                 environ: Mapping[str, str] | None = None,
                 clock_ns: Callable[[], int] = time.perf_counter_ns, port: int | None = None,
                 max_log_bytes: int = MAX_LOG_BYTES, max_log_lines: int = MAX_LOG_LINES):
        check_launch(launch, settings)
        self.launch = launch
        self.port = port
        self._needs_port = uses_port(launch.command) or uses_port(launch.env) or uses_port(
            settings or {})
        self._settings = dict(settings or {})
        # a relative cwd, and by default the product itself, run from the run file's folder
        self._cwd = (base_dir or Path.cwd()) / launch.cwd if launch.cwd else base_dir
        self._ready_regex = launch.ready_regex
        self._environ = os.environ if environ is None else environ
        self._env_secrets = [value for name, value in launch.env.items()
                             if is_secret_name(name) or is_secret_env_var(name)
                             or name in launch.secret_env]
        self._env_secrets += sorted(command_secret_values(launch.command))
        self._scrubber = (scrubber or SecretScrubber()).with_values(self._env_secrets)
        self._clock_ns = clock_ns
        self._log = _OutputLog(max_bytes=max_log_bytes, max_lines=max_log_lines)
        self._splitters = {fd: _LineSplitter() for fd in _STREAMS}
        self._open_pipes = set(_STREAMS)
        self._transport: asyncio.SubprocessTransport | None = None
        self._started_ns = 0
        self._ready, self._exited = asyncio.Event(), asyncio.Event()
        #: why the launch cannot become ready although the process runs (a pattern too slow)
        self._unready: str | None = None
        self._stalled = asyncio.Event()
        self._stdout_closed, self._pipes_closed = asyncio.Event(), asyncio.Event()
        self._stop_task: asyncio.Future[int | None] | None = None
        self._stopped = False
        #: marks every process of this launch (inherited through the environment)
        self._launch_id = uuid.uuid4().hex
        #: the processes the product started, wherever they went (known once it started)
        self._tree: ProcessTree | None = None

    # --- state ---

    @property
    def program(self) -> str:
        """argv[0] as written: what messages name (the arguments may hold secrets)."""
        return self.launch.command[0]

    @property
    def pid(self) -> int | None:
        return None if self._transport is None else self._transport.get_pid()

    @property
    def returncode(self) -> int | None:
        """None while running (or before start); negative: killed by that signal."""
        return None if self._transport is None else self._transport.get_returncode()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def settings(self) -> dict[str, Any]:
        """The endpoint settings with ``{port}`` filled in (known once ``start()`` chose it)."""
        if self._needs_port and self.port is None:
            raise RuntimeError("the port is chosen by start(): start the product first")
        return fill_placeholders(self._settings, self.port)

    @property
    def lines(self) -> list[LogLine]:
        """The kept output lines (and voicelab's own notes), in arrival order."""
        return self._log.lines()

    @property
    def dropped_lines(self) -> int:
        return self._log.dropped_lines

    # --- start ---

    async def start(self) -> None:
        """Start the command and return once an output line matches ``ready_pattern`` and the
        product accepts connections (see the module docstring).

        Raises ``EndpointError`` ``launch_failed`` (cannot start, or exited before the ready
        line) or ``launch_timeout``; the process is stopped first and its output kept."""
        if self._transport is not None:
            raise RuntimeError("the product process was already started")
        if os.name != "posix":
            raise EndpointError("launching the product needs a POSIX system", code="launch_failed")
        if self._needs_port and self.port is None:
            self.port = pick_free_port()
        argv = fill_placeholders(self.launch.command, self.port)
        env = dict(self._environ)
        env.setdefault("PYTHONUNBUFFERED", "1")  # a Python product's ready line, unbuffered
        env.update(fill_placeholders(self.launch.env, self.port))
        env[LAUNCH_MARKER] = self._launch_id
        loop = asyncio.get_running_loop()
        self._started_ns = self._clock_ns()
        try:
            self._transport, _ = await loop.subprocess_exec(
                lambda: _Protocol(self), *argv, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True, cwd=self._cwd, env=env)
        except OSError as error:
            where = f" in {self._cwd}" if self._cwd else ""
            self._note(f"cannot start {self.program!r}{where}: {error.strerror}")
            raise EndpointError(self._scrubber.scrub_text(
                f"cannot start the product {self.program!r}{where}: {error.strerror}"),
                code="launch_failed") from None
        self._tree = ProcessTree(self._transport.get_pid(), self._launch_id)
        port = f", port {self.port}" if self.port is not None else ""
        self._note(f"started {self.program!r} (pid {self.pid}{port})")
        try:
            await self._wait_ready()
            # what it started on its way up, while the parents that link them still run
            await asyncio.to_thread(self._tree.scan)
        except BaseException:
            await self.stop()
            raise

    async def _wait_ready(self) -> None:
        timeout = self.launch.ready_timeout_seconds
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await _first_of(self._ready, self._exited, self._stalled, timeout=timeout)
        if self._exited.is_set() and not self._ready.is_set():
            # output written just before the exit may still be in the pipe
            await _first_of(self._ready, self._pipes_closed, timeout=_DRAIN_SECONDS)
        if self._ready.is_set():
            address = self._address()
            if address is None or await self._accepts(address, deadline):
                self._note("ready")
                return
            code = "launch_failed" if self._exited.is_set() else "launch_timeout"
            host, port = address
            what = (f"{_describe_exit(self.returncode)} before accepting a connection on "
                    f"{host}:{port}" if self._exited.is_set() else
                    f"printed its ready line but refused connections on {host}:{port} for "
                    f"{timeout:g} s")
            self._fail(what, code)
        pattern = f"ready_pattern {self.launch.ready_pattern!r}"
        if self._unready is not None:
            self._fail(self._unready, "launch_failed")
        if self._exited.is_set():
            self._fail(f"{_describe_exit(self.returncode)} before an output line matched "
                       f"{pattern}", "launch_failed")
        self._fail(f"printed no line matching {pattern} within {timeout:g} s", "launch_timeout")

    def _fail(self, what: str, code: str) -> NoReturn:
        self._note(f"not ready: {what}")
        message = f"the product {self.program!r} {what}; {self._last_stderr()}"
        raise EndpointError(self._scrubber.scrub_text(" ".join(message.split())), code=code)

    def _address(self) -> tuple[str, int] | None:
        """Where the product is reached, when that is this machine (else None: not probed)."""
        settings = fill_placeholders(self._settings, self.port) if self.port is not None \
            or not self._needs_port else {}
        for key in _URL_KEYS:
            value = settings.get(key)
            if not isinstance(value, str):
                continue
            try:
                parts = urlsplit(value)
                port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
            except ValueError:
                return None
            host = parts.hostname or ""
            if host in _LOOPBACK_HOSTS and port:
                return host, port
            return None
        return ("127.0.0.1", self.port) if self.port is not None else None

    async def _accepts(self, address: tuple[str, int], deadline: float) -> bool:
        """Wait until something listens on ``address``'s port, the process exits or ``deadline``
        passes. Where the kernel lists listening sockets (``/proc/net/tcp``) nothing connects:
        a product that serves one client keeps it for the trial."""
        loop = asyncio.get_running_loop()
        polls = 0
        while not self._exited.is_set():
            polls += 1
            listening = await asyncio.to_thread(listening_ports)
            if listening is None:
                ready = await _connects(address, deadline - loop.time())
            else:
                ready = address[1] in listening
            if ready:
                if polls > 1:
                    self._note(f"{address[0]}:{address[1]} accepts connections (after "
                               f"{polls} checks)")
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_CONNECT_RETRY_SECONDS)
        return False

    def _last_stderr(self) -> str:
        for line in reversed(self._log.lines()):
            if line.stream == "stderr" and line.text.strip():
                text = line.text.strip()
                if len(text) > _LAST_STDERR_CHARS:
                    text = text[:_LAST_STDERR_CHARS] + "..."
                return f"last stderr line: {text}"
        return "no stderr output"

    # --- stop ---

    async def stop(self) -> int | None:
        """Stop the process group; returns the exit status (None if never started). Idempotent."""
        if self._transport is None:
            return None
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._stop_sequence())
        elif self._stop_task.done():
            return self._stop_task.result()
        try:
            return await asyncio.shield(self._stop_task)
        except asyncio.CancelledError:
            self._signal_group(signal.SIGKILL)  # the caller will not wait out the grace period
            raise

    async def _stop_sequence(self) -> int | None:
        assert self._transport is not None
        try:
            return await self._stop_steps(self._transport)
        except BaseException:  # cancelled while the loop shuts down: no grace period left
            self._signal_group(signal.SIGKILL)
            raise

    async def _stop_steps(self, transport: asyncio.SubprocessTransport) -> int | None:
        if self._tree is not None:
            await asyncio.to_thread(self._tree.scan)
        if self._group_alive():
            grace = self.launch.stop_grace_seconds
            left = self._left_the_group()
            also = f" and {len(left)} process(es) that left it ({_pids(left)})" if left else ""
            self._note(f"stopping: SIGTERM to the process group{also}")
            self._signal_group(signal.SIGTERM)
            if not await self._group_gone_within(grace):
                self._note(f"still running after {grace:g} s: SIGKILL to the process group"
                           f"{also}")
                self._signal_group(signal.SIGKILL)
                await self._group_gone_within(_DRAIN_SECONDS)  # the kernel's delay only
        await self._exited.wait()
        # once the group is gone the pipes close; a process that left the group may hold them
        await _first_of(self._pipes_closed, timeout=_DRAIN_SECONDS)
        self._stopped = True
        transport.close()
        self._note(f"the product {_describe_exit(self.returncode)}")
        return self.returncode

    async def _group_gone_within(self, seconds: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        await _first_of(self._exited, timeout=seconds)
        while self._group_alive():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_POLL_SECONDS)
        return True

    def _group_alive(self) -> bool:
        """Whether any process of the family runs: the product, its group, or one that left."""
        return self.returncode is None or _group_has_live_members(self.pid or 0) \
            or bool(self._tree is not None and self._tree.running())

    def _left_the_group(self) -> list[int]:
        """The running processes of the family outside the product's group."""
        if self._tree is None:
            return []
        members = []
        for pid in self._tree.running():
            with contextlib.suppress(OSError):
                if os.getpgid(pid) != self.pid:
                    members.append(pid)
        return members

    def _signal_group(self, signum: int) -> None:
        """``signum`` to the process group and to every process of the family that left it."""
        # after the stop sequence the group id may belong to someone else: never signal again
        if self._transport is None or self._stopped:
            return
        try:
            os.killpg(self._transport.get_pid(), signum)
        except ProcessLookupError:
            pass
        except PermissionError as error:
            logger.warning("cannot signal the product's process group: %s", error)
        if self._tree is not None:
            self._tree.signal(signum)  # the same processes only (their start times match)

    async def __aenter__(self) -> ProductProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def __del__(self) -> None:
        # a process object dropped unstopped must not leave the product running
        transport = self._transport
        if transport is not None and not self._stopped and transport.get_returncode() is None:
            with contextlib.suppress(OSError):
                os.killpg(transport.get_pid(), signal.SIGKILL)
            if self._tree is not None:
                self._tree.signal(signal.SIGKILL)
            warnings.warn(f"product process {transport.get_pid()} was never stopped; killed it",
                          ResourceWarning, stacklevel=1)

    # --- output ---

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


def listening_ports() -> set[int] | None:
    """The TCP ports something listens on in this network namespace (Linux: ``/proc/net``),
    or None where the kernel does not list them."""
    ports: set[int] = set()
    listed = False
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name, encoding="ascii", errors="replace") as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        listed = True
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == "0A":  # TCP_LISTEN
                with contextlib.suppress(ValueError, IndexError):
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports if listed else None


async def _connects(address: tuple[str, int], seconds: float) -> bool:
    """Whether a TCP connection to ``address`` opens within ``seconds`` (closed at once)."""
    try:
        async with asyncio.timeout(max(seconds, _CONNECT_RETRY_SECONDS)):
            _, writer = await asyncio.open_connection(*address)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def _pids(pids: list[int]) -> str:
    return ", ".join(f"pid {pid}" for pid in pids)


async def _first_of(*events: asyncio.Event, timeout: float) -> None:
    """Return when any of ``events`` is set or ``timeout`` seconds have passed."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
