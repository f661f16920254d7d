"""Process tuning (GIL switch interval, frozen old objects) is the caller's choice: a library
call changes nothing process-wide (a notebook kernel, an application embedding voicelab); a
process that opts in, as the command line does, is tuned while its runs are in progress, also
when they overlap on one event loop, and restored when the last one ends."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.cli import main
from voicelab.execution import tuned_process

EXAMPLE = Path(__file__).parents[2] / "examples" / "run-workload-neutral-voice.yaml"


@pytest.fixture(autouse=True)
def nothing_frozen() -> None:
    """A test process may have frozen objects (a worker's trial loop run in it earlier); the
    tuning leaves a process's own frozen objects alone (tests/unit/test_process_tuning.py)."""
    gc.unfreeze()


def _overlapping_runs(loaded, folder: Path) -> list[tuple[float, int]]:
    """Two runs at once on one loop; the process settings seen while they run."""
    seen_during: list[tuple[float, int]] = []

    async def both():
        async def watch():
            await asyncio.sleep(0.05)
            seen_during.append((sys.getswitchinterval(), gc.get_freeze_count()))

        outcomes = await asyncio.gather(
            voicelab.arun(loaded, voicelab.RunOptions(trials=2, artifacts_dir=folder / "a")),
            voicelab.arun(loaded, voicelab.RunOptions(trials=3, artifacts_dir=folder / "b")), watch())
        return outcomes[:2]

    first, second = asyncio.run(both())
    assert first.report.passed_trials == 2 and second.report.passed_trials == 3
    return seen_during


def test_a_library_run_changes_nothing_process_wide(tmp_path):
    loaded = voicelab.load_run(EXAMPLE)
    interval, frozen = sys.getswitchinterval(), gc.get_freeze_count()
    assert _overlapping_runs(loaded, tmp_path) == [(interval, frozen)]
    assert (sys.getswitchinterval(), gc.get_freeze_count()) == (interval, frozen)


def test_overlapping_runs_of_a_tuned_process_restore_what_they_changed(tmp_path):
    loaded = voicelab.load_run(EXAMPLE)
    interval, frozen = sys.getswitchinterval(), gc.get_freeze_count()
    with tuned_process():
        seen_during = _overlapping_runs(loaded, tmp_path)
        # restored when the last run ended, not only when the opt-in ends
        assert (sys.getswitchinterval(), gc.get_freeze_count()) == (interval, frozen)
    assert seen_during[0][0] < interval and seen_during[0][1] > frozen
    assert (sys.getswitchinterval(), gc.get_freeze_count()) == (interval, frozen)


def test_the_command_line_tunes_its_process_while_the_run_is_in_progress(tmp_path,
                                                                          monkeypatch):
    from voicelab.cli import _run as cli_run

    interval, frozen = sys.getswitchinterval(), gc.get_freeze_count()
    seen_during: list[tuple[float, int]] = []
    real = cli_run.arun

    async def watched(config, options):
        told = options.on_trial_done

        def done(*progress):
            seen_during.append((sys.getswitchinterval(), gc.get_freeze_count()))
            told(*progress)

        return await real(config, dataclasses.replace(options, on_trial_done=done))

    monkeypatch.setattr(cli_run, "arun", watched)
    assert main(["run", str(EXAMPLE), "--trials", "2", "--quiet",
                 "--artifacts-dir", str(tmp_path)]) == 0
    assert len(seen_during) == 2
    assert all(seen < interval and count > frozen for seen, count in seen_during)
    assert (sys.getswitchinterval(), gc.get_freeze_count()) == (interval, frozen)


def test_a_finished_trials_recording_is_freed_without_the_garbage_collector(tmp_path):
    """A trial's recording (its audio: megabytes a minute) is freed when the trial ends, not at
    the collector's next full pass, whatever reference cycles the adapter is in (an in-flight
    run's full passes took 70-90 ms with every finished trial's recording in them)."""
    from voicelab.recording import Recording

    loaded = voicelab.load_run(EXAMPLE)
    gc.collect()
    gc.disable()
    try:
        outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=3,
            artifacts_dir=tmp_path)))
        alive = [o for o in gc.get_objects() if type(o) is Recording]
    finally:
        gc.enable()
    assert outcome.report.passed_trials == 3
    assert alive == []
