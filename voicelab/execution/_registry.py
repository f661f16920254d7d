"""Choosing where a run's trials run: executors by name, like adapters.

``executor`` is a built-in name (:data:`EXECUTORS`), a dotted path to an executor class of a
plug-in (``my_pkg.executors.Batch``), an executor made by the caller (shared, e.g. by a sweep's
cells), or a ``dask.distributed.Client``. An executor class makes its instance for a run with
the classmethod ``for_run(workers=, scheduler=, parallel=)``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .._limits import MAX_WORKERS
from .._registry import Registry
from ..errors import ConfigError
from ._protocol import Executor, ExecutorFactory

#: Where trials run, by name (``--executor``): built-ins, then plug-ins' ``voicelab.executors``
#: entry points.
EXECUTORS = Registry("executor", group="voicelab.executors", builtins={
    "inline": "voicelab.execution._inline:InlineExecutor",
    "local": "voicelab.execution._local:LocalExecutor",
    "dask": "voicelab.execution._dask:DaskExecutor",
})


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)


def check_workers(workers: int | None, *, source: str | Path | None = None) -> int:
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or \
            not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"must be a whole number from 1 to {MAX_WORKERS}, got {workers!r}",
                          source=source, key="workers")
    return workers


def choose_executor(executor: Any, *, workers: int | None, scheduler: str | None,
                    parallel: int) -> tuple[Executor, bool]:
    """The executor a run uses and whether the run owns it (starts and closes it).

    ``None`` is ``inline`` (this event loop), or ``local`` when ``workers`` is given; ``local``
    with one worker (after capping by the trials that can run at once) is ``inline`` too; an
    executor instance is used as it is."""
    if isinstance(executor, Executor):
        return executor, False
    if executor is not None and not isinstance(executor, str):
        client = _dask_client(executor)
        if client is None:
            raise ConfigError(f"must be an executor name ({', '.join(EXECUTORS.names())}), a "
                              f"dotted path, an executor or a dask.distributed.Client, got "
                              f"{executor!r}", key="executor")
        return client, True
    if scheduler is not None and executor != "dask":
        raise ConfigError("a scheduler address needs the dask executor (--executor dask)",
                          key="scheduler")
    name = executor if executor is not None else "local" if workers is not None else "inline"
    factory: ExecutorFactory = EXECUTORS.resolve(name, key="executor")
    if not isinstance(factory, ExecutorFactory):
        raise ConfigError(f"{name!r} is not an executor class (no classmethod for_run)",
                          key="executor")
    made = factory.for_run(workers=workers, scheduler=scheduler, parallel=parallel)
    if not isinstance(made, Executor):
        raise ConfigError(f"{name!r} made {type(made).__name__}, which is not an executor "
                          "(description, shares_disk, start, open_run, close)", key="executor")
    return made, True


def _dask_client(candidate: Any) -> Executor | None:
    """The Dask executor of a ``dask.distributed.Client`` (None for anything else). A client
    exists only where ``distributed`` was imported: nothing is imported to tell."""
    distributed = sys.modules.get("distributed")
    if distributed is None or not isinstance(candidate, distributed.Client):
        return None
    dask: Any = EXECUTORS.resolve("dask")
    made: Executor = dask(client=candidate)
    return made
