"""Progress as an ``on_trial_done`` hook, for the CLI and for notebooks.

    progress = voicelab.TrialProgress()                 # tqdm.auto: a widget in Jupyter
    await voicelab.arun(loaded, voicelab.RunOptions(trials=20, on_trial_done=progress))

:class:`TrialProgress` is a tqdm bar, created at the first finished trial (the total is known
then) and closed at the last; a resumed run starts from the trials it already has. tqdm is
imported on first use. :class:`TrialLines` is the same for a log without a terminal (CI): a
bar's redraws are unreadable there, so it writes a first line when the run starts, one line
per finished trial as it finishes (the CLI gives it the line its summary would print, and the
summary then leaves them out) and every ``every_seconds`` a line with the counts.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm

    from .execution import ObservedRun
    from .runner import TrialResult


class TrialProgress:
    """Counts finished trials and how many did not pass. ``auto=True`` (the default) uses
    ``tqdm.auto`` (a notebook widget, text elsewhere) and prints the final count as a line when
    the bar closes (a notebook exported to HTML without its widgets still shows it);
    ``auto=False`` the text bar, written to ``file`` (default stderr). ``enabled=False`` draws
    nothing."""

    def __init__(self, *, description: str = "trials", auto: bool = True,
                 file: IO[str] | None = None, enabled: bool = True):
        self.description = description
        self.auto = auto
        self.file = file
        self.enabled = enabled
        self.failed = 0
        self._bar: tqdm | None = None

    def __call__(self, result: TrialResult, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            if self.auto:
                from tqdm.auto import tqdm
            else:
                from tqdm import tqdm
            self._bar = tqdm(total=total, desc=self.description, unit="trial", file=self.file,
                             dynamic_ncols=True, leave=True)
        if not result.report.passed:
            self.failed += 1
        self._bar.set_postfix_str(f"{result.summary.trial_id} "
                                  f"{'pass' if result.report.passed else 'FAIL'}, "
                                  f"{self.failed} failed", refresh=False)
        self._bar.update(max(0, done - self._bar.n))
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            done, total = self._bar.n, self._bar.total
            self._bar.close()
            self._bar = None
            if self.auto:  # a notebook: the count also as text, which an exported page keeps
                print(f"{self.description}: {done}/{total} trials finished, {self.failed} not "
                      "passed")


def _trial_text(result: TrialResult) -> str:
    summary = result.summary
    return f"{summary.trial_id} seed {summary.seed}: {'pass' if summary.passed else 'FAIL'}"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


class TrialLines:
    """Progress for a log: a first line at once, a line per finished trial in the order they
    finish, and a periodic count (see the module docstring). ``describe(result)`` is a finished
    trial's line (default: id, seed, pass or FAIL), prefixed with the count (``[2/10]``), to
    ``trials_file`` (default: ``file``, where the first line and the counts go);
    ``cells=True`` also names the trial's scenario / persona / environment (a sweep).
    ``every_seconds=None``: no periodic line. Call :meth:`close` at the end.

    It is also a run observer (:class:`voicelab.execution.RunObserver`): given to a run's
    ``observers``, it says what starts as soon as the bundle is open (:meth:`starting`), long
    before the first trial has finished."""

    def __init__(self, *, file: IO[str] | None = None, every_seconds: float | None = 30.0,
                 cells: bool = False, describe: Callable[[TrialResult], str] = _trial_text,
                 clock: Callable[[], float] = time.monotonic,
                 trials_file: IO[str] | None = None):
        self.file = file
        #: where the line per finished trial goes (default: ``file``, with the counts)
        self.trials_file = trials_file
        self.cells = cells
        self.describe = describe
        self.failed = 0
        self.done = 0
        self.total: int | None = None
        #: whether a line per finished trial was written (a summary need not repeat them)
        self.printed_trials = False
        self._started_line = False
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if every_seconds is not None:
            self._thread = threading.Thread(target=self._tick, args=(every_seconds,),
                                            name="voicelab-progress", daemon=True)
            self._thread.start()

    def _write(self, line: str, *, file: IO[str] | None = None) -> None:
        with self._lock:
            print(line, file=file or self.file or sys.stderr, flush=True)

    def starting(self, line: str) -> None:
        """The first line, once (``starting 10 trial(s) ...``)."""
        if not self._started_line:
            self._started_line = True
            self._write(line)

    def __call__(self, result: TrialResult, done: int, total: int) -> None:
        if not result.report.passed:
            self.failed += 1
        # never backwards: the count is the run's, which grows by one per finished trial
        self.done, self.total = max(self.done, done), total
        prefix = f"[{self.done}/{total}] "
        if self.cells:
            report = result.report
            prefix += f"{report.scenario_id} / {report.persona} / {report.environment}: "
        self._write(prefix + self.describe(result), file=self.trials_file)
        self.printed_trials = True
        if done >= total:
            self._write(self.progress_line())

    def progress_line(self) -> str:
        """``progress: 4/10 trials finished, 1 not passed, 40s elapsed, about 1m00s to go``."""
        elapsed = self._clock() - self._started
        if self.total is None:
            return f"progress: no trial finished yet, {_duration(elapsed)} elapsed"
        line = (f"progress: {self.done}/{self.total} trials finished, {self.failed} not passed, "
                f"{_duration(elapsed)} elapsed")
        remaining = self.total - self.done
        if remaining > 0 and self.done > 0:
            line += f", about {_duration(elapsed / self.done * remaining)} to go"
        return line

    def _tick(self, every_seconds: float) -> None:
        while not self._stop.wait(every_seconds):
            self._write(self.progress_line())

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # --- a run observer: the first line as soon as the run's bundle is open --------------------

    def run_started(self, run: ObservedRun) -> None:
        if not self.cells:  # a sweep's first line is its plan, said before any cell opens
            self.starting(f"starting {run.planned} trial(s) of {run.scenario} / {run.persona} "
                          f"/ {run.environment} against {run.adapter}: bundle {run.bundle}")

    def trial_started(self, run: ObservedRun, trial: int) -> None:
        pass

    def trial_finished(self, run: ObservedRun, result: TrialResult) -> None:
        pass  # counted by __call__ (on_trial_done), which a sweep sums over its cells

    def run_ending(self, run: ObservedRun, *, status: str) -> None:
        return None
