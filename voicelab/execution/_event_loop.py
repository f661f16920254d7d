"""Which event loop voicelab's own processes run: uvloop when installed, else asyncio's.

Every arrival is stamped when the loop gets round to its socket, so a loop that spends less
time per wake-up stamps closer to the truth: uvloop (libuv, ``pip install 'voicelab[fast]'``)
does, measured in docs/performance.md. It is chosen only where voicelab owns the process: the
command line (:func:`voicelab.cli.main`) and the worker processes voicelab starts call
:func:`use_chosen_event_loop` once, before their first loop exists. A notebook kernel or an
application that calls :func:`voicelab.run` keeps the loop it has: choosing a loop is
process-global.

``VOICELAB_EVENT_LOOP`` overrides the choice: ``asyncio`` (the standard library's loop),
``uvloop`` (required: a clear error when it is not installed) or ``auto`` (the default). Worker
processes inherit the variable, so one setting holds for every process of a run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
from typing import Literal

from ..errors import ConfigError, MissingDependencyError

logger = logging.getLogger(__name__)

#: The environment variable that chooses the event loop of voicelab's own processes.
EVENT_LOOP_VARIABLE = "VOICELAB_EVENT_LOOP"
EventLoopName = Literal["asyncio", "uvloop"]
_CHOICES = ("auto", "asyncio", "uvloop")


def chosen_event_loop() -> EventLoopName:
    """The loop :func:`use_chosen_event_loop` installs here, from ``VOICELAB_EVENT_LOOP`` and
    whether uvloop is installed. Raises :class:`ConfigError` for an unknown value, or for
    ``uvloop`` when it is not installed (:class:`MissingDependencyError`)."""
    wanted = os.environ.get(EVENT_LOOP_VARIABLE, "auto").strip().lower() or "auto"
    if wanted not in _CHOICES:
        raise ConfigError(f"{EVENT_LOOP_VARIABLE}={wanted!r}: expected one of "
                          f"{', '.join(_CHOICES)}")
    installed = importlib.util.find_spec("uvloop") is not None
    if wanted == "uvloop" and not installed:
        raise MissingDependencyError("uvloop", extra="fast",
                                     purpose=f"{EVENT_LOOP_VARIABLE}=uvloop")
    if wanted == "asyncio" or not installed:
        return "asyncio"
    return "uvloop"


def use_chosen_event_loop() -> EventLoopName:
    """Make the loops this process creates from now on (``asyncio.run``,
    ``asyncio.new_event_loop``) the chosen kind; for a process voicelab owns, never a library
    caller's. Returns the kind."""
    name = chosen_event_loop()
    if name == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return name


def running_event_loop() -> str:
    """The running loop's kind, for the run's log: ``uvloop`` or ``asyncio``, and for a loop of
    any other kind its module."""
    module = type(asyncio.get_running_loop()).__module__
    if module.startswith("uvloop"):
        return "uvloop"
    return "asyncio" if module.startswith("asyncio") else module


def event_loop_description() -> str:
    """For the run's log (evaluator.log): the loop this process runs and the one voicelab's
    worker processes choose (``VOICELAB_EVENT_LOOP`` and what is installed)."""
    try:
        workers: str = chosen_event_loop()
    except ConfigError as error:
        workers = f"none ({error})"
    return f"{running_event_loop()} (worker processes: {workers})"
