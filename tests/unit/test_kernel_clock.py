"""The conversion of the kernel's wall-clock receive stamps onto the trial clock: the one-call
form the ``ws://`` read path uses gives what the three separate steps give, and a paired clock
read that something preempted is read again, so the conversion stays within its stated error."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from voicelab.endpoints import _kernel_clock
from voicelab.endpoints._kernel_clock import (
    CONVERSION_ERROR_NS,
    MAX_TRUSTED_AGE_NS,
    SO_TIMESTAMPNS,
    TIMESPEC,
    ancillary_stamp_ns,
    on_trial_clock,
    paired_clocks,
    read_stamps,
)

WALL_NS = 1_765_000_000_123_456_789  # the wall clock at the (fake) paired read
READ_BEGAN_NS = WALL_NS - 1_000  # the wall clock just before the read


def _stamp(wall_ns: int) -> list[tuple[int, int, bytes]]:
    return [(socket.SOL_SOCKET, SO_TIMESTAMPNS,
             TIMESPEC.pack(wall_ns // 1_000_000_000, wall_ns % 1_000_000_000))]


def _clock(readings: list[int]) -> Iterator[int]:
    return iter(readings)


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The wall clock's readings, one per paired read, in order."""
    readings: list[int] = []
    monkeypatch.setattr(_kernel_clock.time, "time_ns", lambda: readings.pop(0))
    return readings


@pytest.mark.parametrize(("ancillary", "kernel_ns"), [
    (_stamp(WALL_NS - 2_500_000), 5_000_200 - 2_500_000),  # received 2.5 ms before the read
    (_stamp(READ_BEGAN_NS - 1), 5_000_200 - 1_001),  # just before the read began
    (_stamp(READ_BEGAN_NS), -1),  # during the read: the read's own time, no kernel stamp
    (_stamp(WALL_NS), -1),  # the same nanosecond as the paired read: the read's own time
    (_stamp(WALL_NS + 1), -1),  # after the read: the wall clock stepped back
    (_stamp(WALL_NS - MAX_TRUSTED_AGE_NS - 1), -1),  # too old: the wall clock stepped forward
    ([], -1),  # no stamp
    ([(socket.SOL_SOCKET, SO_TIMESTAMPNS, b"\0" * 4)], -1),  # a truncated control message
    ([(socket.IPPROTO_IP, SO_TIMESTAMPNS, _stamp(WALL_NS)[0][2])], -1),  # not the stamp
], ids=["aged", "just-before", "read-began", "now", "stepped-back", "stepped-forward", "none", "truncated", "other"])
def test_read_stamps_is_the_three_steps_in_one_call(wall, ancillary, kernel_ns):
    wall.extend([WALL_NS, WALL_NS])
    readings = _clock([5_000_000, 5_000_400, 5_000_000, 5_000_400])
    now, kernel = read_stamps(ancillary, lambda: next(readings), READ_BEGAN_NS)
    trial, wall_ns = paired_clocks(lambda: next(readings))
    expected = on_trial_clock(ancillary_stamp_ns(ancillary), trial, wall_ns, READ_BEGAN_NS)
    assert now == trial == 5_000_200
    assert kernel == (-1 if expected is None else expected) == kernel_ns


def test_a_preempted_pair_is_read_again_and_the_tightest_kept(wall):
    # the first pair took 3 ms (the thread was preempted between its reads): converting with
    # it could move a stamp by up to 1.5 ms; the next pair is tight and is the one used
    wall.extend([WALL_NS, WALL_NS + 5_000_000])
    readings = _clock([0, 3_000_000, 5_000_000, 5_000_000 + 2 * CONVERSION_ERROR_NS])
    # received 1 ms before the read began, which was before the first pair
    now, kernel = read_stamps(_stamp(READ_BEGAN_NS - 1_000_000), lambda: next(readings),
                              READ_BEGAN_NS)
    assert now == 5_000_000 + CONVERSION_ERROR_NS
    assert kernel == now - (WALL_NS + 5_000_000 - (READ_BEGAN_NS - 1_000_000))
    assert not wall and next(readings, None) is None  # exactly two pairs read


def test_pairs_that_all_take_too_long_give_the_tightest(wall):
    wall.extend([WALL_NS + i for i in range(5)])
    spreads = [900_000, 300_000, 700_000, 400_000, 800_000]
    readings = _clock([value for i, spread in enumerate(spreads)
                       for value in (i * 10_000_000, i * 10_000_000 + spread)])
    assert paired_clocks(lambda: next(readings)) == (10_000_000 + 150_000, WALL_NS + 1)
    assert not wall
