"""The kernel's receive stamps, moved onto the trial clock.

Every socket voicelab reads with the kernel's stamps (SIP's RTP over UDP, a WebSocket's TCP
stream, WebRTC's datagrams) gets them on the wall clock (``SO_TIMESTAMPNS`` or
``SIOCGSTAMPNS``) and needs them on the trial's monotonic clock. The conversion reads both
clocks at one moment and takes the stamp's age on the wall clock from the trial clock's now;
a wall clock that stepped in between gives an age out of range, and that stamp is not used.

Linux turns its receive stamps on for the whole system some time after a socket first asks
(deferred work, which a loaded machine runs late), and a datagram received before then gets,
when it is read, the read's own time as its "stamp". So a stamp no earlier than the wall clock
read just before the read (``read_began_wall_ns``) is not the kernel's arrival: the read is
stamped as the loop made it, and charged the loop's lag like any loop stamp.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: Linux's option and control message for nanosecond receive stamps (``SO_TIMESTAMPNS_OLD``,
#: a ``struct timespec`` of two native longs); Python's socket module does not name them.
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("@ll")
#: the ancillary buffer one stamp needs in ``recvmsg``
STAMP_ANCILLARY_BYTES = socket.CMSG_SPACE(TIMESPEC.size)
#: an age outside [0, this] means the wall clock stepped between the two reads: not trusted
MAX_TRUSTED_AGE_NS = 10_000_000_000
#: the two clocks are read as a pair (trial, wall, trial) until the pair takes at most twice
#: this, so a stamp's conversion is off by at most this much (a read preempted in between
#: would otherwise move the stamp by the whole preemption)
CONVERSION_ERROR_NS = 10_000
_PAIR_TRIES = 5


def enable_kernel_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what ``sock`` receives; False where it will not (the reads are
    then stamped when the loop makes them)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        logger.debug("no kernel receive stamps on this socket: arrivals are stamped when read")
        return False
    return True


def timespec_ns(data: bytes) -> int:
    """A ``struct timespec`` as nanoseconds."""
    seconds, nanoseconds = TIMESPEC.unpack_from(data)
    return int(seconds) * 1_000_000_000 + int(nanoseconds)


def ancillary_stamp_ns(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The receive stamp (wall clock, ns) among ``recvmsg``'s control messages, if any."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            return timespec_ns(data)
    return None


def paired_clocks(clock_ns: Callable[[], int]) -> tuple[int, int]:
    """The trial clock and the wall clock at one moment, within :data:`CONVERSION_ERROR_NS`
    (the tightest of a few paired reads; the first, nearly always, when nothing preempted it)."""
    before = clock_ns()
    wall = time.time_ns()
    after = clock_ns()
    if after - before <= 2 * CONVERSION_ERROR_NS:
        return (before + after) >> 1, wall
    return _tightest_pair(clock_ns, after - before, (before + after) >> 1, wall)


def _tightest_pair(clock_ns: Callable[[], int], spread: int, trial: int, wall: int
                   ) -> tuple[int, int]:
    """Paired reads again after one that took too long (``spread``), the tightest kept."""
    for _ in range(_PAIR_TRIES - 1):
        before = clock_ns()
        now_wall = time.time_ns()
        after = clock_ns()
        if after - before < spread:
            spread, trial, wall = after - before, (before + after) >> 1, now_wall
        if spread <= 2 * CONVERSION_ERROR_NS:
            break
    return trial, wall


def on_trial_clock(stamp_wall_ns: int | None, trial_ns: int, wall_ns: int,
                   read_began_wall_ns: int) -> int | None:
    """A wall-clock receive stamp on the trial clock, given the two clocks read together
    (:func:`paired_clocks`); None without a stamp, when the wall clock stepped, or when the
    stamp is the read's own time (no earlier than ``read_began_wall_ns``: see above)."""
    if stamp_wall_ns is None or stamp_wall_ns >= read_began_wall_ns:
        return None
    age_ns = wall_ns - stamp_wall_ns
    return trial_ns - age_ns if 0 <= age_ns <= MAX_TRUSTED_AGE_NS else None


def read_stamps(ancillary: list[tuple[int, int, bytes]], clock_ns: Callable[[], int],
                read_began_wall_ns: int) -> tuple[int, int]:
    """For a read that has just returned ``ancillary`` (begun at ``read_began_wall_ns`` on the
    wall clock): the trial clock now, and the kernel's receive stamp on the trial clock (-1:
    none, the wall clock stepped, or the stamp is the read's own time).

    :func:`paired_clocks`, :func:`ancillary_stamp_ns` and :func:`on_trial_clock` in one call,
    the same arithmetic, for the read paths that run once per read (a ``ws://`` stream's):
    there a handful of Python calls per read was a measurable share of the read's cost."""
    before = clock_ns()
    wall = time.time_ns()
    after = clock_ns()
    if after - before <= 2 * CONVERSION_ERROR_NS:  # as paired_clocks, without its call
        trial = (before + after) >> 1
    else:
        trial, wall = _tightest_pair(clock_ns, after - before, (before + after) >> 1, wall)
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            seconds, nanoseconds = TIMESPEC.unpack_from(data)
            stamp = seconds * 1_000_000_000 + nanoseconds
            age_ns = wall - stamp
            return trial, trial - age_ns if 0 <= age_ns <= MAX_TRUSTED_AGE_NS and \
                stamp < read_began_wall_ns else -1
    return trial, -1
