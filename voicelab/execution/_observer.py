"""Run observers: who else hears of a run's trials as they start and finish (telemetry).

An observer is told, in the run's own process, when the run starts, when each trial is handed
to the executor and when each has settled (its bundle folder complete), and is asked to finish
before the final report is written; what it returns from :meth:`RunObserver.run_ending` goes
into the run report (``telemetry``). The calls come from the run's event loop, so an observer
only counts or hands work to a thread of its own: it never blocks the loop that stamps
arrivals. An observer that raises is logged and dropped, never the run's failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..artifacts import TelemetryExport
from ..runner import TrialResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ObservedRun:
    """The run an observer hears of: which cell of which matrix, and where its bundle is."""

    run_id: str
    bundle: Path
    scenario: str
    persona: str
    environment: str
    adapter: str
    planned: int
    label: str | None = None


@runtime_checkable
class RunObserver(Protocol):
    """What a run tells an observer (:func:`voicelab.arun`'s ``observers``)."""

    def run_started(self, run: ObservedRun) -> None:
        """The bundle is open; no trial has started."""

    def trial_started(self, run: ObservedRun, trial: int) -> None:
        """Trial number ``trial`` (or a retry of it) is handed to the executor."""

    def trial_finished(self, run: ObservedRun, result: TrialResult) -> None:
        """The trial settled: its folder under ``run.bundle`` is complete (or it is lost)."""

    def run_ending(self, run: ObservedRun, *, status: str) -> TelemetryExport | None:
        """Every trial settled; finish (flush) within a bounded time. Called from a thread.
        The returned section goes into the final run report."""


class Observers:
    """The run's observers, each call guarded: an observer's bug is logged once and that
    observer is dropped for the rest of the run."""

    def __init__(self, observers: Sequence[RunObserver]):
        self._observers = list(observers)

    def __bool__(self) -> bool:
        return bool(self._observers)

    def _drop(self, observer: RunObserver, what: str) -> None:
        logger.warning("run observer %s failed in %s and is dropped for this run",
                       type(observer).__name__, what, exc_info=True)
        self._observers = [o for o in self._observers if o is not observer]

    def run_started(self, run: ObservedRun) -> None:
        for observer in list(self._observers):
            try:
                observer.run_started(run)
            except Exception:  # noqa: BLE001 - an observer never fails the run
                self._drop(observer, "run_started")

    def trial_started(self, run: ObservedRun, trial: int) -> None:
        for observer in list(self._observers):
            try:
                observer.trial_started(run, trial)
            except Exception:  # noqa: BLE001
                self._drop(observer, "trial_started")

    def trial_finished(self, run: ObservedRun, result: TrialResult) -> None:
        for observer in list(self._observers):
            try:
                observer.trial_finished(run, result)
            except Exception:  # noqa: BLE001
                self._drop(observer, "trial_finished")

    async def run_ending(self, run: ObservedRun, *, status: str) -> TelemetryExport | None:
        """Each observer's bounded finish, off the loop; the last section one returned."""
        section: TelemetryExport | None = None
        for observer in list(self._observers):
            try:
                returned = await asyncio.to_thread(observer.run_ending, run, status=status)
            except Exception:  # noqa: BLE001
                self._drop(observer, "run_ending")
                continue
            if returned is not None:
                section = returned
        return section
