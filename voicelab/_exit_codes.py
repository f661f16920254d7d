"""The exit codes of ``voice-evaluator`` (and of ``RunOutcome.exit_code``), defined once.

The runner decides a run's code (passed, a critical verdict failed, a trial failed to execute,
interrupted); the CLI adds the configuration error and the signal codes.
"""

from __future__ import annotations

import signal

__all__ = ["EXIT_CONFIG", "EXIT_EXECUTION", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_QUALITY",
           "EXIT_TERMINATED"]

#: All trials executed and passed pass^k.
EXIT_OK = 0
#: A configuration, asset or override error (nothing ran).
EXIT_CONFIG = 2
#: Execution finished but a critical verdict failed.
EXIT_QUALITY = 3
#: A trial or provider failed to execute.
EXIT_EXECUTION = 4
#: Interrupted (Ctrl-C / SIGINT) after writing what was gathered: 128 + SIGINT, as shells report.
EXIT_INTERRUPTED = 130
#: Stopped by SIGTERM (CI systems, container runtimes) after writing what was gathered.
EXIT_TERMINATED = 128 + signal.SIGTERM
