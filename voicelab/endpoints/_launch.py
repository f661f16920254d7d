"""Launching the product: start its process, wait for its ready line, keep its output, stop it.

``ProductProcess`` runs ``endpoint.launch.command`` without a shell, in a session (process group)
of its own, stdin closed; its output is kept as it arrives (:mod:`._launch_output`).

The product is ready once a line of its stdout or stderr (uvicorn logs to stderr) matches
``ready_pattern`` and then, when its address is on this machine (``{port}``, or a loopback
``uri``/``url`` in the endpoint settings), once it listens there (a server that prints its ready
line before it binds would refuse the first connection: it is waited for, within
``ready_timeout_seconds``; the kernel's list of listening sockets is read, so no connection is
spent on the check).

``stop()`` stops the whole family, also when cancelled (:mod:`._launch_stop`); the ``{port}``
placeholder: :mod:`._launch_port`. POSIX only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from ..config import (
    LaunchConfig,
    SecretScrubber,
    command_secret_values,
    is_secret_env_var,
    is_secret_name,
)
from ._launch_output import (
    _STREAMS,
    MAX_LINE_BYTES,
    MAX_LOG_BYTES,
    MAX_LOG_LINES,
    LogLine,
    _LineSplitter,
    _OutputLog,
)
from ._launch_port import check_launch, fill_placeholders, pick_free_port, uses_port
from ._launch_stop import _DRAIN_SECONDS, _describe_exit, _first_of, _ProductStop
from ._process_tree import LAUNCH_MARKER, ProcessTree
from ._protocol import EndpointError

__all__ = ["MAX_LOG_BYTES", "MAX_LOG_LINES", "MAX_LINE_BYTES", "LogLine", "ProductProcess",
           "check_launch", "fill_placeholders", "pick_free_port", "uses_port"]

#: between connection attempts while the product binds its port
_CONNECT_RETRY_SECONDS = 0.05
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_URL_KEYS = ("uri", "url", "base_url")
_DEFAULT_PORTS = {"ws": 80, "http": 80, "wss": 443, "https": 443}

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


class ProductProcess(_ProductStop):
    """The product as a child process: ``await start()`` ... ``await stop()``, or ``async with``.

    The constructor does no I/O and raises ``ConfigError`` for settings that use ``{port}``
    without the product being told it. ``base_dir`` is what a relative ``cwd`` is relative to
    (the run file's folder). ``settings`` are the endpoint settings to fill with the port
    (read them back from ``.settings`` after ``start()``). ``scrubber`` masks secrets in error
    messages and ``log_text``; env values under secret-like names are added to it.
    """

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
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def settings(self) -> dict[str, Any]:
        """The endpoint settings with ``{port}`` filled in (known once ``start()`` chose it)."""
        if self._needs_port and self.port is None:
            raise RuntimeError("the port is chosen by start(): start the product first")
        return fill_placeholders(self._settings, self.port)

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
            await self._scan_family()
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

    async def __aenter__(self) -> ProductProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


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
