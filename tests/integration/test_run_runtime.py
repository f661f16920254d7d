"""A run tunes the process for its duration only (GIL switch interval, frozen old objects),
also when runs overlap on one event loop."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path

import voicelab

EXAMPLE = Path(__file__).parents[2] / "examples" / "run-workload-neutral-voice.yaml"


def test_overlapping_runs_restore_the_switch_interval_and_garbage_collection(tmp_path):
    loaded = voicelab.load_run(EXAMPLE)
    interval = sys.getswitchinterval()
    frozen = gc.get_freeze_count()
    seen_during: list[tuple[float, int]] = []

    async def both():
        async def watch():
            await asyncio.sleep(0.05)
            seen_during.append((sys.getswitchinterval(), gc.get_freeze_count()))

        outcomes = await asyncio.gather(
            voicelab.arun(loaded, trials=2, artifacts_dir=tmp_path / "a"),
            voicelab.arun(loaded, trials=3, artifacts_dir=tmp_path / "b"), watch())
        return outcomes[:2]

    first, second = asyncio.run(both())
    assert first.report.passed_trials == 2 and second.report.passed_trials == 3
    assert seen_during[0][0] < interval and seen_during[0][1] > frozen
    assert sys.getswitchinterval() == interval
    assert gc.get_freeze_count() == frozen


def test_a_finished_trials_recording_is_freed_without_the_garbage_collector(tmp_path):
    """A trial's recording (its audio: megabytes a minute) is freed when the trial ends, not at
    the collector's next full pass, whatever reference cycles the adapter is in (an in-flight
    run's full passes took 70-90 ms with every finished trial's recording in them)."""
    from voicelab.recording import Recording

    loaded = voicelab.load_run(EXAMPLE)
    gc.collect()
    gc.disable()
    try:
        outcome = asyncio.run(voicelab.arun(loaded, trials=3, artifacts_dir=tmp_path))
        alive = [o for o in gc.get_objects() if type(o) is Recording]
    finally:
        gc.enable()
    assert outcome.report.passed_trials == 3
    assert alive == []
