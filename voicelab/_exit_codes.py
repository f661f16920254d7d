"""The exit codes of ``voice-evaluator`` (and of ``RunOutcome.exit_code``), defined once.

Every code a run, a sweep or a re-scored bundle ends with is decided here: a run's from its
trials (:func:`run_exit_code`), a sweep's from its cells (:func:`sweep_exit_code`), several at
once (:func:`worst_exit_code`), and a report that could not be written
(:func:`exit_code_after_writing`). The CLI adds the configuration error and the signal codes.
"""

from __future__ import annotations

import signal

__all__ = ["EXIT_CONFIG", "EXIT_EXECUTION", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_QUALITY",
           "EXIT_TERMINATED", "check_exit_code", "exit_code_after_writing", "run_exit_code", "sweep_exit_code",
           "worst_exit_code"]

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


def run_exit_code(*, passed: list[bool], executed: list[bool], planned: int,
                  interrupted: bool = False, gates_blocked: bool = False) -> int:
    """A run's exit code from its trials (``passed`` and ``executed`` per trial that ran), the
    number planned and its gates: 130 interrupted, 4 a trial failed to execute or did not run,
    3 a trial did not pass (pass^k; an inconclusive trial did not pass) or a gate blocks, else
    0. The one decision behind ``run``, ``sweep`` cells, ``resume`` and ``rescore``."""
    if interrupted:
        return EXIT_INTERRUPTED
    if not all(executed) or len(executed) < planned:
        return EXIT_EXECUTION
    if gates_blocked or not passed or not all(passed):
        return EXIT_QUALITY
    return EXIT_OK


def worst_exit_code(codes: list[int]) -> int:
    """Several runs' codes as one (a sweep, a rescore of several runs): interrupted, then an
    execution failure, then a quality failure, else 0."""
    for code in (EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_EXECUTION, EXIT_QUALITY):
        if code in codes:
            return code
    return EXIT_OK


def sweep_exit_code(cell_codes: list[int], *, planned_cells: int,
                    interrupted: bool = False) -> int:
    """A sweep's exit code from its cells' codes: 130 interrupted, else the worst cell's code
    (:func:`worst_exit_code`), a planned cell that did not run counting as an execution
    failure. The one decision behind ``sweep``, ``replay`` of a sweep and ``rescore``."""
    if interrupted:
        return EXIT_INTERRUPTED
    missing = [EXIT_EXECUTION] if len(cell_codes) < planned_cells else []
    return worst_exit_code([*cell_codes, *missing])


def exit_code_after_writing(code: int, *, write_failed: bool) -> int:
    """A run's (or sweep's) code once its files are written: a report or a trial folder that
    could not be written is an execution failure, unless the run already ended worse."""
    if write_failed and code in (EXIT_OK, EXIT_QUALITY):
        return EXIT_EXECUTION
    return code


def check_exit_code(*, connected: bool, failed: bool) -> int:
    """``voice-evaluator check``'s code: 4 the product could not be reached, 3 a point of the
    check failed, else 0."""
    if not connected:
        return EXIT_EXECUTION
    return EXIT_QUALITY if failed else EXIT_OK


def staged_sweep_exit_code(cell_codes: list[int], *, interrupted: bool, gate_failed: bool,
                           budget_stopped: bool) -> int:
    """A staged sweep's code: the worst of the cells that ran; a stage whose gate failed is a
    quality failure (3), stages it kept from running are not failures of their own; a stage
    the budget kept from running (or cut short) is an execution failure (4)."""
    if interrupted:
        return sweep_exit_code(cell_codes, planned_cells=len(cell_codes), interrupted=True)
    codes = list(cell_codes)
    if gate_failed:
        codes.append(EXIT_QUALITY)
    if budget_stopped:
        codes.append(EXIT_EXECUTION)
    return worst_exit_code(codes)
