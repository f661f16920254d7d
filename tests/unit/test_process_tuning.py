"""The process tuning applies only in a process that opted in, while runs are in progress, and
everything is restored however the runs and the opt-in end."""

from __future__ import annotations

import gc
import sys

import pytest

from voicelab.execution._tuning import (
    FULL_COLLECTION_AFTER,
    GIL_SWITCH_INTERVAL_SECONDS,
    ProcessTuning,
)


@pytest.fixture(autouse=True)
def nothing_frozen() -> None:
    """A test process may have frozen objects (a worker's trial loop run in it earlier)."""
    gc.unfreeze()


def _state() -> tuple[float, int, tuple[int, ...]]:
    return sys.getswitchinterval(), gc.get_freeze_count(), gc.get_threshold()


def test_a_run_without_the_opt_in_changes_nothing():
    tuning, before = ProcessTuning(), _state()
    with tuning.during_run():
        assert _state() == before and not tuning.applied
    assert _state() == before


def test_overlapping_runs_tune_once_and_restore_when_the_last_ends():
    tuning, before = ProcessTuning(), _state()
    tuning.opt_in()
    try:
        first = tuning.during_run()
        first.__enter__()
        assert tuning.applied and sys.getswitchinterval() == min(before[0],
                                                                GIL_SWITCH_INTERVAL_SECONDS)
        frozen = gc.get_freeze_count()
        assert frozen > before[1] == 0
        with tuning.during_run():  # a second run: nothing more is frozen or changed
            assert gc.get_freeze_count() == frozen and tuning.applied
        assert tuning.applied  # the first still runs
        first.__exit__(None, None, None)
        assert _state() == before and not tuning.applied
    finally:
        tuning.opt_out()


def test_ending_the_opt_in_restores_at_once_even_while_a_run_is_in_progress():
    tuning, before = ProcessTuning(), _state()
    tuning.opt_in()
    with tuning.during_run():
        assert tuning.applied
        tuning.opt_out()
        assert _state() == before and not tuning.applied
    assert _state() == before  # the run's end restores nothing twice


def test_nested_opt_ins_restore_when_the_outermost_ends():
    tuning, before = ProcessTuning(), _state()
    tuning.opt_in()
    tuning.opt_in()
    with tuning.during_run():
        tuning.opt_out()
        assert tuning.applied  # still opted in once
        tuning.opt_out()
        assert _state() == before


def test_a_process_that_froze_its_own_objects_keeps_them_frozen():
    tuning = ProcessTuning()
    gc.freeze()  # a preforking server's, say
    try:
        before = _state()
        tuning.opt_in()
        # frozen objects still die when their last reference goes (another thread's, say):
        # the count may fall, but the tuning neither freezes more nor unfreezes them
        with tuning.during_run():
            assert tuning.applied and 0 < gc.get_freeze_count() <= before[1]
            assert sys.getswitchinterval() == min(before[0], GIL_SWITCH_INTERVAL_SECONDS)
        tuning.opt_out()
        assert sys.getswitchinterval() == before[0]
        assert 0 < gc.get_freeze_count() <= before[1]
    finally:
        gc.unfreeze()


def test_full_collections_are_put_off_while_runs_are_in_progress_and_run_at_the_end():
    tuning, before = ProcessTuning(), _state()
    young, middle, _ = before[2]
    tuning.opt_in()
    try:
        with tuning.during_run():
            assert gc.get_threshold() == (young, middle, max(before[2][2], FULL_COLLECTION_AFTER))
            collected = gc.get_stats()[2]["collections"]
        assert gc.get_threshold() == before[2]
        assert gc.get_stats()[2]["collections"] > collected  # the put-off full collection ran
    finally:
        tuning.opt_out()
