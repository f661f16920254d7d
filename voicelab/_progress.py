"""A tqdm progress bar as an ``on_trial_done`` hook, for the CLI and for notebooks.

    progress = voicelab.TrialProgress()                 # tqdm.auto: a widget in Jupyter
    await voicelab.arun(loaded, trials=20, on_trial_done=progress)

The bar is created at the first finished trial (the total is known then) and closed at the
last; a resumed run starts from the trials it already has. tqdm is imported on first use.
"""

from __future__ import annotations

from typing import IO, Any


class TrialProgress:
    """Counts finished trials and how many did not pass. ``auto=True`` (the default) uses
    ``tqdm.auto`` (a notebook widget, text elsewhere); ``auto=False`` the text bar, written to
    ``file`` (default stderr). ``enabled=False`` draws nothing."""

    def __init__(self, *, description: str = "trials", auto: bool = True,
                 file: IO[str] | None = None, enabled: bool = True):
        self.description = description
        self.auto = auto
        self.file = file
        self.enabled = enabled
        self.failed = 0
        self._bar: Any = None

    def __call__(self, result: Any, done: int, total: int) -> None:
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
            self._bar.close()
            self._bar = None
