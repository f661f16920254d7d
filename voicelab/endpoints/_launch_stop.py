"""Stopping a launched product: its whole family, within a grace period, even when cancelled.

``stop()`` stops the whole family: the group, and every process that left it (a child that
called ``setsid()`` or ``setpgid()``, a double-forked daemon), found in ``/proc`` by descent
and by the ``VOICELAB_LAUNCH_ID`` marker in their environment (:mod:`._process_tree`), when
the product is ready and again when it is stopped. It sends SIGTERM to all of them, waits
``stop_grace_seconds`` for every one to exit, then sends SIGKILL, and waits at most
``_KILLED_EXIT_SECONDS`` more for the product's exit (a process in uninterruptible sleep
outlives SIGKILL: it is left, with a warning, rather than hanging the run). A cancelled
``start()`` or ``stop()`` (Ctrl-C) still stops the family: the sequence runs on, shielded, and a
second cancellation sends SIGKILL at once. POSIX only (the processes that left the group: Linux).

``_ProductStop`` is the part of ``ProductProcess`` that does this; the state it reads is set
by ``ProductProcess.__init__``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import warnings

from ._launch_output import _ProductOutput
from ._process_tree import ProcessTree

logger = logging.getLogger(__name__)

#: after the process exits: how long its last output may take to arrive (a ready line printed
#: just before exiting still counts), and how long stop() waits for pipes a stray process holds
_DRAIN_SECONDS = 2.0
_POLL_SECONDS = 0.05
#: after SIGKILL: how long stop() waits for the product's exit before it gives up on a process
#: the kernel cannot end yet (uninterruptible sleep, e.g. a read from a hung network mount),
#: so that stopping a product never hangs the run
_KILLED_EXIT_SECONDS = 30.0
#: how long finding the family's processes in /proc may take (a read of a process's
#: environment waits while another process holds its memory map locked)
_SCAN_SECONDS = 5.0


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


class _ProductStop(_ProductOutput):
    """The stopping half of ``ProductProcess`` (and what it reads: the pid, the exit status)."""

    #: the child process, once started (a class default: ``__del__`` reads it even when the
    #: constructor raised before setting it)
    _transport: asyncio.SubprocessTransport | None = None
    _exited: asyncio.Event
    _stop_task: asyncio.Future[int | None] | None
    _stopped: bool
    _tree: ProcessTree | None

    @property
    def pid(self) -> int | None:
        return None if self._transport is None else self._transport.get_pid()

    @property
    def returncode(self) -> int | None:
        """None while running (or before start); negative: killed by that signal."""
        return None if self._transport is None else self._transport.get_returncode()

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
            await self._scan_family()
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
        await _first_of(self._exited, timeout=_KILLED_EXIT_SECONDS)
        if not self._exited.is_set():
            self._note(f"still running {_KILLED_EXIT_SECONDS:g} s after SIGKILL: given up")
            logger.warning("the product (pid %s) did not exit %g s after SIGKILL; left running",
                           self.pid, _KILLED_EXIT_SECONDS)
        # once the group is gone the pipes close; a process that left the group may hold them
        await _first_of(self._pipes_closed, timeout=_DRAIN_SECONDS)
        self._stopped = True
        transport.close()
        self._note(f"the product {_describe_exit(self.returncode)}")
        return self.returncode

    async def _scan_family(self) -> None:
        """Find what the family started since it was last looked for, within ``_SCAN_SECONDS``
        (else the processes found before are the ones stopped, and the log says so)."""
        assert self._tree is not None
        if not await self._tree.scan_within(_SCAN_SECONDS):
            self._note(f"looking for the product's processes in /proc took over "
                       f"{_SCAN_SECONDS:g} s: given up, the ones found before are stopped")
            logger.warning("the /proc scan for the product's processes took over %g s; "
                           "stopping the ones found before", _SCAN_SECONDS)

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
