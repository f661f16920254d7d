"""Every process a launched product started, wherever it went: its own process group, a session
of its own (``setsid``), or a daemon whose parent has exited.

A product runs in a session and process group of its own, but a child may leave the group
(``setsid()``, ``setpgid()``) and a double-forked daemon is re-parented to init at once, so
signalling the group misses them. :class:`ProcessTree` finds them in ``/proc`` (Linux; psutil
is not a dependency) two ways:

* **descent**: every process whose parent chain leads to the product (``PPid`` in
  ``/proc/PID/stat``), followed from the product and from every process already remembered;
* **inheritance**: every process whose environment holds the launch's marker
  (``VOICELAB_LAUNCH_ID``, set in the product's environment and inherited by everything it
  starts unless a process clears its environment), which finds a daemon whose parent exited.

A process is remembered with its start time, so a pid the kernel hands to a new, unrelated
process later is never signalled. Where ``/proc`` is absent (not Linux) only the group is
reached. Out of reach: a process that both clears its environment and leaves the tree before
the tree is scanned (when the product is ready, and when it is stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from dataclasses import dataclass

#: The environment variable that marks a launch's processes (its value: the launch's token).
LAUNCH_MARKER = "VOICELAB_LAUNCH_ID"
#: Only this much of a process's environment is read when looking for the marker.
_MAX_ENVIRON_BYTES = 1024 * 1024
_PROC = "/proc"


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    pid: int
    ppid: int
    pgid: int
    state: str
    #: clock ticks after boot when the process started: with the pid, the process's identity
    start_ticks: int

    @property
    def running(self) -> bool:
        """Not a zombie (which only its parent, or init, can remove)."""
        return self.state not in ("Z", "X")


def process_info(pid: int) -> ProcessInfo | None:
    """The process ``pid`` as ``/proc`` shows it now (None: gone, or no ``/proc``)."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as file:
            stat = file.read()
        fields = stat[stat.rindex(b")") + 2:].split()
        return ProcessInfo(pid, int(fields[1]), int(fields[2]), fields[0].decode(),
                           int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def all_processes() -> list[ProcessInfo]:
    try:
        names = [entry.name for entry in os.scandir(_PROC) if entry.name.isdigit()]
    except OSError:
        return []
    return [info for info in map(process_info, map(int, names)) if info is not None]


def _carries(pid: int, marker: bytes) -> bool:
    """Whether process ``pid``'s environment holds ``marker`` (``NAME=value``)."""
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as file:
            environ = file.read(_MAX_ENVIRON_BYTES)
    except OSError:  # gone, or another user's
        return False
    return marker in environ.split(b"\0")


def _found(known: dict[int, int], marker: bytes) -> dict[int, int]:
    """The processes of a launch now: those of ``known`` (pid -> start ticks) still the same
    process, every process descending from one of them, and every running process whose
    environment holds ``marker`` (with their start ticks)."""
    processes = all_processes()
    children: dict[int, list[ProcessInfo]] = {}
    for info in processes:
        children.setdefault(info.ppid, []).append(info)
    alive = {info.pid: info for info in processes}
    family = [pid for pid, ticks in known.items()
              if pid in alive and alive[pid].start_ticks == ticks]
    own = os.getpid()
    for info in processes:  # a daemon whose parent exited: it kept its environment
        if info.pid not in known and info.pid != own and info.running \
                and _carries(info.pid, marker):
            family.append(info.pid)
    found: dict[int, int] = {}
    seen: set[int] = set()
    while family:
        pid = family.pop()
        if pid in seen:
            continue
        seen.add(pid)
        entry = alive.get(pid)
        if entry is not None:
            found[pid] = entry.start_ticks
        family.extend(child.pid for child in children.get(pid, ()))
    return found


class ProcessTree:
    """The processes of one launch: ``root`` (the product) and everything found to descend from
    it (see the module docstring). :meth:`scan` adds what is there now; the rest only reads
    what was remembered."""

    def __init__(self, root: int, token: str):
        """``root``: the product, just started (read now, before it can exit and its pid be
        reused); ``token``: the value of its ``LAUNCH_MARKER``."""
        self.root = root
        self._marker = f"{LAUNCH_MARKER}={token}".encode()
        #: pid -> start ticks of every process found
        self._known: dict[int, int] = {}
        info = process_info(root)
        if info is not None:
            self._known[root] = info.start_ticks

    def scan(self) -> None:
        """Remember every process that descends from one remembered or carries the marker."""
        self._known.update(_found(dict(self._known), self._marker))

    async def scan_within(self, seconds: float) -> bool:
        """:meth:`scan` in a thread of its own, for at most ``seconds``: reading a process's
        environment waits while that process's memory map is locked, and an unrelated process
        stuck so (a hung network mount, a core dump) must not hold a product's stop. False:
        the scan was given up (what it finds later is dropped; the thread ends with the read,
        and never holds the interpreter's exit)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[int, int]] = loop.create_future()
        known, marker = dict(self._known), self._marker

        def settle(found: dict[int, int] | None, error: BaseException | None) -> None:
            if answer.done():
                return
            if error is not None:
                answer.set_exception(error)
            else:
                answer.set_result(found or {})

        def scan() -> None:
            try:
                found, error = _found(known, marker), None
            except Exception as failure:  # noqa: BLE001 - handed to the loop
                found, error = None, failure
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(settle, found, error)

        threading.Thread(target=scan, name="voicelab-process-scan", daemon=True).start()
        done, _ = await asyncio.wait([answer], timeout=seconds)
        if not done:
            answer.cancel()
            return False
        self._known.update(answer.result())
        return True

    def running(self) -> list[int]:
        """The remembered processes still running (the same processes: same start time)."""
        running = []
        for pid, ticks in self._known.items():
            info = process_info(pid)
            if info is not None and info.start_ticks == ticks and info.running:
                running.append(pid)
        return running

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every remembered process still running."""
        for pid in self.running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

