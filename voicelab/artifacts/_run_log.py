"""A run's evaluator.log: the package's records of that run, through the bundle's filter of words
(its secrets; its redaction rules when the run redacts).

Runs may overlap on one event loop (a sweep's cells); each record belongs to the run whose
context logged it (a context variable set by the run, inherited by its trials' tasks), and only
that run's file gets it. While runs are in progress the package logger lets INFO records through
(evaluator.log keeps them); its level is restored when the last run ends, and handlers
elsewhere keep their own levels.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
from pathlib import Path

from ..errors import os_reason
from ._members import open_member_append
from ._privacy import Redacts

_current_run: contextvars.ContextVar[str | None] = contextvars.ContextVar("voicelab_run",
                                                                          default=None)
_FORMATTER = logging.Formatter()


class _RunLogFilter(logging.Filter):
    def __init__(self, run_id: str, words: Redacts):
        super().__init__()
        self.run_id = run_id
        self.words = words

    def filter(self, record: logging.LogRecord) -> bool:
        if _current_run.get() != self.run_id:
            return False
        record.msg = self.words.text(record.getMessage())
        record.args = None
        if record.exc_info:  # a traceback's text may quote a secret too: filter it formatted
            record.exc_text = self.words.text(_FORMATTER.formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:  # a child process's record: formatted over there
            record.exc_text = self.words.text(record.exc_text)
        return True


class _BundleLogHandler(logging.StreamHandler):
    """evaluator.log, appended to (a resumed run continues it) but never through a link; a
    write failure (a full disk) stops the file quietly instead of printing a traceback per
    record to stderr; the run reports the failure once."""

    failed: str | None = None

    def __init__(self, path: Path):
        super().__init__(open_member_append(path))

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            super().close()

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        if self.failed is None:
            error = sys.exc_info()[1]
            self.failed = (os_reason(error) if error is not None else None) \
                or type(error).__name__


class _InfoWhileRunning:
    """The package logger's level is INFO (unless it is finer) while runs are in progress."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs = 0
        self._level = logging.NOTSET

    def enter(self) -> None:
        with self._lock:
            if self._runs == 0:
                package = logging.getLogger("voicelab")
                self._level = package.level
                if package.level == logging.NOTSET or package.level > logging.INFO:
                    package.setLevel(logging.INFO)
            self._runs += 1

    def exit(self) -> None:
        with self._lock:
            self._runs -= 1
            if self._runs == 0:
                logging.getLogger("voicelab").setLevel(self._level)


_INFO_WHILE_RUNNING = _InfoWhileRunning()


class RunLog:
    """The run's evaluator.log while the run is in progress (``with``); opening it may raise
    (OSError, a link in its place)."""

    def __init__(self, path: Path, *, run_id: str, words: Redacts):
        self.run_id = run_id
        self.handler = _BundleLogHandler(path)
        self.handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.handler.addFilter(_RunLogFilter(run_id, words))
        self.handler.setLevel(logging.INFO)
        self._token: contextvars.Token[str | None] | None = None

    @property
    def failed(self) -> str | None:
        """Why the file stopped being written (a full disk), if it did."""
        return self.handler.failed

    def __enter__(self) -> RunLog:
        logging.getLogger("voicelab").addHandler(self.handler)
        self._token = _current_run.set(self.run_id)
        _INFO_WHILE_RUNNING.enter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _current_run.reset(self._token)
        _INFO_WHILE_RUNNING.exit()
        logging.getLogger("voicelab").removeHandler(self.handler)
        self.handler.close()
